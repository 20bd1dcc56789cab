import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  pollUntil,
  runCli,
  runCliJson,
  type ServeProcess,
  sleep,
  spawnServe,
  tempDirs,
} from '../helpers/cli.js';
import { type HttpClient, type HttpResult, httpClient, operatorToken } from '../helpers/platform.js';

/**
 * The platform's `devices` admin commands of DESIGN.md §11 (allow, assign, reset), run as the built program on a
 * temporary data directory while `serve` runs on the same directory; and operators, sites and clients created
 * while it runs. The commands that create those are tested in admin-cli.test.ts; here they only set the
 * directory up.
 */

const dirs = tempDirs('cp-admin-cli-');
let dir: string;
const cli = (...args: string[]) => runCli([...args, '--data-dir', dir]);
const cliJson = (...args: string[]) => runCliJson([...args, '--data-dir', dir, '--json']);

interface Client {
  client_id: string;
  client_secret: string;
  scopes: string[];
}
let siteA: string;
let siteB: string;
let clientA: Client; // read,write on operator A
let clientB: Client; // read on operator B
let clientAgg: Client; // read,write on A and B (an aggregator)
let clientWriteOnly: Client; // write on A

beforeAll(async () => {
  dir = await dirs.make();
  const opA = (await cliJson('operators', 'create', '--name', 'Acme Charging')).operator_id as string;
  const opB = (await cliJson('operators', 'create', '--name', 'Beta Energy')).operator_id as string;
  siteA = (await cliJson('sites', 'create', '--operator', opA, '--name', 'Acme Depot')).site_id;
  siteB = (await cliJson('sites', 'create', '--operator', opB, '--name', 'Beta Yard')).site_id;
  [clientA, clientB, clientWriteOnly, clientAgg] = await Promise.all([
    cliJson('clients', 'create', '--operator', opA, '--scopes', 'read,write'),
    cliJson('clients', 'create', '--operator', opB, '--scopes', 'read'),
    cliJson('clients', 'create', '--operator', opA, '--scopes', 'write'),
    cliJson('clients', 'create', '--operator', `${opA},${opB}`, '--scopes', 'read,write'),
  ]);
});
afterAll(async () => {
  await dirs.removeAll();
});

describe('devices, with serve running on the same data directory', () => {
  let server: ServeProcess;
  let http: HttpClient;
  let tokenA: string;
  let tokenB: string;
  let tokenAgg: string;
  let deviceId: string;
  let deviceSecret: string;
  let deviceToken: string;

  const registration = (sn: string) => ({
    sn,
    model: 'CLI Test AC22',
    manufacturer: 'Acme',
    firmware_version: '2.0.1',
    connectors: [{ connector_id: 1, max_power_kw: 22, v2g_capable: false }],
  });
  const heartbeat = (token: string) =>
    http.post('/v1/device/heartbeat', {
      token,
      json: { timestamp: new Date().toISOString(), status: 'online', fault_code: 0 },
    });
  const deviceTokenFor = (id: string, secret: string) =>
    http.post('/v1/device/token', {
      json: { device_id: id, device_secret: secret, grant_type: 'client_credentials' },
    });

  beforeAll(async () => {
    // Allowed before the server starts; another serial is allowed while it runs (below).
    const allowed = await cli('devices', 'allow', '--sn', 'SN-CLI-0001');
    expect(allowed.code, allowed.stderr).toBe(0);
    expect(allowed.stdout).toContain('SN-CLI-0001');
    server = await spawnServe([
      '--data-dir',
      dir,
      '--env',
      'production',
      '--registration',
      'allowlist',
      '--self-signed',
    ]);
    http = httpClient(server.url, await readFile(server.certPath, 'utf8'));
    [tokenA, tokenB, tokenAgg] = await Promise.all([
      operatorToken(http, clientA.client_id, clientA.client_secret),
      operatorToken(http, clientB.client_id, clientB.client_secret),
      operatorToken(http, clientAgg.client_id, clientAgg.client_secret),
    ]);
  });
  afterAll(async () => {
    await http?.close();
    const exit = await server?.stop();
    // A clean shutdown: not ended by a signal or an error.
    expect(exit).toEqual({ code: 0, signal: null });
  });

  it('serves production on the certificate it created in DIR/tls', () => {
    expect(server.env).toBe('production');
    expect(server.certPath).toBe(join(dir, 'tls', 'cert.pem'));
    expect(server.certCreated).toBe(true);
  });

  it('clients created by the CLI obtain tokens carrying their scopes', async () => {
    const writeOnly = await operatorToken(http, clientWriteOnly.client_id, clientWriteOnly.client_secret);
    const res = await http.get('/v1/operator/charging-records', { token: writeOnly });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe(2003);
    const ok = await http.get('/v1/operator/charging-records', { token: tokenA });
    expect(ok.status).toBe(200);
    expect(ok.body.data.total).toBe(0);
    const bad = await http.post('/v1/operator/oauth/token', {
      json: { client_id: clientA.client_id, client_secret: 'wrong', grant_type: 'client_credentials' },
    });
    expect(bad.status).toBe(401);
    expect(bad.body.code).toBe(2001);
  });

  it('devices allow lets exactly the allowed serial register (allowlist policy)', async () => {
    const refused = await http.post('/v1/device/register', { json: registration('SN-CLI-NOT-ALLOWED') });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe(2003);

    const reg = await http.post('/v1/device/register', { json: registration('SN-CLI-0001') });
    expect(reg.status, reg.text).toBe(200);
    expect(reg.body.code).toBe(0);
    expect(reg.body.data.device_id).toMatch(/^dev_/);
    expect(typeof reg.body.data.device_secret).toBe('string');
    deviceId = reg.body.data.device_id;
    deviceSecret = reg.body.data.device_secret;

    const tok = await deviceTokenFor(deviceId, deviceSecret);
    expect(tok.status, tok.text).toBe(200);
    deviceToken = tok.body.data.access_token;
    expect((await heartbeat(deviceToken)).status).toBe(200);

    // Registered once: the same serial is refused until an operator resets it.
    const again = await http.post('/v1/device/register', { json: registration('SN-CLI-0001') });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe(4001);
  });

  // Changes made by another process reach the running server within about a second (DESIGN.md §11:
  // the admin commands work on the directory also while serve runs), so the checks below poll briefly.
  const deviceAs = (token: string) => () => http.get(`/v1/operator/devices/${deviceId}`, { token });
  const is = (status: number) => (res: HttpResult) => res.status === status;

  it('devices allow while serve runs lets that serial register', async () => {
    const before = await http.post('/v1/device/register', { json: registration('SN-CLI-LATE') });
    expect(before.status).toBe(403);
    expect(before.body.code).toBe(2003);
    const allowed = await cli('devices', 'allow', '--sn', 'SN-CLI-LATE');
    expect(allowed.code, allowed.stderr).toBe(0);
    const after = await pollUntil(
      () => http.post('/v1/device/register', { json: registration('SN-CLI-LATE') }),
      (res) => res.status !== 403,
    );
    expect(after.status, after.text).toBe(200);
    expect(after.body.data.device_id).toMatch(/^dev_/);
    expect(after.body.data.device_id).not.toBe(deviceId);
  });

  it('devices assign makes the device visible to its operator’s clients only', async () => {
    for (const token of [tokenA, tokenB, tokenAgg]) {
      const hidden = await deviceAs(token)();
      expect(hidden.status).toBe(404);
      expect(hidden.body.code).toBe(3001);
    }

    const res = await cli('devices', 'assign', '--device', deviceId, '--site', siteA);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toContain(deviceId);

    const seen = await pollUntil(deviceAs(tokenA), is(200));
    expect(seen.status, seen.text).toBe(200);
    expect(seen.body.code).toBe(0);
    expect(seen.body.data.device_id).toBe(deviceId);
    expect(seen.body.data.site_id).toBe(siteA);
    expect(seen.body.data.sn).toBe('SN-CLI-0001');
    expect(seen.body.data.connectors.map((c: { connector_id: number }) => c.connector_id)).toEqual([1]);

    expect((await deviceAs(tokenAgg)()).status).toBe(200);
    const other = await deviceAs(tokenB)();
    expect(other.status).toBe(404);
    expect(other.body.code).toBe(3001);

    // Moving it to operator B's site moves who sees it.
    const moved = await cli('devices', 'assign', '--device', deviceId, '--site', siteB);
    expect(moved.code, moved.stderr).toBe(0);
    const nowB = await pollUntil(deviceAs(tokenB), is(200));
    expect(nowB.status).toBe(200);
    expect(nowB.body.data.site_id).toBe(siteB);
    const nowA = await pollUntil(deviceAs(tokenA), is(404));
    expect(nowA.status).toBe(404);
    expect(nowA.body.code).toBe(3001);
    expect((await deviceAs(tokenAgg)()).status).toBe(200);

    const back = await cli('devices', 'assign', '--device', deviceId, '--site', siteA);
    expect(back.code, back.stderr).toBe(0);
    expect((await pollUntil(deviceAs(tokenA), is(200))).status).toBe(200);
  });

  it('devices assign refuses an unknown device or site', async () => {
    const noDevice = await cli('devices', 'assign', '--device', 'dev_doesnotexist', '--site', siteA);
    expect(noDevice.code).not.toBe(0);
    expect(noDevice.stderr).toContain('no device dev_doesnotexist');
    const noSite = await cli('devices', 'assign', '--device', deviceId, '--site', 'site_doesnotexist');
    expect(noSite.code).not.toBe(0);
    expect(noSite.stderr).toContain('no site site_doesnotexist');
    // The failed assignment changed nothing.
    await sleep(1_200);
    const still = await deviceAs(tokenA)();
    expect(still.status).toBe(200);
    expect(still.body.data.site_id).toBe(siteA);
  });

  it('devices reset while serve runs revokes the old token and lets the serial register again', async () => {
    expect((await heartbeat(deviceToken)).status).toBe(200);
    const res = await cli('devices', 'reset', '--device', deviceId);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toContain(deviceId);

    // The running server notices the other process's change within a couple of seconds.
    const revoked = await pollUntil(
      () => heartbeat(deviceToken),
      (hb) => hb.status !== 200,
    );
    expect(revoked.status).toBe(401);
    expect(revoked.body.code).toBe(2001);

    // The old secret no longer buys a token.
    const oldSecret = await deviceTokenFor(deviceId, deviceSecret);
    expect(oldSecret.status).toBe(401);
    expect(oldSecret.body.code).toBe(2001);

    // Same serial, same identity, new secret.
    const reg = await http.post('/v1/device/register', { json: registration('SN-CLI-0001') });
    expect(reg.status, reg.text).toBe(200);
    expect(reg.body.data.device_id).toBe(deviceId);
    expect(reg.body.data.device_secret).not.toBe(deviceSecret);
    const tok = await deviceTokenFor(deviceId, reg.body.data.device_secret);
    expect(tok.status, tok.text).toBe(200);
    expect((await heartbeat(tok.body.data.access_token)).status).toBe(200);
    // The token from before the reset stays revoked.
    const stale = await heartbeat(deviceToken);
    expect(stale.status).toBe(401);
    expect(stale.body.code).toBe(2001);
    // It is still where the operator put it.
    const seen = await deviceAs(tokenA)();
    expect(seen.status).toBe(200);
    expect(seen.body.data.site_id).toBe(siteA);
  });

  it('devices reset refuses an unknown device', async () => {
    const res = await cli('devices', 'reset', '--device', 'dev_doesnotexist');
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain('no device dev_doesnotexist');
  });

  it('an operator, site and client created while serve runs are usable', async () => {
    const op = await cliJson('operators', 'create', '--name', 'Late Operator');
    const site = await cliJson('sites', 'create', '--operator', op.operator_id, '--name', 'Late Site');
    const client = await cliJson('clients', 'create', '--operator', op.operator_id, '--scopes', 'read');
    const tokenRes = await pollUntil(
      () =>
        http.post('/v1/operator/oauth/token', {
          json: {
            client_id: client.client_id,
            client_secret: client.client_secret,
            grant_type: 'client_credentials',
          },
        }),
      is(200),
    );
    expect(tokenRes.status, tokenRes.text).toBe(200);
    const token = tokenRes.body.access_token as string;
    const hidden = await deviceAs(token)();
    expect(hidden.status).toBe(404);
    expect(hidden.body.code).toBe(3001);
    const assigned = await cli('devices', 'assign', '--device', deviceId, '--site', site.site_id);
    expect(assigned.code, assigned.stderr).toBe(0);
    const seen = await pollUntil(deviceAs(token), is(200));
    expect(seen.status).toBe(200);
    expect(seen.body.data.site_id).toBe(site.site_id);
  });
});
