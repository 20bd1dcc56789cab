import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { newTrial, rollbackOutcome } from '../../../agent/core/release-trial.js';
import {
  collectReleases,
  releaseFields,
  releaseLayoutFor,
} from '../../../agent/technician/release-status.js';
import { pointCurrentAt, writeJsonAtomic } from '../../../agent/updates/release-files.js';
import { tempDir } from '../../helpers/agent.js';

/** The releases part of `charger-agent status` (agent/technician/release-status.ts), from real files. */

const NOW = Date.parse('2026-11-27T08:05:00Z');
const trial = newTrial({
  update_id: 'upd_7',
  command_id: 'cmd_7',
  from_version: '1.0.0',
  to_version: '1.0.1',
  healthSeconds: 600,
  now: Date.parse('2026-11-27T08:00:00Z'),
});
let tmp: ReturnType<typeof tempDir>;
let prefix: string;

beforeEach(() => {
  tmp = tempDir('release-status-');
  prefix = tmp.dir;
  for (const v of ['1.0.0', '1.0.1']) mkdirSync(path.join(prefix, 'releases', v), { recursive: true });
  pointCurrentAt({ prefix }, '1.0.1');
});
afterEach(() => tmp.remove());

describe('collectReleases and releaseFields', () => {
  it('at rest: current and the one other release as previous', () => {
    const r = collectReleases({ prefix });
    expect(r).toEqual({
      prefix,
      current: '1.0.1',
      previous: '1.0.0',
      installed: ['1.0.0', '1.0.1'],
      trial: null,
      rollback: null,
    });
    expect(releaseFields(r, NOW)).toEqual([['Release', `1.0.1 (previous 1.0.0) in ${prefix}`]]);
  });

  it('in a trial: the trial, its deadline and failed starts; previous is the trial’s old release', () => {
    mkdirSync(path.join(prefix, 'releases', '0.9.0'));
    writeJsonAtomic(path.join(prefix, 'trial.json'), { ...trial, failed_starts: 1 });
    const r = collectReleases({ prefix });
    expect(r.previous).toBe('1.0.0');
    expect(r.trial).toEqual({ ...trial, failed_starts: 1, rolling_back: null });
    expect(releaseFields(r, NOW)[1]).toEqual([
      'Trial',
      '1.0.0 → 1.0.1 (update upd_7) since 5 min ago, commits by 2026-11-27T08:10:00Z (in 5 min); failed starts 1',
    ]);
  });

  it('a rollback being carried out, and one done but not yet reported', () => {
    writeJsonAtomic(path.join(prefix, 'trial.json'), {
      ...trial,
      rollback: { reason: 'exited 3 times', decided_at: 'x' },
    });
    writeJsonAtomic(
      path.join(prefix, 'rollback.json'),
      rollbackOutcome(trial, 'did not commit within 600 s', NOW - 60_000),
    );
    const fields = releaseFields(collectReleases({ prefix }), NOW);
    expect(fields[1]).toEqual(['Trial', 'rolling back 1.0.1 → 1.0.0: exited 3 times']);
    expect(fields[2]).toEqual([
      'Rolled back',
      expect.stringMatching(/^1\.0\.1 → 1\.0\.0 .* \(update upd_7\): did not commit within 600 s$/),
    ]);
  });
});

describe('releaseLayoutFor', () => {
  it.each([
    ['/opt/a', {}, { prefix: '/opt/a' }],
    [undefined, { CHARGER_AGENT_PREFIX: '/opt/b' }, { prefix: '/opt/b' }],
    ['/opt/a', { CHARGER_AGENT_PREFIX: '/opt/b' }, { prefix: '/opt/a' }],
    [undefined, {}, undefined],
  ])('--prefix %s with %j → %j', (flag, env, expected) => {
    expect(releaseLayoutFor(flag, env)).toEqual(expected);
  });
});
