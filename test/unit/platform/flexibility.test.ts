import { describe, expect, it } from 'vitest';
import {
  controlCommandParams,
  controlOperatorIds,
  controlProgress,
  distinctTargetIds,
  effectiveControlStatus,
  foreignOperatorId,
  mayFollowControl,
  planCancellation,
} from '../../../platform/domain/flexibility.js';
import type { CommandStatus } from '../../../shared/index.js';

const T = Date.UTC(2026, 5, 1, 12, 0, 0);

describe('controlCommandParams', () => {
  it('carries the request, the control id and the window in absolute time', () => {
    const { params, endMs } = controlCommandParams({ power_limit_percent: 50, duration: 900 }, 'ctl_1', T);
    expect(params).toEqual({
      power_limit_percent: 50,
      duration: 900,
      control_id: 'ctl_1',
      starts_at: '2026-06-01T12:00:00.000Z',
      ends_at: '2026-06-01T12:15:00.000Z',
    });
    expect(endMs).toBe(T + 900_000);
  });
});

describe('effectiveControlStatus', () => {
  it.each([
    ['executing', T + 1, 'executing'],
    ['executing', T, 'completed'],
    ['executing', T - 1, 'completed'],
    ['completed', T + 1, 'completed'],
    ['cancelled', T + 1, 'cancelled'],
    ['cancelled', T - 1, 'cancelled'],
  ] as const)('stored %s, ends at T%+d ms: %s', (stored, endsMs, want) => {
    expect(effectiveControlStatus(stored, endsMs, T)).toBe(want);
  });
});

describe('controlProgress', () => {
  it('counts the commands by status', () => {
    const statuses: CommandStatus[] = ['queued', 'succeeded', 'succeeded', 'expired'];
    expect(controlProgress(statuses.map((status) => ({ status })))).toEqual({
      queued: 1,
      succeeded: 2,
      expired: 1,
    });
    expect(controlProgress([])).toEqual({});
  });
});

describe('planCancellation', () => {
  const control = { status: 'executing' as const, ends_ms: T + 60_000, params: { power_limit_percent: 0 } };
  const commands = (
    [
      ['d-queued', 'queued'],
      ['d-delivered', 'delivered'],
      ['d-accepted', 'accepted'],
      ['d-succeeded', 'succeeded'],
      ['d-failed', 'failed'],
      ['d-rejected', 'rejected'],
      ['d-expired', 'expired'],
      ['d-cancelled', 'cancelled'],
    ] as const
  ).map(([device_id, status]) => ({ device_id, status }));

  it('reverses the control on every charger that may hold it, with the window ended now', () => {
    expect(planCancellation(control, commands, T)).toEqual({
      kind: 'cancel',
      reversalDeviceIds: ['d-delivered', 'd-accepted', 'd-succeeded', 'd-failed', 'd-rejected'],
      reversalParams: { power_limit_percent: 0, ends_at: new Date(T).toISOString() },
      reversalExpiryMs: T + 60_000,
    });
  });

  it.each([
    [{ ...control, status: 'cancelled' as const }, 'Control is already cancelled'],
    [{ ...control, status: 'completed' as const }, 'Control is already completed'],
    [{ ...control, ends_ms: T }, 'Control is already completed'],
  ])('refuses a control that is no longer executing (%#)', (c, message) => {
    expect(planCancellation(c, commands, T)).toEqual({ kind: 'conflict', message });
  });
});

describe('controlOperatorIds: a control belongs to the operators of what it reaches and names', () => {
  const on = (...ops: string[]) => ops.map((operator_id, i) => ({ device_id: `dev_${i}`, operator_id }));
  it.each([
    ['an aggregator’s site of op1 reaches op1 alone', on('op1', 'op1'), ['op1'], ['op1', 'op2'], ['op1']],
    ['an empty site of op1 still names op1', on(), ['op1'], ['op1', 'op2'], ['op1']],
    ['sites of two operators', on('op1', 'op2'), ['op2', 'op1'], ['op1', 'op2', 'op3'], ['op1', 'op2']],
    ['operator target with no devices', on(), ['op2'], ['op1', 'op2'], ['op2']],
    ['`all` reaching op2 only', on('op2'), [], ['op1', 'op2'], ['op2']],
    [
      '`all` reaching both, duplicates collapse, sorted',
      on('op2', 'op1', 'op2'),
      [],
      ['op1', 'op2'],
      ['op1', 'op2'],
    ],
    ['`all` over nothing: every operator of the sender', on(), [], ['op2', 'op1'], ['op1', 'op2']],
  ] as const)('%s', (_label, reached, named, sender, want) => {
    expect(controlOperatorIds(reached, named, sender)).toEqual(want);
  });
});

describe('mayFollowControl: only a client that sees every operator of the control', () => {
  it.each([
    [['op1'], ['op1'], true],
    [['op1'], ['op1', 'op2'], true],
    [['op1', 'op2'], ['op1', 'op2', 'op3'], true],
    // The reviewed hole: sharing one operator with the control is not enough.
    [['op1', 'op2'], ['op2'], false],
    [['op1', 'op2'], ['op1'], false],
    [['op1'], ['op2'], false],
    [['op1'], [], false],
    // A control that names no operator is nobody's (never stored so; refused rather than shown to all).
    [[], ['op1'], false],
  ] as const)('control %j, client %j: %s', (control, client, want) => {
    expect(mayFollowControl(control, client)).toBe(want);
  });
});

describe('distinctTargetIds: without repeats, in the order given', () => {
  it.each([
    [undefined, []],
    [[], []],
    [['s1'], ['s1']],
    [
      ['s2', 's1', 's2', 's1'],
      ['s2', 's1'],
    ],
  ])('%j: %j', (ids, want) => {
    expect(distinctTargetIds(ids)).toEqual(want);
  });
});

describe('foreignOperatorId: the first named operator the sender does not act for', () => {
  it.each([
    [[], ['op1'], undefined],
    [['op1'], ['op1', 'op2'], undefined],
    [['op1', 'op2'], ['op1', 'op2'], undefined],
    [['op3'], ['op1'], 'op3'],
    [['op1', 'op3', 'op4'], ['op1'], 'op3'],
    [['op1'], [], 'op1'],
  ])('named %j, sender %j: %s', (named, sender, want) => {
    expect(foreignOperatorId(named, sender)).toBe(want);
  });
});
