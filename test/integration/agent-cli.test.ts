import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureSelfSignedCertificate } from '../../platform/http/tls.js';
import { type AgentRunProcess, spawnAgentRun, tempDir, waitFor } from '../helpers/agent.js';
import { agentCli, agentJson, secretsOf, startRegisteredAgent } from '../helpers/agent-cli.js';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * The technician commands of the BUILT agent (`node dist/agent/cli.js status|diag|schedules|commands`,
 * DESIGN.md §11) as separate processes, reading the store of a real agent process that runs against a real
 * platform. Run `npm run build` first.
 */

type AgentProcess = AgentRunProcess;
const spawnAgent = (args: string[]): AgentProcess => spawnAgentRun(args);

let tp: TestPlatform;
let platformStopped = false;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let tmp: ReturnType<typeof tempDir>;
let dataDir: string;
let deviceId: string;
const SN = `CLI-${process.pid}`;
const running: AgentProcess[] = [];

async function queue(urlPath: string, json: unknown): Promise<string> {
  const res = await tp.http.post(urlPath, { token: tenant.token, json });
  expect(res.status, res.text).toBe(200);
  return (res.body.data.command_id ?? res.body.data.control_id) as string;
}

async function succeeded(commandId: string): Promise<void> {
  const c = await waitFor(
    () => tp.store.getCommand(commandId),
    (v) => v?.command.status === 'succeeded',
    10_000,
  );
  expect(c?.command.status, JSON.stringify(c)).toBe('succeeded');
}

beforeAll(async () => {
  tp = await startTestPlatform();
  tenant = await createTenant(tp, 'agent-cli');
  tmp = tempDir('agent-cli-');
  ({ dataDir, deviceId } = await startRegisteredAgent({ tp, tenant, dir: tmp.dir, sn: SN, running }));
});

afterAll(async () => {
  for (const p of running) p.child.kill('SIGKILL');
  if (!platformStopped) await tp?.stop();
  tmp?.remove();
});

describe('charger-agent status', () => {
  it('exits 5 with state no_store when --data-dir holds no agent store', async () => {
    const empty = mkdtempSync(path.join(tmpdir(), 'agent-cli-empty-'));
    const { code, json } = await agentJson(['status', '--data-dir', empty]);
    expect(code).toBe(5);
    expect(json.state).toBe('no_store');
    expect(json.problems[0]).toMatch(/no agent store/);
    const human = await agentCli(['status', '--data-dir', empty]);
    expect(human.code).toBe(5);
    expect(human.stdout).toMatch(/NO STORE/);
  });

  it('needs --data-dir: exit 2', async () => {
    const res = await agentCli(['status']);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/--data-dir/);
  });

  it('reports a running agent: identity as the platform knows it, connectors, outbox, a stop command', async () => {
    const stop = await queue(`/v1/operator/devices/${deviceId}/connectors/1/stop`, {
      reason: 'user_request',
    });
    await succeeded(stop);

    const { code, json, stdout } = await agentJson(['status', '--data-dir', dataDir]);
    expect(json.problems).toEqual([]);
    expect(code).toBe(0);
    expect(json.state).toBe('healthy');
    const device = await tp.store.getDevice(deviceId);
    expect(device?.sn).toBe(SN);
    expect(json.identity).toMatchObject({ sn: SN, device_id: deviceId });
    expect(json.platform_url).toBe(tp.url);
    expect(json.agent).toMatchObject({ running: true, version: expect.any(String) });
    expect(json.agent.pid).toBe(running[0]!.child.pid);
    expect(json.connectivity.last_heartbeat).toMatchObject({ ok: true, round_trip_ms: expect.any(Number) });
    expect(json.connectivity.stale).toBe(false);
    expect(Date.parse(json.token.expires_at)).toBeGreaterThan(Date.now());
    expect(json.token).not.toHaveProperty('access_token');
    expect(typeof json.clock_skew.ms).toBe('number');

    expect(json.connectors.map((c: { connector_id: number }) => c.connector_id)).toEqual([1, 2]);
    for (const c of json.connectors) {
      expect(c).toMatchObject({ rated_power_kw: expect.any(Number), vehicle_present: true });
      expect(['idle', 'charging', 'discharging', 'fault']).toContain(c.state);
      expect(typeof c.power_kw).toBe('number');
      expect(c.in_force).toMatchObject({ mode: expect.any(String), reason: expect.any(String) });
    }
    // The stop holds connector 1; connector 2 has no schedule: charging is unrestricted.
    expect(json.connectors[0].in_force).toMatchObject({
      mode: 'idle',
      power_limit_kw: 0,
      source: 'override',
    });
    expect(json.connectors[0].in_force.override).toMatchObject({ kind: 'stop', commandId: stop });
    expect(json.connectors[1].in_force).toMatchObject({ mode: 'charge', source: 'schedule' });

    expect(json.outbox).toMatchObject({
      items: expect.any(Number),
      bytes: expect.any(Number),
      dropped: { telemetry: 0, event: 0, charging_record: 0, command_status: 0, firmware_status: 0 },
    });
    expect(Object.keys(json.outbox.by_kind).sort()).toEqual([
      'charging_record',
      'command_status',
      'event',
      'firmware_status',
      'telemetry',
    ]);
    expect(json.recent_commands[0]).toMatchObject({ command_id: stop, command: 'stop', status: 'succeeded' });

    const human = await agentCli(['status', '--data-dir', dataDir]);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(`charger-agent status — ${SN} (${deviceId})`);
    expect(human.stdout).toMatch(/State\s+HEALTHY/);
    expect(human.stdout).toMatch(/Heartbeat\s+ok .* ago, round trip \d+ ms/);
    expect(human.stdout).toMatch(/Connector 1 .*\n\s+now\s+.*\n\s+in force\s+idle — stopped by command/);
    expect(human.stdout).toContain(stop);

    for (const secret of secretsOf(dataDir)) {
      expect(stdout).not.toContain(secret);
      expect(human.stdout).not.toContain(secret);
    }
  });
});

describe('charger-agent schedules and commands', () => {
  it('lists stored schedules and limits with what is in force now, and the journal newest first', async () => {
    const schedule = await queue(`/v1/operator/devices/${deviceId}/connectors/2/schedule`, {
      schedule_id: 'cli-all-day',
      type: 'daily',
      time_slots: [{ start: '00:00', end: '00:00', power_limit: 7 }],
      timezone: 'Europe/Berlin',
      target_soc: 95,
    });
    await succeeded(schedule);
    const control = await tp.http.post('/v1/operator/control/flexibility', {
      token: tenant.token,
      json: {
        target_type: 'site',
        target_ids: [tenant.siteId],
        command: 'set_power_limit',
        params: { power_limit_percent: 50, duration: 600, reason: 'grid test' },
      },
    });
    expect(control.status, control.text).toBe(200);
    const controlId = control.body.data.control_id as string;
    const limited = await waitFor(
      () => agentJson(['schedules', '--data-dir', dataDir]),
      (r) => r.json.limits.some((l: { control_id: string }) => l.control_id === controlId),
      10_000,
      250,
    );
    expect(limited.code).toBe(0);
    const report = limited.json;
    const c2 = report.connectors.find((c: { connector_id: number }) => c.connector_id === 2);
    expect(c2.schedules).toHaveLength(1);
    expect(c2.schedules[0]).toMatchObject({
      in_effect: true,
      schedule: { schedule_id: 'cli-all-day', type: 'daily', timezone: 'Europe/Berlin', target_soc: 95 },
    });
    // min(7 kW slot, 50 % of the rating) — unless the SOC already reached the target.
    expect(c2.in_force.schedule_id).toBe('cli-all-day');
    expect(c2.in_force.limit_ids).toContain(controlId);
    if (c2.in_force.mode === 'charge') {
      expect(c2.in_force.power_limit_kw).toBe(Math.min(7, c2.rated_power_kw / 2));
    }
    // The limit ends in 10 minutes: that is the next change of connector 2 (unless the target SOC is reached).
    expect(report.limits[0]).toMatchObject({ control_id: controlId, kind: 'power_limit', active: true });
    const c1 = report.connectors.find((c: { connector_id: number }) => c.connector_id === 1);
    expect(c1.override).toMatchObject({ kind: 'stop' });
    expect(c1.schedules).toEqual([]);

    const human = await agentCli(['schedules', '--data-dir', dataDir]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/cli-all-day\s+daily\s+Europe\/Berlin\s+in effect/);
    expect(human.stdout).toMatch(/override\s+stopped by command/);
    expect(human.stdout).toContain(controlId);

    const commands = await agentJson(['commands', '--data-dir', dataDir, '--limit', '2']);
    expect(commands.code).toBe(0);
    expect(commands.json.total).toBeGreaterThanOrEqual(3);
    expect(commands.json.commands).toHaveLength(2);
    const [newest, older] = commands.json.commands;
    expect(Date.parse(newest.received_at)).toBeGreaterThanOrEqual(Date.parse(older.received_at));
    expect(newest).toMatchObject({ command: 'set_power_limit', params: { power_limit_percent: 50 } });
    expect(older).toMatchObject({ command_id: schedule, command: 'set_schedule', status: 'succeeded' });

    const all = await agentCli(['commands', '--data-dir', dataDir]);
    expect(all.code).toBe(0);
    expect(all.stdout).toMatch(/^RECEIVED\s+COMMAND\s+STATUS/);
    expect(all.stdout).toContain(schedule);
    expect((await agentCli(['commands', '--data-dir', dataDir, '--limit', 'x'])).code).toBe(2);
  });
});

describe('charger-agent diag', () => {
  it('passes every check for a running, registered agent without disturbing it', async () => {
    const { code, json, stdout } = await agentJson(['diag', '--data-dir', dataDir]);
    expect(json.ok, stdout).toBe(true);
    expect(code).toBe(0);
    expect(json).toMatchObject({ sn: SN, device_id: deviceId, platform_url: tp.url });
    expect(json.checks.map((c: { name: string }) => c.name)).toEqual([
      'store',
      'configuration',
      'agent_process',
      'dns',
      'tcp',
      'tls',
      'token',
      'round_trip',
      'clock_skew',
      'disk',
      'logs',
      'time_zones',
    ]);
    const byName = Object.fromEntries(json.checks.map((c: { name: string }) => [c.name, c]));
    for (const name of [
      'store',
      'agent_process',
      'dns',
      'tcp',
      'tls',
      'token',
      'round_trip',
      'clock_skew',
      'disk',
    ]) {
      expect(byName[name], name).toMatchObject({ status: 'pass', hint: null, detail: expect.any(String) });
    }
    // The simulated HAL is worth a warning on a real charger; warnings do not fail diag.
    expect(byName.configuration).toMatchObject({ status: 'warn', hint: expect.stringMatching(/--hal/) });
    expect(byName.tls.data).toMatchObject({ authorized: true, days_to_expiry: expect.any(Number) });
    expect(['TLSv1.2', 'TLSv1.3']).toContain(byName.tls.data.protocol);
    expect(byName.round_trip.detail).toMatch(/GET \/v1\/device\/commands\?wait=0/);
    expect(Math.abs(byName.clock_skew.data.skew_ms)).toBeLessThan(5_000);
    // The schedules stored earlier in this file are in Europe/Berlin, read from the system's tz database.
    expect(byName.time_zones).toMatchObject({
      status: 'pass',
      hint: null,
      data: { zones: [{ zone: 'Europe/Berlin', source: 'tz_database' }] },
    });
    for (const secret of secretsOf(dataDir)) expect(stdout).not.toContain(secret);

    // The agent carries on: its own token still works and commands still reach it.
    const after = await queue(`/v1/operator/devices/${deviceId}/connectors/1/schedule`, {
      schedule_id: 'after-diag',
      type: 'daily',
      time_slots: [{ start: '01:00', end: '02:00' }],
      timezone: 'UTC',
    });
    await succeeded(after);
    expect((await agentCli(['status', '--data-dir', dataDir])).code).toBe(0);

    const human = await agentCli(['diag', '--data-dir', dataDir]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^PASS {2}tls +TLSv1\.[23], /m);
    expect(human.stdout).toMatch(/All checks passed/);
  });

  it('before registration, with the wrong CA: status exits 5 and diag fails TLS with a hint about the CA', async () => {
    const other = await ensureSelfSignedCertificate(path.join(tmp.dir, 'other-platform'));
    const wrongCa = path.join(tmp.dir, 'wrong-ca.pem');
    writeFileSync(wrongCa, other.cert);
    const dir = path.join(tmp.dir, 'wrong-ca-data');
    const agent = spawnAgent([
      '--data-dir',
      dir,
      '--platform-url',
      tp.url,
      '--ca',
      wrongCa,
      '--sn',
      `${SN}-WRONG-CA`,
      '--connectors',
      '1',
    ]);
    running.push(agent);
    const status = await waitFor(
      () => agentJson(['status', '--data-dir', dir]).catch(() => undefined),
      (s) => s?.json?.last_error?.where === 'register',
      15_000,
      250,
    );
    expect(status?.code).toBe(5);
    expect(status?.json).toMatchObject({ state: 'not_registered', identity: null, platform_url: tp.url });
    expect(status?.json.agent.running).toBe(true);

    const { code, json } = await agentJson(['diag', '--data-dir', dir]);
    expect(code).toBe(4);
    expect(json.ok).toBe(false);
    const byName = Object.fromEntries(json.checks.map((c: { name: string }) => [c.name, c]));
    expect(byName.tcp.status).toBe('pass');
    expect(byName.tls).toMatchObject({ status: 'fail' });
    expect(byName.tls.detail).toMatch(/not trusted/);
    expect(byName.tls.hint).toContain(wrongCa);
    expect(byName.token).toMatchObject({ status: 'fail', detail: expect.stringMatching(/not registered/) });
    expect(byName.round_trip.status).toBe('skip');
    agent.child.kill('SIGKILL');
  });

  it('fails the TCP check with a hint when the platform is down', async () => {
    // The platform goes away, dropping its connections (the agent's long poll would hold a graceful close).
    const drop = setInterval(() => tp.platform.app.server.closeAllConnections(), 50);
    try {
      await tp.stop();
    } finally {
      clearInterval(drop);
    }
    platformStopped = true;
    const started = Date.now();
    const { code, json } = await agentJson(['diag', '--data-dir', dataDir]);
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(code).toBe(4);
    expect(json.ok).toBe(false);
    const byName = Object.fromEntries(json.checks.map((c: { name: string }) => [c.name, c]));
    expect(byName.store.status).toBe('pass');
    expect(byName.tcp).toMatchObject({ status: 'fail', data: { code: 'ECONNREFUSED' } });
    expect(byName.tcp.hint).toMatch(/platform is down/);
    for (const name of ['tls', 'token', 'round_trip']) expect(byName[name].status, name).toBe('skip');

    const human = await agentCli(['diag', '--data-dir', dataDir]);
    expect(human.code).toBe(4);
    expect(human.stdout).toMatch(/^FAIL {2}tcp +cannot connect to 127\.0\.0\.1:\d+/m);
    expect(human.stdout).toMatch(/hint: nothing accepts connections/);
    expect(human.stdout).toMatch(/check(s)? failed/);
  });
});
