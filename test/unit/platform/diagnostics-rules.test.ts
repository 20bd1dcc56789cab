import { describe, expect, it } from 'vitest';
import {
  diagnosticsFailedBy,
  diagnosticsWindow,
  parseContentRange,
  uploadConflict,
} from '../../../platform/domain/diagnostics.js';

/** The pure rules of diagnostics (platform/domain/diagnostics.ts, DESIGN.md §20). */

const NOW = Date.UTC(2026, 5, 1, 12);
const HOUR = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString();

describe('the window of logs', () => {
  it.each([
    ['nothing: the last 24 hours', {}, { startMs: NOW - 24 * HOUR, endMs: NOW }],
    [
      'an end only: the 24 hours before it',
      { end_time: iso(NOW - HOUR) },
      { startMs: NOW - 25 * HOUR, endMs: NOW - HOUR },
    ],
    ['a start only: until now', { start_time: iso(NOW - 2 * HOUR) }, { startMs: NOW - 2 * HOUR, endMs: NOW }],
    [
      'exactly 31 days',
      { start_time: iso(NOW - 31 * 24 * HOUR), end_time: iso(NOW) },
      { startMs: NOW - 31 * 24 * HOUR, endMs: NOW },
    ],
    [
      'an end a few minutes ahead (clock skew)',
      { end_time: iso(NOW + 4 * 60_000) },
      { startMs: NOW + 4 * 60_000 - 24 * HOUR, endMs: NOW + 4 * 60_000 },
    ],
  ])('%s', (_label, asked, window) => {
    expect(diagnosticsWindow(asked, NOW)).toEqual(window);
  });

  it.each([
    ['longer than 31 days', { start_time: iso(NOW - 31 * 24 * HOUR - 1), end_time: iso(NOW) }, 'start_time'],
    ['ending in the future', { end_time: iso(NOW + 6 * 60_000) }, 'end_time'],
    ['starting after now, with no end', { start_time: iso(NOW + 1) }, 'start_time'],
    ['empty', { start_time: iso(NOW - HOUR), end_time: iso(NOW - HOUR) }, 'start_time'],
  ])('refuses a window %s, naming %s', (_label, asked, field) => {
    const out = diagnosticsWindow(asked, NOW);
    expect('refusal' in out && out.refusal.field).toBe(field);
  });
});

describe('Content-Range', () => {
  it.each([
    ['bytes 0-9/10', { first: 0, last: 9, size: 10 }],
    [' bytes 5-5/6 ', { first: 5, last: 5, size: 6 }],
    ['bytes 0-9/20971520', { first: 0, last: 9, size: 20_971_520 }],
  ])('%s', (header, range) => {
    expect(parseContentRange(header)).toEqual(range);
  });
  it.each([
    undefined,
    '',
    'bytes 0-9',
    'bytes */10',
    'bytes 5-4/10',
    'bytes 0-10/10',
    'bytes -1-9/10',
    'items 0-9/10',
    'bytes 0-9/10, bytes 10-19/20',
    'bytes 0-99999999999999999/99999999999999999',
  ])('refuses %j', (header) => {
    expect(parseContentRange(header)).toBeUndefined();
  });
});

describe('whether an upload may go on', () => {
  const range = { first: 100, last: 199, size: 200 };
  it('only from what the record holds, with the size it was declared with, while it is open', () => {
    expect(uploadConflict({ status: 'uploading', size: 200, received: 100 }, range)).toBeUndefined();
    expect(
      uploadConflict({ status: 'requested', size: null, received: 0 }, { ...range, first: 0 }),
    ).toBeUndefined();
    expect(uploadConflict({ status: 'uploading', size: 200, received: 50 }, range)).toMatch(/holds 50 bytes/);
    expect(uploadConflict({ status: 'uploading', size: 300, received: 100 }, range)).toMatch(/300 bytes/);
    expect(uploadConflict({ status: 'available', size: 200, received: 200 }, range)).toMatch(/already/);
    expect(uploadConflict({ status: 'failed', size: null, received: 0 }, range)).toMatch(/failed/);
  });
});

describe('which command outcomes fail a request', () => {
  const command = (status: string, reason: string | null = null, kind = 'upload_diagnostics') => ({
    command: kind,
    status,
    reason,
    params: { diagnostics_id: 'diag_1' },
  });
  it('failed, rejected, expired and cancelled, with the command’s reason', () => {
    expect(diagnosticsFailedBy(command('failed', 'disk full'))).toEqual({
      diagnosticsId: 'diag_1',
      reason: 'disk full',
    });
    expect(diagnosticsFailedBy(command('rejected'))).toEqual({
      diagnosticsId: 'diag_1',
      reason: 'the charger reported the command rejected',
    });
    expect(diagnosticsFailedBy(command('expired'))).toEqual({
      diagnosticsId: 'diag_1',
      reason: 'no report before expiry',
    });
    expect(diagnosticsFailedBy(command('cancelled'))?.reason).toBe('cancelled by operator');
  });
  it('not the others, nor another command’s', () => {
    for (const status of ['queued', 'delivered', 'accepted', 'succeeded'])
      expect(diagnosticsFailedBy(command(status))).toBeUndefined();
    expect(diagnosticsFailedBy(command('failed', 'x', 'reset'))).toBeUndefined();
  });
});
