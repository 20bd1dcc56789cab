import { describe, expect, it } from 'vitest';
import {
  commandExpiryMs,
  dischargeRefusal,
  type OperatorCommandKind,
  scheduleRefusal,
  stopReason,
} from '../../../platform/domain/operator-commands.js';
import type { SlotAction } from '../../../shared/index.js';

const T = Date.UTC(2026, 5, 1, 12, 0, 0);

describe('commandExpiryMs: counted from the command’s creation', () => {
  it.each([
    ['stop', T + 15 * 60_000],
    ['start', T + 15 * 60_000],
    ['discharge', T + 15 * 60_000],
    ['set_schedule', T + 7 * 86_400_000],
    ['delete_schedule', T + 7 * 86_400_000],
  ] as const)('%s: %d', (kind: OperatorCommandKind, want) => {
    expect(commandExpiryMs(kind, T)).toBe(want);
  });
});

describe('stopReason', () => {
  it.each([
    [undefined, 'user_request'],
    ['emergency', 'emergency'],
    ['user_request', 'user_request'],
  ])('given %s: %s', (given, want) => {
    expect(stopReason(given)).toBe(want);
  });
});

describe('dischargeRefusal', () => {
  it.each([
    [true, undefined],
    [false, 'Connector is not V2G-capable'],
  ])('V2G-capable %s: %s', (v2g, want) => {
    expect(dischargeRefusal(v2g)).toBe(want);
  });
});

describe('scheduleRefusal: discharge slots need a V2G-capable connector', () => {
  const refused = 'Connector is not V2G-capable; discharge slots are not allowed';
  it.each<[boolean, SlotAction[], string | undefined]>([
    [true, ['charge'], undefined],
    [true, ['charge', 'discharge'], undefined],
    [true, ['discharge'], undefined],
    [false, ['charge'], undefined],
    [false, ['charge', 'idle'], undefined],
    [false, ['discharge'], refused],
    [false, ['charge', 'idle', 'discharge'], refused],
  ])('V2G-capable %s, slots %j: %s', (v2g, actions, want) => {
    expect(
      scheduleRefusal(
        v2g,
        actions.map((action) => ({ action })),
      ),
    ).toBe(want);
  });
});
