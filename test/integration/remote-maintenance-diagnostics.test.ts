import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Agent, type Dispatcher, request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTcpProxy, type TcpProxy, tempDir, waitFor } from '../helpers/agent.js';
import { maintenanceChargers } from '../helpers/maintenance-chargers.js';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * Diagnostics end to end (DESIGN.md §20): an operator asks a real agent for its diagnostics; the agent builds the
 * archive and uploads it through a proxy that cuts the upload halfway; the agent resumes where the platform's
 * copy ends; the operator downloads an archive that the system's gunzip and tar open, with the four parts and
 * its logs, and no secret of the charger's in it.
 */

let tp: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let proxy: TcpProxy;
let dispatcher: Dispatcher;
/** Every Content-Range the agents sent, in order (recorded by an interceptor on their HTTP pool). */
const contentRanges: string[] = [];
const chargers = maintenanceChargers(() => ({
  platformUrl: `https://127.0.0.1:${proxy.port}`,
  dispatcher,
  assign: (deviceId) => tp.store.assignDevice(deviceId, tenant.siteId),
}));
const work = tempDir('diagnostics-test-');

const get = (p: string) => tp.http.get(p, { token: tenant.token });

beforeAll(async () => {
  tp = await startTestPlatform();
  tenant = await createTenant(tp, 'maintenance-diagnostics');
  proxy = await startTcpProxy(tp.port);
  dispatcher = new Agent({ connect: { ca: tp.ca } }).compose((dispatch) => (options, handler) => {
    const headers = options.headers as Record<string, string> | undefined;
    if (options.method === 'PUT' && headers?.['content-range']) contentRanges.push(headers['content-range']);
    return dispatch(options, handler);
  });
});

afterEach(async () => {
  await chargers.stopAll();
});

afterAll(async () => {
  await dispatcher?.close();
  await proxy?.close();
  await tp?.stop();
  chargers.removeDirs();
  work.remove();
});

/** Log lines the way the agent writes them (pino JSON), noisy enough that the archive is a few MiB. */
function writeLogs(dataDir: string, startMs: number, lines: number): void {
  mkdirSync(path.join(dataDir, 'logs'), { recursive: true });
  const text: string[] = [];
  for (let i = 0; i < lines; i++) {
    const time = new Date(startMs + i * 1_000).toISOString();
    text.push(
      JSON.stringify({
        level: 30,
        time,
        name: 'charger-agent',
        msg: 'sample',
        noise: randomBytes(300).toString('base64'),
      }),
    );
  }
  writeFileSync(path.join(dataDir, 'logs', 'agent.log'), `${text.join('\n')}\n`);
}

describe('diagnostics with a real agent', () => {
  it('uploads an archive that survives a cut halfway, opens with tar and holds no secret', async () => {
    const c = await chargers.start(`MNT-DG-${process.pid}`);
    const now = Date.now();
    writeLogs(c.dataDir, now - 8_100_000, 8_000); // ~3.2 MiB of base64 lines: an archive of about 1.5 MB
    const secret = c.current().store.getIdentity()!.secret;

    const cut = proxy.cutAfter(500_000);
    const asked = await tp.http.post(`/v1/operator/devices/${c.deviceId}/diagnostics`, {
      token: tenant.token,
      json: {
        start_time: new Date(now - 3 * 3_600_000).toISOString(),
        end_time: new Date(now + 60_000).toISOString(),
      },
    });
    expect(asked.status, asked.text).toBe(200);
    expect(asked.body.data).toMatchObject({ status: 'requested', diagnostics_id: expect.any(String) });
    const id: string = asked.body.data.diagnostics_id;
    await cut; // the upload was under way when the link died

    const view = await waitFor(
      async () => (await get(`/v1/operator/diagnostics/${id}`)).body.data,
      (v) => v?.status === 'available' || v?.status === 'failed',
      60_000,
      500,
    );
    expect(view, JSON.stringify(view)).toMatchObject({ status: 'available', device_id: c.deviceId });
    // It went on from where the platform's copy ended, not from the start.
    expect(contentRanges.length, contentRanges.join(' | ')).toBeGreaterThanOrEqual(2);
    expect(contentRanges[0]).toMatch(/^bytes 0-/);
    expect(Number(/^bytes (\d+)-/.exec(contentRanges.at(-1)!)?.[1])).toBeGreaterThan(0);
    const command = await waitFor(
      () => tp.store.getCommand(asked.body.data.command_id),
      (v) => v?.command.status === 'succeeded',
      10_000,
    );
    expect(command?.command.status).toBe('succeeded');

    const content = await request(`${tp.url}/v1/operator/diagnostics/${id}/content`, {
      dispatcher,
      headers: { authorization: `Bearer ${tenant.token}` },
    });
    expect(content.statusCode).toBe(200);
    expect(content.headers['content-type']).toBe('application/gzip');
    const file = path.join(work.dir, `${id}.tar.gz`);
    writeFileSync(file, Buffer.from(await content.body.arrayBuffer()));
    expect(statSync(file).size).toBe(view.size);
    execFileSync('gunzip', ['-t', file]);
    const out = path.join(work.dir, id);
    mkdirSync(out);
    execFileSync('tar', ['-xzf', file, '-C', out]);
    const [root] = readdirSync(out);
    const parts = readdirSync(path.join(out, root!));
    expect(parts).toEqual(
      expect.arrayContaining(['logs', 'status.json', 'diag.json', 'commands.json', 'configuration.json']),
    );
    expect(
      readFileSync(path.join(out, root!, 'logs', 'agent.log'), 'utf8').split('\n').length,
    ).toBeGreaterThanOrEqual(8_000);
    for (const name of ['status.json', 'diag.json', 'commands.json', 'configuration.json']) {
      JSON.parse(readFileSync(path.join(out, root!, name), 'utf8'));
    }
    const everything = execFileSync('tar', ['-xzOf', file], { maxBuffer: 64 * 1024 * 1024 }).toString(
      'latin1',
    );
    expect(everything.includes(secret)).toBe(false);
    const token = c.current().store.getToken()?.accessToken;
    if (token) expect(everything.includes(token)).toBe(false);
  });
});
