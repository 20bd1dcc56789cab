import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, runCliJson, tempDirs } from '../helpers/cli.js';

/**
 * The platform admin commands of DESIGN.md §11 that make a deployment (operators, sites, clients), run as the
 * built program on a temporary data directory. The `devices` commands, run while `serve` runs on the same
 * directory, are in admin-cli-devices.test.ts.
 */

const dirs = tempDirs('cp-admin-cli-');
let dir: string;
const cli = (...args: string[]) => runCli([...args, '--data-dir', dir]);
const cliJson = (...args: string[]) => runCliJson([...args, '--data-dir', dir, '--json']);

// Filled in by the sequential steps below (each test builds on the previous ones).
let opA: string;
let opB: string;
let siteA: string;
let siteA2: string;
let siteB: string;

beforeAll(async () => {
  dir = await dirs.make();
});
afterAll(async () => {
  await dirs.removeAll();
});

describe('operators', () => {
  it('create --json prints exactly {"operator_id"}', async () => {
    const a = await cliJson('operators', 'create', '--name', 'Acme Charging');
    expect(Object.keys(a)).toEqual(['operator_id']);
    expect(a.operator_id).toMatch(/^op_[A-Za-z0-9_-]+$/);
    const b = await cliJson('operators', 'create', '--name', 'Beta Energy');
    expect(Object.keys(b)).toEqual(['operator_id']);
    expect(b.operator_id).not.toBe(a.operator_id);
    opA = a.operator_id;
    opB = b.operator_id;
  });

  it('create refuses an empty name', async () => {
    const res = await cli('operators', 'create', '--name', '   ', '--json');
    expect(res.code).not.toBe(0);
    expect(res.stdout).toBe('');
    expect(res.stderr).toContain('--name must not be empty');
  });

  it('list --json prints [{"operator_id","name"}] in creation order', async () => {
    const list = await cliJson('operators', 'list');
    expect(list).toEqual([
      { operator_id: opA, name: 'Acme Charging' },
      { operator_id: opB, name: 'Beta Energy' },
    ]);
    for (const item of list) expect(Object.keys(item).sort()).toEqual(['name', 'operator_id']);
  });
});

describe('a data directory without a deployment (a mistyped --data-dir)', () => {
  it('is refused by every command but operators create, which creates nothing else there', async () => {
    const missing = join(await dirs.make(), 'var-lib-typo');
    for (const args of [
      ['operators', 'list', '--json'],
      ['sites', 'list', '--json'],
      ['sites', 'create', '--operator', 'op_x', '--name', 'Depot', '--json'],
      ['clients', 'create', '--operator', 'op_x', '--scopes', 'read', '--json'],
      ['devices', 'allow', '--sn', 'SN-1'],
      ['devices', 'assign', '--device', 'dev_x', '--site', 'site_x'],
      ['devices', 'reset', '--device', 'dev_x'],
    ]) {
      const res = await runCli([...args, '--data-dir', missing]);
      expect(res.code, args.join(' ')).toBe(1);
      expect(res.stdout).toBe('');
      expect(res.stderr).toContain(`no platform deployment in ${missing}`);
      expect(res.stderr).toContain('check --data-dir');
    }
    // Nothing was left behind: not the directory, not keys, not an empty database.
    await expect(readdir(missing)).rejects.toMatchObject({ code: 'ENOENT' });

    const op = await runCliJson(['operators', 'create', '--name', 'First', '--data-dir', missing, '--json']);
    expect(op.operator_id).toMatch(/^op_/);
    expect(await runCliJson(['operators', 'list', '--data-dir', missing, '--json'])).toEqual([
      { operator_id: op.operator_id, name: 'First' },
    ]);
  });
});

describe('sites', () => {
  it('create --json prints exactly {"site_id"}, with and without --timezone', async () => {
    const a = await cliJson(
      'sites',
      'create',
      '--operator',
      opA,
      '--name',
      'Acme Depot',
      '--timezone',
      'Europe/Berlin',
    );
    expect(Object.keys(a)).toEqual(['site_id']);
    expect(a.site_id).toMatch(/^site_[A-Za-z0-9_-]+$/);
    const a2 = await cliJson('sites', 'create', '--operator', opA, '--name', 'Acme Harbour');
    const b = await cliJson(
      'sites',
      'create',
      '--operator',
      opB,
      '--name',
      'Beta Yard',
      '--timezone',
      'America/New_York',
    );
    expect(new Set([a.site_id, a2.site_id, b.site_id]).size).toBe(3);
    siteA = a.site_id;
    siteA2 = a2.site_id;
    siteB = b.site_id;
  });

  it('create with an unknown operator fails with a clear message and creates nothing', async () => {
    const res = await cli('sites', 'create', '--operator', 'op_doesnotexist', '--name', 'Ghost', '--json');
    expect(res.code).not.toBe(0);
    expect(res.stdout).toBe('');
    expect(res.stderr).toContain('no operator op_doesnotexist');
    const all = await cliJson('sites', 'list');
    expect(all.map((s: { name: string }) => s.name)).not.toContain('Ghost');
  });

  it('create with an unknown timezone fails', async () => {
    const res = await cli(
      'sites',
      'create',
      '--operator',
      opA,
      '--name',
      'Nowhere',
      '--timezone',
      'Mars/Olympus_Mons',
      '--json',
    );
    expect(res.code).not.toBe(0);
    expect(res.stdout).toBe('');
    expect(res.stderr).toContain('unknown timezone Mars/Olympus_Mons');
  });

  it('list --json prints [{"site_id","operator_id","name"}], filtered by --operator', async () => {
    const all = await cliJson('sites', 'list');
    expect(all).toEqual([
      { site_id: siteA, operator_id: opA, name: 'Acme Depot' },
      { site_id: siteA2, operator_id: opA, name: 'Acme Harbour' },
      { site_id: siteB, operator_id: opB, name: 'Beta Yard' },
    ]);
    const [ofA, ofB, ofNone] = await Promise.all([
      cliJson('sites', 'list', '--operator', opA),
      cliJson('sites', 'list', '--operator', opB),
      cliJson('sites', 'list', '--operator', 'op_doesnotexist'),
    ]);
    expect(ofA).toEqual([
      { site_id: siteA, operator_id: opA, name: 'Acme Depot' },
      { site_id: siteA2, operator_id: opA, name: 'Acme Harbour' },
    ]);
    expect(ofB).toEqual([{ site_id: siteB, operator_id: opB, name: 'Beta Yard' }]);
    expect(ofNone).toEqual([]);
  });
});

interface Client {
  client_id: string;
  client_secret: string;
  scopes: string[];
}
let clientA: Client; // read,write on operator A
let clientB: Client; // read on operator B
let clientAgg: Client; // read,write on A and B (an aggregator)
let clientWriteOnly: Client; // write on A

describe('clients', () => {
  it('create --json prints exactly {"client_id","client_secret","scopes"}', async () => {
    clientA = await cliJson('clients', 'create', '--operator', opA, '--scopes', 'read,write');
    expect(Object.keys(clientA).sort()).toEqual(['client_id', 'client_secret', 'scopes']);
    expect(clientA.client_id).toMatch(/^cli_[A-Za-z0-9_-]+$/);
    expect(typeof clientA.client_secret).toBe('string');
    expect(clientA.client_secret.length).toBeGreaterThanOrEqual(20);
    expect(clientA.scopes).toEqual(['read', 'write']);

    [clientB, clientWriteOnly, clientAgg] = await Promise.all([
      cliJson('clients', 'create', '--operator', opB, '--scopes', 'read'),
      cliJson('clients', 'create', '--operator', opA, '--scopes', 'write'),
      cliJson('clients', 'create', '--operator', `${opA},${opB}`, '--scopes', 'read,write'),
    ]);
    expect(clientB.scopes).toEqual(['read']);
    expect(clientWriteOnly.scopes).toEqual(['write']);
    expect(clientAgg.scopes).toEqual(['read', 'write']);
    const ids = new Set([clientA, clientB, clientWriteOnly, clientAgg].map((c) => c.client_id));
    expect(ids.size).toBe(4);
  });

  it('create refuses bad scopes', async () => {
    const bad = ['admin', 'read,admin', '', 'READ'];
    const results = await Promise.all(
      bad.map((scopes) => cli('clients', 'create', '--operator', opA, '--scopes', scopes, '--json')),
    );
    for (const [i, res] of results.entries()) {
      expect(res.code, `--scopes ${JSON.stringify(bad[i])}`).not.toBe(0);
      expect(res.stdout).toBe('');
      expect(res.stderr).toContain('--scopes must be read, write or read,write');
    }
  });

  it('create refuses an unknown operator, also in a list', async () => {
    const res = await cli(
      'clients',
      'create',
      '--operator',
      `${opA},op_doesnotexist`,
      '--scopes',
      'read',
      '--json',
    );
    expect(res.code).not.toBe(0);
    expect(res.stdout).toBe('');
    expect(res.stderr).toContain('no operator op_doesnotexist');
  });
});
