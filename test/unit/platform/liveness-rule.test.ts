import { describe, expect, it } from 'vitest';
import { isOnline, seenStateOfRow } from '../../../platform/domain/liveness-rule.js';

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
