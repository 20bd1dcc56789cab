import { describe, expect, it } from 'vitest';
import { isOnline, latestSeenState, seenStateOfRow } from '../../../platform/domain/liveness-rule.js';

const WINDOW = 90_000;
const NOW = 1_000_000_000;

describe('isOnline', () => {
  it.each([
    [NOW, false, true],
    [NOW - WINDOW, false, true],
    [NOW - WINDOW - 1, false, false],
    [NOW, true, false],
    [null, false, false],
  ])('last seen %s, offline %s: %s', (lastSeenMs, offline, want) => {
    expect(isOnline({ lastSeenMs, offline }, NOW, WINDOW)).toBe(want);
  });
});

describe('seenStateOfRow: what a stored row says after a restart', () => {
  it.each([
    // reported_status, last_seen_ms, last_heartbeat_ms, offline
    ['online', NOW, NOW, false],
    [null, NOW, null, false],
    ['offline', NOW, NOW, true],
    ['offline', NOW - 5, NOW, true],
    // A request after the goodbye heartbeat: back.
    ['offline', NOW + 5, NOW, false],
    ['offline', null, NOW, true],
    ['offline', 5, null, false],
  ] as const)(
    'reported %s, seen %s, heartbeat %s: offline %s',
    (reported_status, last_seen_ms, last_heartbeat_ms, offline) => {
      expect(seenStateOfRow({ reported_status, last_seen_ms, last_heartbeat_ms })).toEqual({
        lastSeenMs: last_seen_ms,
        offline,
      });
    },
  );
});

describe('latestSeenState: this instance against what another instance stored', () => {
  const row = (
    reported_status: string | null,
    last_seen_ms: number | null,
    last_heartbeat_ms: number | null,
  ) => ({
    reported_status,
    last_seen_ms,
    last_heartbeat_ms,
  });
  it.each([
    // local entry, stored row, expected
    [
      'nothing local: the row',
      undefined,
      row('online', NOW - 10, NOW - 10),
      { lastSeenMs: NOW - 10, offline: false },
    ],
    [
      'local newer',
      { ms: NOW, offline: false },
      row('online', NOW - 10, NOW - 10),
      { lastSeenMs: NOW, offline: false },
    ],
    [
      'seen later elsewhere',
      { ms: NOW - 100_000, offline: false },
      row('online', NOW - 5, NOW - 5),
      { lastSeenMs: NOW - 5, offline: false },
    ],
    [
      'said goodbye elsewhere after our last sight',
      { ms: NOW - 50, offline: false },
      row('offline', NOW - 60, NOW - 10),
      { lastSeenMs: NOW - 60, offline: true },
    ],
    [
      'our goodbye, stored as it was (tie): local stands',
      { ms: NOW - 10, offline: true },
      row('offline', NOW - 20, NOW - 10),
      { lastSeenMs: NOW - 10, offline: true },
    ],
    [
      'back after our goodbye, seen elsewhere',
      { ms: NOW - 10, offline: true },
      row('offline', NOW - 2, NOW - 10),
      { lastSeenMs: NOW - 2, offline: false },
    ],
    ['never stored', { ms: NOW, offline: false }, row(null, null, null), { lastSeenMs: NOW, offline: false }],
  ] as const)('%s', (_name, local, stored, want) => {
    expect(latestSeenState(local, stored)).toEqual(want);
  });
});
