import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { newTrial, type TrialFile } from '../../../agent/core/release-trial.js';
import { pointCurrentAt, writeJsonAtomic } from '../../../agent/updates/release-files.js';
import { dataDirFromArgs, readTrialFile, repairLayout } from '../../../agent/updates/release-trial-files.js';
import { releaseLayoutFromEnv } from '../../../agent/updates/releases.js';
import { tempDir } from '../../helpers/agent.js';

/**
 * The launcher's repair before each start (agent/updates/release-trial-files.ts), on real files: what a power
 * cut leaves half done becomes either the old release or the new one in trial. The process-level cuts are in
 * test/integration/agent-releases-kill.test.ts; these are the cases a kill cannot reach in order.
 */

const T0 = Date.parse('2026-11-27T08:00:00Z');
let tmp: ReturnType<typeof tempDir>;
let prefix: string;
let data: string;

function release(version: string): void {
  mkdirSync(path.join(prefix, 'releases', version), { recursive: true });
  writeFileSync(path.join(prefix, 'releases', version, 'package.json'), '{}');
}

const trial = (fields: Partial<TrialFile> = {}): TrialFile => ({
  ...newTrial({
    update_id: 'u',
    command_id: 'c',
    from_version: '1.0.0',
    to_version: '1.0.1',
    healthSeconds: 60,
    now: T0,
  }),
  ...fields,
});

beforeEach(() => {
  tmp = tempDir('release-files-');
  prefix = path.join(tmp.dir, 'prefix');
  data = path.join(tmp.dir, 'data');
  mkdirSync(data, { recursive: true });
  release('1.0.0');
  release('1.0.1');
  pointCurrentAt({ prefix }, '1.0.0');
  writeFileSync(path.join(data, 'agent.sqlite'), 'live store');
});
afterEach(() => tmp.remove());

const current = () => path.basename(readlinkSync(path.join(prefix, 'current')));
const repair = (now = T0 + 1000, messages: string[] = []) =>
  repairLayout({ prefix }, data, now, (m) => messages.push(m));

describe('repairLayout', () => {
  it('with nothing half done: changes nothing', () => {
    expect(repair()).toEqual({ kind: 'none' });
    expect(current()).toBe('1.0.0');
  });

  it('removes staging and trash directories, temporary files and a snapshot without a trial', () => {
    mkdirSync(path.join(prefix, 'releases', '.staging-1.0.2.tmp-abcd', 'agent'), { recursive: true });
    mkdirSync(path.join(prefix, 'releases', '.trash-0.9.0-abcd'));
    writeFileSync(path.join(prefix, 'trial.json.tmp-1234'), '{');
    writeFileSync(path.join(prefix, 'store-snapshot.sqlite'), 'old');
    writeFileSync(path.join(data, 'agent.sqlite.tmp-5678'), 'half a copy');
    expect(repair()).toEqual({ kind: 'none' });
    expect(readdirSync(path.join(prefix, 'releases')).sort()).toEqual(['1.0.0', '1.0.1']);
    expect(readdirSync(prefix).sort()).toEqual(['current', 'releases']);
    expect(readdirSync(data)).toEqual(['agent.sqlite']);
  });

  it('a trial recorded but not swapped: swaps (the record is the point of no return)', () => {
    writeJsonAtomic(path.join(prefix, 'trial.json'), trial());
    expect(repair()).toEqual({ kind: 'rolled_forward', version: '1.0.1' });
    expect(current()).toBe('1.0.1');
    expect(readTrialFile({ prefix })).toEqual(trial());
  });

  it('a trial past its deadline: rolled back before anything starts, store restored', () => {
    pointCurrentAt({ prefix }, '1.0.1');
    writeFileSync(path.join(prefix, 'store-snapshot.sqlite'), 'store before the trial');
    writeFileSync(path.join(data, 'agent.sqlite-wal'), 'wal of the trial');
    writeJsonAtomic(path.join(prefix, 'trial.json'), trial());
    const result = repair(T0 + 60_000);
    expect(result).toMatchObject({
      kind: 'rolled_back',
      result: { storeRestored: true, outcome: { reason: 'did not commit within 60 s', to_version: '1.0.1' } },
    });
    expect(current()).toBe('1.0.0');
    expect(readFileSync(path.join(data, 'agent.sqlite'), 'utf8')).toBe('store before the trial');
    expect(existsSync(path.join(data, 'agent.sqlite-wal'))).toBe(false);
    expect(existsSync(path.join(prefix, 'trial.json'))).toBe(false);
    expect(readdirSync(path.join(prefix, 'releases'))).toEqual(['1.0.0']);
  });

  it('a trial whose release is missing: rolled back, saying so', () => {
    writeJsonAtomic(path.join(prefix, 'trial.json'), trial({ to_version: '9.9.9' }));
    writeFileSync(path.join(prefix, 'store-snapshot.sqlite'), 'before');
    expect(repair()).toMatchObject({
      kind: 'rolled_back',
      result: { outcome: { reason: 'the release 9.9.9 is missing' } },
    });
    expect(current()).toBe('1.0.0');
  });

  it('a malformed trial file: set aside (kept for a person), reported, never taken for a trial', () => {
    writeFileSync(path.join(prefix, 'trial.json'), '{"update_id": 3');
    const messages: string[] = [];
    expect(repair(T0, messages)).toEqual({ kind: 'none' });
    expect(messages).toEqual([expect.stringMatching(/trial\.json is not a trial record: set aside$/)]);
    expect(readdirSync(prefix).filter((f) => f.startsWith('trial.json.bad-'))).toHaveLength(1);
    expect(current()).toBe('1.0.0');
  });

  it('without a known data directory, a rollback leaves the store and says so', () => {
    pointCurrentAt({ prefix }, '1.0.1');
    writeFileSync(path.join(prefix, 'store-snapshot.sqlite'), 'before');
    writeJsonAtomic(
      path.join(prefix, 'trial.json'),
      trial({ rollback: { reason: 'exited', decided_at: 'x' } }),
    );
    const result = repairLayout({ prefix }, undefined, T0, () => {});
    expect(result).toMatchObject({
      kind: 'rolled_back',
      result: {
        storeRestored: false,
        outcome: { reason: 'exited; the store was not restored (no data directory known)' },
      },
    });
    expect(readFileSync(path.join(data, 'agent.sqlite'), 'utf8')).toBe('live store');
  });
});

it('a rollback with the old release gone keeps the new one and its store, and says so', () => {
  pointCurrentAt({ prefix }, '1.0.1');
  rmSync(path.join(prefix, 'releases', '1.0.0'), { recursive: true });
  writeFileSync(path.join(prefix, 'store-snapshot.sqlite'), 'before');
  writeJsonAtomic(
    path.join(prefix, 'trial.json'),
    trial({ rollback: { reason: 'exited', decided_at: 'x' } }),
  );
  expect(repair()).toMatchObject({
    kind: 'rolled_back',
    result: { storeRestored: false, outcome: { reason: 'exited; the release 1.0.0 is gone: 1.0.1 kept' } },
  });
  expect(current()).toBe('1.0.1');
  expect(readFileSync(path.join(data, 'agent.sqlite'), 'utf8')).toBe('live store');
  expect(readdirSync(path.join(prefix, 'releases'))).toEqual(['1.0.1']);
});

describe('dataDirFromArgs', () => {
  it.each([
    [['run', '--data-dir', '/var/lib/a'], '/var/lib/a'],
    [['run', '--data-dir=/var/lib/b'], '/var/lib/b'],
    [['run', '--data-dir', 'rel'], '/cwd/rel'],
    [['run', '--sn', 'X'], undefined],
    [['run', '--config', '/nonexistent/agent.json'], undefined],
  ])('%j → %s', (args, expected) => {
    expect(dataDirFromArgs(args, '/cwd')).toBe(expected);
  });

  it('reads data-dir (either spelling) from --config, relative to the file; the flag wins', () => {
    const config = path.join(tmp.dir, 'etc', 'agent.json');
    mkdirSync(path.dirname(config), { recursive: true });
    writeFileSync(config, JSON.stringify({ 'data-dir': '../state' }));
    expect(dataDirFromArgs(['run', '--config', config], '/cwd')).toBe(path.join(tmp.dir, 'state'));
    writeFileSync(config, JSON.stringify({ dataDir: '/var/lib/c' }));
    expect(dataDirFromArgs(['run', `--config=${config}`], '/cwd')).toBe('/var/lib/c');
    expect(dataDirFromArgs(['run', '--config', config, '--data-dir', '/d'], '/cwd')).toBe('/d');
    writeFileSync(config, 'not json');
    expect(dataDirFromArgs(['run', '--config', config], '/cwd')).toBeUndefined();
  });
});

describe('releaseLayoutFromEnv', () => {
  it.each([
    [{ CHARGER_AGENT_PREFIX: '/opt/charger-agent' }, { prefix: '/opt/charger-agent' }],
    [{ CHARGER_AGENT_PREFIX: '' }, undefined],
    [{}, undefined],
  ])('%j → %j', (env, expected) => {
    expect(releaseLayoutFromEnv(env)).toEqual(expected);
  });
});
