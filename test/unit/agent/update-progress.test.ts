import { describe, expect, it } from 'vitest';
import {
  canMove,
  commandOutcomeOf,
  firmwareReportOf,
  progressToReport,
  resumeStepOf,
  type UpdatePhase,
} from '../../../agent/core/update-progress.js';
import { FirmwareStatusReport } from '../../../shared/device-api.js';

describe('canMove', () => {
  const cases: Array<[UpdatePhase, UpdatePhase, boolean]> = [
    ['download_scheduled', 'downloading', true],
    ['downloading', 'downloading', true],
    ['downloading', 'downloaded', true],
    ['downloading', 'installing', false],
    ['downloading', 'invalid_signature', true],
    ['install_scheduled', 'install_failed', true],
    ['downloaded', 'signature_verified', true],
    ['downloaded', 'invalid_signature', true],
    ['downloaded', 'installing', false],
    ['signature_verified', 'install_scheduled', true],
    ['install_scheduled', 'install_scheduled', true],
    ['install_scheduled', 'installing', true],
    ['installing', 'install_rebooting', true],
    ['install_rebooting', 'installed', true],
    ['install_rebooting', 'install_verification_failed', true],
    ['installed', 'installing', false],
    ['invalid_signature', 'downloading', false],
    ['rolled_back', 'installed', false],
  ];
  for (const [from, to, ok] of cases) {
    it(`${from} → ${to}: ${ok}`, () => expect(canMove(from, to)).toBe(ok));
  }
});

describe('resumeStepOf', () => {
  const cases: Array<[UpdatePhase, 'firmware' | 'agent', string]> = [
    ['download_scheduled', 'firmware', 'download'],
    ['downloading', 'agent', 'download'],
    ['downloaded', 'firmware', 'verify'],
    ['signature_verified', 'firmware', 'schedule_install'],
    ['install_scheduled', 'agent', 'schedule_install'],
    ['installing', 'firmware', 'confirm_firmware'],
    ['install_rebooting', 'firmware', 'confirm_firmware'],
    ['installing', 'agent', 'confirm_agent'],
    ['installed', 'firmware', 'none'],
    ['invalid_signature', 'agent', 'none'],
    ['rolled_back', 'agent', 'none'],
  ];
  for (const [phase, kind, step] of cases) {
    it(`${phase} (${kind}) resumes with ${step}`, () => expect(resumeStepOf(phase, kind)).toBe(step));
  }
});

describe('progressToReport', () => {
  const cases: Array<{ last?: number; bytes: number; total: number; expected?: number }> = [
    { bytes: 0, total: 1000 },
    { bytes: 99, total: 1000 },
    { bytes: 100, total: 1000, expected: 10 },
    { last: 10, bytes: 150, total: 1000 },
    { last: 10, bytes: 350, total: 1000, expected: 30 },
    { last: 90, bytes: 999, total: 1000 },
    { last: 90, bytes: 1000, total: 1000 }, // 100 is `downloaded`'s
    { bytes: 5, total: 0 },
    { last: 40, bytes: 3, total: 7, expected: undefined }, // 42 %: still the 40 step
    { last: 40, bytes: 4, total: 7, expected: 50 },
  ];
  for (const c of cases) {
    it(`${c.bytes}/${c.total} after ${c.last ?? 'nothing'} → ${c.expected ?? 'no report'}`, () =>
      expect(progressToReport(c.last, c.bytes, c.total)).toBe(c.expected));
  }
});

describe('firmwareReportOf', () => {
  it('builds a report the platform schema takes, the message on one line and clipped', () => {
    const report = firmwareReportOf({
      updateId: 'upd-1',
      reportId: 'r-1',
      phase: 'install_failed',
      at: '2026-01-14T10:00:00.000Z',
      version: '2.0.0',
      message: `line one\nline two ${'x'.repeat(2000)}`,
    });
    expect(FirmwareStatusReport.safeParse(report).success).toBe(true);
    expect(report.message).not.toMatch(/\n/);
    expect(report).toMatchObject({ status: 'install_failed', update_id: 'upd-1', report_id: 'r-1' });
  });
});

describe('commandOutcomeOf', () => {
  const cases: Array<[UpdatePhase, string | undefined]> = [
    ['installed', 'succeeded'],
    ['install_failed', 'failed'],
    ['invalid_signature', 'failed'],
    ['rolled_back', 'failed'],
    ['install_scheduled', undefined],
  ];
  for (const [phase, outcome] of cases)
    it(`${phase} → ${outcome}`, () => expect(commandOutcomeOf(phase)).toBe(outcome));
});
