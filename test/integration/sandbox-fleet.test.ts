import { execFileSync } from 'node:child_process';
import { createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Agent, request as undiciRequest } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pollUntil, runCli, type ServeProcess, spawnServe, tempDirs } from '../helpers/cli.js';
import { type HttpClient, httpClient, operatorToken } from '../helpers/platform.js';

/**
 * The live sandbox (DESIGN.md §16, issue 18): `serve --env sandbox` runs a simulated fleet — `charger-sim fleet`,
 * the real agent on the simulated HAL, as a child process — against itself. Checked as an operator sees it,
 * through the operator API over HTTPS on the built program: the chargers come online, report, carry out a stop,
 * keep their identities over a restart, and leave no process behind.
 */

const dirs = tempDirs('cp-sandbox-fleet-');
const running: ServeProcess[] = [];
const clients: HttpClient[] = [];
const FLEET_LINE =
  'Simulated fleet: 3 chargers (1 V2G) running the real agent; --sim-chargers 0 turns it off';

interface ConnectorView {
  connector_id: number;
  status: string;
  power?: number;
  v2g_capable?: boolean;
}
interface DeviceView {
  device_id: string;
  sn: string;
  status: string;
  connectors: ConnectorView[];
}

async function serve(args: string[]): Promise<ServeProcess> {
  const s = await spawnServe(args);
  running.push(s);
  return s;
}

async function connect(s: ServeProcess): Promise<{ http: HttpClient; token: string }> {
  const http = httpClient(s.url, await readFile(s.certPath, 'utf8'));
  clients.push(http);
  return { http, token: await operatorToken(http, s.clientId!, s.clientSecret!) };
}

/** Every device the sandbox client sees (one page: the seed's five and the simulated ones). */
async function devices(http: HttpClient, token: string): Promise<DeviceView[]> {
  const res = await http.get('/v1/operator/devices?size=100', { token });
  expect(res.status, res.text).toBe(200);
  return res.body.data.items as DeviceView[];
}

const simulated = (list: DeviceView[]) => list.filter((d) => d.sn.startsWith('SIM-'));

/** Child processes of `pid`, from /proc (`ppid` is the 4th field of `stat`, after the parenthesised name). */
function childPids(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) children.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return children;
}

/** Running (a zombie is not: it has exited and waits to be reaped). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  for (const s of running) s.kill();
  await Promise.all(running.map((s) => s.exited));
  await dirs.removeAll();
});

describe('serve --sim-chargers', () => {
  it.each(['2', '0'])(
    'production refuses --sim-chargers %s with a usage error, before anything is written',
    async (n) => {
      const dir = join(await dirs.make(), 'never-created');
      const res = await runCli([
        'serve',
        '--data-dir',
        dir,
        '--env',
        'production',
        '--self-signed',
        '--sim-chargers',
        n,
      ]);
      expect(res.code).toBe(1);
      expect(res.stderr.trim().split('\n')).toEqual([
        'charger-platform: --sim-chargers is for the sandbox (--env sandbox): production runs no simulated chargers',
      ]);
      expect(existsSync(dir)).toBe(false);
    },
  );

  it('under --registration attested the sandbox refuses --sim-chargers (its chargers have no certificates)', async () => {
    const dir = join(await dirs.make(), 'never-created');
    const res = await runCli([
      'serve',
      '--data-dir',
      dir,
      '--env',
      'sandbox',
      '--registration',
      'attested',
      '--sim-chargers',
      '2',
    ]);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('--sim-chargers needs open or allowlist registration');
    expect(existsSync(dir)).toBe(false);
  });

  it('under --registration attested the sandbox runs no fleet of its own unless asked', async () => {
    const dir = await dirs.make();
    const s = await serve(['--data-dir', dir, '--env', 'sandbox', '--registration', 'attested']);
    expect(s.stderr()).not.toContain('Simulated fleet');
    expect(childPids(s.child.pid!)).toEqual([]);
    expect(await s.stop()).toEqual({ code: 0, signal: null });
  });

  it('--sim-chargers 0 runs no fleet and the banner says nothing of one', async () => {
    const dir = await dirs.make();
    const s = await serve(['--data-dir', dir, '--env', 'sandbox', '--sim-chargers', '0']);
    expect(s.stderr()).not.toContain('Simulated fleet');
    expect(childPids(s.child.pid!)).toEqual([]);
    expect(existsSync(join(dir, 'sim-chargers'))).toBe(false);
    expect(await s.stop()).toEqual({ code: 0, signal: null });
  });
});

describe('serve --env sandbox --sim-chargers 3', () => {
  let dir: string;
  let first: ServeProcess;
  let http: HttpClient;
  let token: string;
  let fleetPid: number;
  let deviceCount: number;
  let simIds: string[];

  beforeAll(async () => {
    dir = await dirs.make();
    first = await serve(['--data-dir', dir, '--env', 'sandbox', '--sim-chargers', '3']);
    ({ http, token } = await connect(first));
  });

  it('the banner names the fleet, which runs as one child process', () => {
    expect(first.stderr()).toContain(FLEET_LINE);
    const children = childPids(first.child.pid!);
    expect(children).toHaveLength(1);
    fleetPid = children[0]!;
  });

  it('makes the sandbox its own update key, names it, and hands its public half to the fleet', () => {
    const privatePath = join(dir, 'keys', 'update-ed25519.pem');
    expect(first.stderr()).toContain(`Update key: ${privatePath}`);
    expect(statSync(privatePath).mode & 0o777).toBe(0o600);
    const key = createPublicKey(readFileSync(join(dir, 'keys', 'update-ed25519.pub.pem'), 'utf8'));
    expect(key.asymmetricKeyType).toBe('ed25519');
    // Its public half is what the private half signs for.
    const data = Buffer.from('charger-artifact-v1\n');
    expect(
      verify(null, data, key, sign(null, data, createPrivateKey(readFileSync(privatePath, 'utf8')))),
    ).toBe(true);
    const cmdline = readFileSync(`/proc/${fleetPid}/cmdline`, 'utf8').split('\0');
    expect(cmdline[cmdline.indexOf('--update-key') + 1]).toBe(join(dir, 'keys', 'update-ed25519.pub.pem'));
  });

  it("the chargers come online within seconds, in the sandbox operator's devices, one of them V2G", async () => {
    const list = await pollUntil(
      () => devices(http, token),
      (l) => simulated(l).filter((d) => d.status === 'online').length === 3,
      15_000,
      1_000,
    );
    const sims = simulated(list);
    expect(sims.map((d) => d.status)).toEqual(['online', 'online', 'online']);
    expect(sims.filter((d) => d.connectors.every((c) => c.v2g_capable))).toHaveLength(1);
    simIds = sims.map((d) => d.device_id).sort();
    deviceCount = list.length;
  });

  it('telemetry arrives: cars are charging, with power', async () => {
    const list = await pollUntil(
      () => devices(http, token),
      (l) =>
        simulated(l).some((d) => d.connectors.some((c) => c.status === 'charging' && (c.power ?? 0) > 0)),
      15_000,
      1_000,
    );
    const charging = simulated(list).flatMap((d) =>
      d.connectors.filter((c) => c.status === 'charging').map((c) => c.power),
    );
    expect(charging.length).toBeGreaterThan(0);
    for (const power of charging) expect(power).toBeGreaterThan(0);
  });

  it('a stop sent to a charging connector is carried out within seconds', async () => {
    const list = await devices(http, token);
    const target = simulated(list)
      .flatMap((d) => d.connectors.map((c) => ({ device: d.device_id, connector: c })))
      .find(({ connector }) => connector.status === 'charging');
    expect(target, 'a charging connector').toBeDefined();
    const { device, connector } = target!;
    const sent = await http.post(`/v1/operator/devices/${device}/connectors/${connector.connector_id}/stop`, {
      token,
      json: { reason: 'user_request' },
    });
    expect(sent.status, sent.text).toBe(200);
    const commandId = sent.body.data.command_id as string;
    const command = await pollUntil(
      () => http.get(`/v1/operator/commands/${commandId}`, { token }),
      (res) => res.body?.data?.status === 'succeeded',
      10_000,
      1_000,
    );
    expect(command.body.data.status, command.text).toBe('succeeded');
    // The charger reports the change of state at once.
    const after = await pollUntil(
      () => http.get(`/v1/operator/devices/${device}`, { token }),
      (res) => res.body?.data?.connectors?.[connector.connector_id - 1]?.status === 'idle',
      10_000,
      1_000,
    );
    expect(after.body.data.connectors[connector.connector_id - 1]).toMatchObject({
      status: 'idle',
      power: 0,
    });
  });

  it("a reset restarts a simulated charger's agent, which comes back online (DESIGN.md §20)", async () => {
    const [charger] = simulated(await devices(http, token));
    const boots = async () => {
      const res = await http.get(`/v1/operator/devices/${charger!.device_id}/events?size=100`, { token });
      return (res.body?.data?.items ?? []).filter((e: { kind: string }) => e.kind === 'boot')
        .length as number;
    };
    const before = await boots();
    const sent = await http.post(`/v1/operator/devices/${charger!.device_id}/reset`, {
      token,
      json: { mode: 'immediate', target: 'charger' },
    });
    expect(sent.status, sent.text).toBe(200);
    const command = await pollUntil(
      () => http.get(`/v1/operator/commands/${sent.body.data.command_id}`, { token }),
      (res) => ['succeeded', 'rejected', 'failed'].includes(res.body?.data?.status),
      10_000,
      500,
    );
    expect(command.body.data, command.text).toMatchObject({
      status: 'succeeded',
      reason: 'rebooting the charger',
    });
    expect(await pollUntil(boots, (n) => n > before, 15_000, 500)).toBe(before + 1);
    const device = await pollUntil(
      () => http.get(`/v1/operator/devices/${charger!.device_id}`, { token }),
      (res) => res.body?.data?.status === 'online',
      10_000,
      500,
    );
    expect(device.body.data.status).toBe('online');
  });

  it("a simulated charger's diagnostics hold its own log lines, as on hardware (--agent-logs)", async () => {
    const [charger] = simulated(await devices(http, token));
    const asked = await http.post(`/v1/operator/devices/${charger!.device_id}/diagnostics`, {
      token,
      json: {},
    });
    expect(asked.status, asked.text).toBe(200);
    const id = asked.body.data.diagnostics_id as string;
    const done = await pollUntil(
      () => http.get(`/v1/operator/diagnostics/${id}`, { token }),
      (res) => ['available', 'failed'].includes(res.body?.data?.status),
      15_000,
      500,
    );
    expect(done.body.data.status, done.text).toBe('available');
    // The archive is binary: read as bytes, not through the JSON client.
    const dispatcher = new Agent({ connect: { ca: await readFile(first.certPath, 'utf8') } });
    const content = await undiciRequest(`${first.url}/v1/operator/diagnostics/${id}/content`, {
      headers: { authorization: `Bearer ${token}` },
      dispatcher,
    });
    expect(content.statusCode).toBe(200);
    const file = join(dir, 'diagnostics.tar.gz');
    writeFileSync(file, Buffer.from(await content.body.arrayBuffer()));
    await dispatcher.close();
    const logs = execFileSync('tar', ['-xzOf', file, '--wildcards', '*/logs/agent.log'], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { name: string; level: number; msg: string });
    // The agent's own lines at its level (info): its start after the reset above, for one.
    expect(logs.length).toBeGreaterThan(0);
    expect(logs.every((l) => l.name === 'charger-agent' && l.level >= 30)).toBe(true);
    expect(existsSync(join(dir, 'sim-chargers', charger!.sn, 'logs', 'agent.log'))).toBe(true);
    // The agent that built the archive says it runs, and its directory is owner-only as on hardware.
    const diag = JSON.parse(
      execFileSync('tar', ['-xzOf', file, '--wildcards', '*/diag.json'], { encoding: 'utf8' }),
    );
    const checks = new Map(
      (diag.checks as Array<{ name: string; status: string }>).map((c) => [c.name, c.status]),
    );
    expect(checks.get('agent_process')).toBe('pass');
    expect(checks.get('configuration')).toBe('pass');
  });

  it('SIGTERM stops the fleet first, exits 0 and leaves no process behind', async () => {
    expect(await first.stop()).toEqual({ code: 0, signal: null });
    expect(alive(fleetPid)).toBe(false);
    expect(first.stderr()).not.toMatch(/unhandled|uncaught/i);
    // Each charger's store is kept in the data directory, as on a real charger.
    expect(readdirSync(join(dir, 'sim-chargers')).sort()).toHaveLength(3);
  });

  describe('restarted on the same data directory', () => {
    let second: ServeProcess;

    beforeAll(async () => {
      second = await serve(['--data-dir', dir, '--env', 'sandbox', '--sim-chargers', '3']);
      ({ http, token } = await connect(second));
    });

    it('resumes the same chargers: no new registrations', async () => {
      expect(second.stderr()).toContain(FLEET_LINE);
      const list = await pollUntil(
        () => devices(http, token),
        (l) => simulated(l).filter((d) => d.status === 'online').length === 3,
        15_000,
        1_000,
      );
      expect(list).toHaveLength(deviceCount);
      expect(
        simulated(list)
          .filter((d) => d.status === 'online')
          .map((d) => d.device_id)
          .sort(),
      ).toEqual(simIds);
    });

    it('a crash of the fleet leaves the platform serving', async () => {
      const [pid] = childPids(second.child.pid!);
      expect(pid).toBeDefined();
      process.kill(pid!, 'SIGKILL');
      const warned = await pollUntil(
        async () => second.stderr(),
        (text) => text.includes('warning: the simulated fleet ended by SIGKILL'),
        10_000,
      );
      expect(warned).toContain('the platform keeps serving');
      expect((await http.get('/healthz')).status).toBe(200);
      expect((await http.get('/v1/operator/devices?size=1', { token })).status).toBe(200);
      expect(await second.stop()).toEqual({ code: 0, signal: null });
    });
  });

  it('a platform killed outright (SIGKILL) does not leave its fleet behind: the fleet stops by itself', async () => {
    const third = await serve(['--data-dir', dir, '--env', 'sandbox', '--sim-chargers', '3']);
    const [pid] = childPids(third.child.pid!);
    expect(pid).toBeDefined();
    third.kill();
    await third.exited;
    // The fleet notices its IPC channel close, stops its chargers and exits.
    const gone = await pollUntil(
      async () => alive(pid!),
      (running) => !running,
      15_000,
    );
    expect(gone).toBe(false);
  });
});
