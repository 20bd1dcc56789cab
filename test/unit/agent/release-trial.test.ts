import { describe, expect, it } from 'vitest';
import {
  afterExit,
  beforeStart,
  type LauncherAction,
  MAX_FAILED_STARTS,
  msUntilDeadline,
  newTrial,
  parseTrialFile,
  RESTART_EXIT_CODE,
  releasesToPrune,
  rollbackOutcome,
  type TrialFile,
} from '../../../agent/core/release-trial.js';

const T0 = Date.parse('2026-11-27T08:00:00Z');
const trial = (fields: Partial<TrialFile> = {}): TrialFile => ({
  ...newTrial({
    update_id: 'upd_1',
    command_id: 'cmd_1',
    from_version: '1.0.0',
    to_version: '1.0.1',
    healthSeconds: 600,
    now: T0,
  }),
  ...fields,
});
const AFTER_DEADLINE = T0 + 600_000;

describe('newTrial', () => {
  it('records the versions, the start and the deadline health seconds later, no failures yet', () => {
    expect(trial()).toEqual({
      update_id: 'upd_1',
      command_id: 'cmd_1',
      from_version: '1.0.0',
      to_version: '1.0.1',
      started_at: '2026-11-27T08:00:00.000Z',
      deadline_at: '2026-11-27T08:10:00.000Z',
      failed_starts: 0,
    });
  });
});

describe('beforeStart', () => {
  const cases: Array<[string, TrialFile | undefined, number, LauncherAction]> = [
    ['no trial: start', undefined, T0, { action: 'start' }],
    ['a trial before its deadline: start it', trial(), T0 + 599_999, { action: 'start' }],
    [
      'a trial at its deadline: roll back',
      trial(),
      AFTER_DEADLINE,
      { action: 'roll_back', reason: 'did not commit within 600 s' },
    ],
    [
      'a rollback decided before a cut: finish it with its reason',
      trial({ rollback: { reason: 'exited 3 times', decided_at: '2026-11-27T08:01:00Z' } }),
      T0,
      { action: 'roll_back', reason: 'exited 3 times' },
    ],
    [
      'an unreadable deadline counts as passed',
      trial({ deadline_at: 'soon' }),
      T0,
      { action: 'roll_back', reason: expect.stringMatching(/^did not commit within/) },
    ],
  ];
  it.each(cases)('%s', (_name, t, now, expected) => {
    expect(beforeStart(t, now)).toEqual(expected);
  });
});

describe('afterExit', () => {
  type Input = Parameters<typeof afterExit>[0];
  const base: Input = { trial: undefined, ranVersion: '1.0.0', exitCode: 0, stopping: false, now: T0 + 1000 };
  const cases: Array<[string, Partial<Input>, LauncherAction]> = [
    ['no trial, clean exit: the launcher exits 0', {}, { action: 'exit', code: 0 }],
    ['no trial, exit 3 (identity refused): passed on', { exitCode: 3 }, { action: 'exit', code: 3 }],
    ['no trial, the restart code: start again', { exitCode: RESTART_EXIT_CODE }, { action: 'start' }],
    [
      'stopping (SIGTERM forwarded): exit with its code, even in a trial',
      { stopping: true, trial: trial(), ranVersion: '1.0.1', exitCode: 1 },
      { action: 'exit', code: 1 },
    ],
    [
      'the old release recorded a trial and exited (any code): start the new one',
      { trial: trial(), ranVersion: '1.0.0', exitCode: 0 },
      { action: 'start' },
    ],
    [
      'the old release crashed after recording a trial: start the new one',
      { trial: trial(), ranVersion: '1.0.0', exitCode: 1 },
      { action: 'start' },
    ],
    [
      "the trial's release exits with the restart code: start again, no failure counted",
      { trial: trial(), ranVersion: '1.0.1', exitCode: RESTART_EXIT_CODE },
      { action: 'start' },
    ],
    [
      "the trial's release exits 1 the first time: counted",
      { trial: trial(), ranVersion: '1.0.1', exitCode: 1 },
      { action: 'count_failure', trial: { ...trial(), failed_starts: 1 } },
    ],
    [
      "the trial's release exits 0 (not stopped by the launcher): counted too",
      { trial: trial({ failed_starts: 1 }), ranVersion: '1.0.1', exitCode: 0 },
      { action: 'count_failure', trial: { ...trial(), failed_starts: 2 } },
    ],
    [
      'the third exit: roll back, saying how often and the last code',
      { trial: trial({ failed_starts: 2 }), ranVersion: '1.0.1', exitCode: 137 },
      { action: 'roll_back', reason: 'exited 3 times before it committed (last exit code 137)' },
    ],
    [
      'an exit after the deadline: roll back for the deadline',
      { trial: trial(), ranVersion: '1.0.1', exitCode: 143, now: AFTER_DEADLINE, killedAtDeadline: true },
      { action: 'roll_back', reason: 'did not commit within 600 s' },
    ],
    [
      'killed at the deadline but committed meanwhile: start it again',
      { trial: undefined, ranVersion: '1.0.1', exitCode: 143, killedAtDeadline: true },
      { action: 'start' },
    ],
  ];
  it.each(cases)('%s', (_name, input, expected) => {
    expect(afterExit({ ...base, ...input })).toEqual(expected);
  });

  it(`rolls back after exactly ${MAX_FAILED_STARTS} exits of the new release`, () => {
    let t: TrialFile = trial();
    const actions: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      const next = afterExit({ ...base, trial: t, ranVersion: '1.0.1', exitCode: 1 });
      actions.push(next.action);
      if (next.action !== 'count_failure') break;
      t = next.trial;
    }
    expect(actions).toEqual(['count_failure', 'count_failure', 'roll_back']);
  });
});

describe('msUntilDeadline', () => {
  it.each([
    [T0, 600_000],
    [T0 + 599_000, 1_000],
    [AFTER_DEADLINE, 0],
    [AFTER_DEADLINE + 5_000, 0],
  ])('at %i: %i ms', (now, ms) => {
    expect(msUntilDeadline(trial(), now)).toBe(ms);
  });
});

describe('rollbackOutcome', () => {
  it("is the trial's ids and versions, the reason and the time", () => {
    expect(rollbackOutcome(trial(), 'did not commit within 600 s', T0 + 600_000)).toEqual({
      update_id: 'upd_1',
      command_id: 'cmd_1',
      from_version: '1.0.0',
      to_version: '1.0.1',
      reason: 'did not commit within 600 s',
      rolled_back_at: '2026-11-27T08:10:00.000Z',
    });
  });
});

describe('releasesToPrune', () => {
  it.each([
    [['1.0.0', '1.0.1'], '1.0.1', '1.0.0', []],
    [['0.9.0', '1.0.0', '1.0.1'], '1.0.1', '1.0.0', ['0.9.0']],
    [['0.9.0', '1.0.0', '1.0.1'], '1.0.1', undefined, ['0.9.0', '1.0.0']],
    [['1.0.1'], '1.0.1', '1.0.0', []],
  ])('%j with current %s and previous %s: delete %j', (installed, current, previous, expected) => {
    expect(releasesToPrune(installed, current, previous)).toEqual(expected);
  });
});

describe('parseTrialFile', () => {
  it.each([
    ['a trial', trial(), true],
    ['a trial being rolled back', trial({ rollback: { reason: 'r', decided_at: 'd' } }), true],
    ['null', null, false],
    ['an array', [], false],
    ['a missing version', { ...trial(), to_version: undefined }, false],
    ['negative failures', { ...trial(), failed_starts: -1 }, false],
    ['fractional failures', { ...trial(), failed_starts: 1.5 }, false],
    ['a malformed rollback', { ...trial(), rollback: { reason: 3 } }, false],
  ])('%s: %s', (_name, value, ok) => {
    expect(parseTrialFile(value) !== undefined).toBe(ok);
  });
});
