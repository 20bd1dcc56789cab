import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type Fleet, runFleet } from '../../simulators/fleet/fleet-runner.js';
import type { FleetSummary } from '../../simulators/fleet/fleet-summary.js';
import { startTcpProxy, type TcpProxy, tempDir, waitFor } from '../helpers/agent.js';
import { REPO_ROOT, runCli } from '../helpers/cli.js';
import { expectCleanStop } from '../helpers/fleet.js';
import { createTenant, operatorToken, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { openStoredData } from '../helpers/stored-data.js';

/**
 * End to end: a fleet of simulated chargers — each the real agent on the simulated HAL — against a real
 * platform over HTTPS. Every charger registers (into the site the platform puts new chargers in, as the
 * sandbox does) and reports; operator commands reach every targeted charger and succeed; the stream delivers
 * every charger's telemetry; the platform goes away in the middle of the run and comes back on the same data
 * and address, and afterwards every outbox has drained and what the agents produced equals what the platform
 * stored. Part of the fleet also loses its own network for a few seconds (the fleet's simulated outages).
 * Finally, the built `charger-sim fleet` command runs a short fleet as a separate process.
 *
 * Cadences are shortened (telemetry every second, heartbeats every 2 s) and cars come and go within seconds,
 * so that sessions — and their charging records — open and close during the run.
 */

const COUNT = 50;
const SEED = 4242;

let platformDir: ReturnType<typeof tempDir>;
let tp: TestPlatform;
let proxy: TcpProxy;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let token: string;
let fleet: Fleet | undefined;
let summary: FleetSummary | undefined;
let stream: WebSocket | undefined;
/** device_id → telemetry messages the stream delivered. */
const streamed = new Map<string, number>();

const restartPlatform = async () => {
  tp = await startTestPlatform({ dataDir: platformDir.dir, defaultSiteId: tenant.siteId });
  token = await operatorToken(tp.http, tenant.clientId, tenant.clientSecret);
};
const api = {
  get: (path: string) => tp.http.get(path, { token }),
  post: (path: string, json: unknown) => tp.http.post(path, { token, json }),
};
const deviceIds = () =>
  fleet!
    .chargers()
    .map((c) => c.deviceId)
    .filter((id): id is string => id !== undefined);

beforeAll(async () => {
  platformDir = tempDir('fleet-e2e-platform-');
  // The operator and its site first; then the platform runs with that site as the home of new chargers.
  tp = await startTestPlatform({ dataDir: platformDir.dir });
  tenant = await createTenant(tp, 'fleet');
  await tp.stop();
  await restartPlatform();
  proxy = await startTcpProxy(tp.port);

  stream = new WebSocket(`wss://127.0.0.1:${tp.port}/v1/operator/stream`, {
    ca: tp.ca,
    headers: { authorization: `Bearer ${token}` },
  });
  stream.on('error', () => undefined);
  const subscribed = new Promise<void>((resolve, reject) => {
    stream!.on('message', (raw) => {
      const msg = JSON.parse(raw.toString()) as { type: string; device_id?: string };
      if (msg.type === 'subscribed') resolve();
      if (msg.type === 'telemetry' && msg.device_id)
        streamed.set(msg.device_id, (streamed.get(msg.device_id) ?? 0) + 1);
    });
    stream!.once('unexpected-response', (_req, res) =>
      reject(new Error(`stream refused: ${res.statusCode}`)),
    );
  });
  await new Promise<void>((resolve, reject) => {
    stream!.once('open', () => resolve());
    stream!.once('error', reject);
  });
  stream.send(JSON.stringify({ type: 'subscribe', site_ids: [tenant.siteId] }));
  await subscribed;

  fleet = await runFleet({
    platformUrl: `https://127.0.0.1:${proxy.port}`,
    ca: tp.ca,
    count: COUNT,
    seed: SEED,
    rampMs: 3_000,
    telemetryIntervalMs: 1_000,
    heartbeatIntervalMs: 2_000,
    v2gShare: 0.2,
    outageShare: 0.1,
    // Five chargers lose their network for 2-4 s, a few seconds in (once registered).
    outageWindow: { startMs: [3_000, 5_000], durationMs: [2_000, 4_000] },
    tuning: {
      telemetry: { activeMs: 1_000, idleMs: 3_000 },
      pollWaitSeconds: 5,
      backoff: { baseMs: 100, capMs: 1_500 },
      flushPaceMs: 20,
      requestTimeoutMs: 5_000,
    },
    hal: { initialOccupancy: 0.7, meanVacancyMs: 6_000, dwellMs: [5_000, 15_000], tickIntervalMs: 500 },
  });
});

afterAll(async () => {
  stream?.close();
  await fleet?.stop();
  await proxy?.close();
  await tp?.stop().catch(() => undefined); // stopped already when a test failed during the outage
  platformDir?.remove();
});

/** The built `charger-sim fleet`: `count` chargers for 8 s, fast cadences, JSON summary. */
function runFleetCli(count: number, seed: number, extra: string[] = []) {
  return runCli(
    [
      'fleet',
      '--platform-url',
      tp.url,
      '--ca',
      join(platformDir.dir, 'tls', 'cert.pem'),
      '--count',
      String(count),
      '--duration',
      '8',
      '--seed',
      String(seed),
      '--ramp',
      '1',
      '--telemetry-interval',
      '1',
      '--heartbeat-interval',
      '2',
      ...extra,
      '--json',
    ],
    { script: join(REPO_ROOT, 'dist', 'simulators', 'cli.js'), timeoutMs: 40_000 },
  );
}

describe('a fleet of simulated chargers against a real platform', () => {
  it('registers every charger, and every charger reports: visible to the operator and on the stream', async () => {
    const registered = await waitFor(
      () => fleet!.live().registered,
      (n) => n === COUNT,
      30_000,
      200,
    );
    expect(registered).toBe(COUNT);
    const ids = deviceIds();
    expect(new Set(ids).size).toBe(COUNT);
    const connectorsOf = new Map(fleet!.chargers().map((c) => [c.deviceId, c.connectors]));

    // Telemetry stored for every connector of every charger (read from the store: the API allows 60 reads a
    // minute), then confirmed through the operator API in one page.
    await waitFor(
      () => tp.store.listConnectorsOf(ids),
      (rows) =>
        rows.filter((r) => r.last_telemetry_ms !== null).length ===
        [...connectorsOf.values()].reduce((a, b) => a + b, 0),
      15_000,
      250,
    );
    const page = await api.get(`/v1/operator/devices?site_id=${tenant.siteId}&size=100`);
    expect(page.status, page.text).toBe(200);
    const devices = page.body.data.items as Array<{
      device_id: string;
      sn: string;
      status: string;
      connectors: Array<{ connector_id: number; last_telemetry_time?: string; v2g_capable?: boolean }>;
    }>;
    expect(devices.map((d) => d.device_id).sort()).toEqual([...ids].sort());
    for (const d of devices) {
      expect(d.sn).toMatch(new RegExp(`^SIM-${SEED}-\\d+$`));
      expect(d.connectors).toHaveLength(connectorsOf.get(d.device_id)!);
      for (const c of d.connectors)
        expect(c.last_telemetry_time, `${d.device_id}/${c.connector_id}`).toBeDefined();
    }
    // The mix: V2G chargers registered as such.
    const v2g = fleet!.chargers().filter((c) => c.v2g);
    expect(v2g.length).toBe(Math.round(COUNT * 0.2));
    for (const c of v2g) {
      const d = devices.find((x) => x.device_id === c.deviceId)!;
      expect(d.connectors.every((x) => x.v2g_capable === true)).toBe(true);
    }

    // The stream delivered telemetry of every charger.
    const seen = await waitFor(
      () => ids.filter((id) => (streamed.get(id) ?? 0) > 0).length,
      (n) => n === COUNT,
      10_000,
      200,
    );
    expect(seen).toBe(COUNT);
    stream?.close();
  }, 60_000);

  it('delivers operator commands to every targeted charger: stop, schedule, and flexibility on the site', async () => {
    const chargers = fleet!.chargers().filter((c) => c.deviceId && !c.outage);
    const commandIds: string[] = [];
    for (const c of chargers.slice(0, 8)) {
      const res = await api.post(`/v1/operator/devices/${c.deviceId}/connectors/${c.connectors}/stop`, {
        reason: 'fleet e2e',
      });
      expect(res.status, res.text).toBe(200);
      commandIds.push(res.body.data.command_id as string);
    }
    for (const c of chargers.slice(8, 13)) {
      const res = await api.post(`/v1/operator/devices/${c.deviceId}/connectors/1/schedule`, {
        schedule_id: 'night',
        type: 'daily',
        time_slots: [{ start: '22:00', end: '06:00', power_limit: 7 }],
        timezone: 'Europe/Berlin',
      });
      expect(res.status, res.text).toBe(200);
      commandIds.push(res.body.data.command_id as string);
    }
    const flex = await api.post('/v1/operator/control/flexibility', {
      target_type: 'site',
      target_ids: [tenant.siteId],
      command: 'set_power_limit',
      params: { power_limit_percent: 50, duration: 900, reason: 'fleet e2e' },
    });
    expect(flex.status, flex.text).toBe(200);
    expect(flex.body.data.device_count).toBe(COUNT);
    const controlId = flex.body.data.control_id as string;

    for (const id of commandIds) {
      const found = await waitFor(
        () => tp.store.getCommand(id),
        (v) => v?.command.status === 'succeeded',
        15_000,
        200,
      );
      expect(found?.command.status, JSON.stringify(found)).toBe('succeeded');
      const res = await api.get(`/v1/operator/commands/${id}`);
      expect(res.body.data.status).toBe('succeeded');
    }
    await waitFor(
      () => tp.store.getControl(controlId),
      (c) => c?.commands.every((x) => x.status === 'succeeded') === true,
      20_000,
      250,
    );
    const control = await api.get(`/v1/operator/control/${controlId}`);
    expect(control.status, control.text).toBe(200);
    const view = control.body.data as {
      device_count: number;
      devices: Array<{ device_id: string; status: string }>;
    };
    expect(view.device_count).toBe(COUNT);
    expect(view.devices.map((d) => d.device_id).sort()).toEqual([...deviceIds()].sort());
    expect(view.devices.filter((d) => d.status !== 'succeeded')).toEqual([]);
    // The agents applied it: every connector's cap is half its rating.
    for (const c of fleet!.chargers()) {
      const target = c.runtime!.controlLoop.targets().get(1);
      expect(target?.powerLimitKw ?? 0).toBeLessThanOrEqual(c.ratedPowerKw / 2 + 1e-9);
    }
  }, 60_000);

  it('rides out a platform outage: every outbox drains and what the agents produced is what the platform stored', async () => {
    // The fleet's own simulated outages are over by now, and the agents recovered from them.
    await waitFor(
      () => fleet!.live().out,
      (n) => n === 0,
      10_000,
      250,
    );

    proxy.setTarget(undefined);
    proxy.cut();
    await tp.stop();
    // Away until every charger holds something for it (telemetry every 1-3 s), not for a fixed 12 s.
    const holding = await waitFor(
      () => fleet!.chargers().filter((c) => (c.runtime?.stats().outbox.items ?? 0) > 0).length,
      (n) => n === COUNT,
      20_000,
      250,
    );
    expect(holding).toBe(COUNT);
    const during = fleet!.live({ backlog: true });
    expect(during.outbox_backlog).toBeGreaterThan(0);
    await restartPlatform();
    proxy.setTarget(tp.port);

    // Drained, and every request the outage failed retried with success (one in flight when the backlog reads 0
    // may still fail, and must get its retry before the stop).
    const drained = await waitFor(
      () => fleet!.live({ backlog: true }),
      (l) => l.outbox_backlog === 0 && l.awaiting_recovery === 0 && l.online === COUNT,
      // A loaded CI machine (test:postgres after the whole suite) took longer than 20 s to drain.
      45_000,
      250,
    );
    expect(drained.outbox_backlog).toBe(0);
    expect(drained.online).toBe(COUNT);

    summary = await fleet!.stop();
    expectCleanStop(summary, COUNT);
    // Both kinds of outage were exercised: the fleet's own (requests failed on purpose) and the platform's
    // (refused connections the agents retried and recovered from; telemetry waited in outboxes).
    expect(summary.failures.outage).toBeGreaterThan(0);
    expect(summary.retried.transient_recovered).toBeGreaterThan(0);
    expect(summary.telemetry.queued).toBeGreaterThan(0);
    expect(summary.commands.outcomes['stop:succeeded']).toBe(8);
    expect(summary.commands.outcomes['set_schedule:succeeded']).toBe(5);
    expect(summary.commands.outcomes['set_power_limit:succeeded']).toBe(COUNT);

    // Sent by the agents = stored by the platform, kind by kind (read-only, beside the running platform).
    const ids = deviceIds();
    const db = await openStoredData(platformDir.dir);
    try {
      const marks = ids.map(() => '?').join(',');
      const count = (sql: string) => db.value(sql, ids);
      const stored = {
        telemetry: await count(`SELECT count(*) AS n FROM telemetry WHERE device_id IN (${marks})`),
        chargingRecords: await count(
          `SELECT count(*) AS n FROM charging_records WHERE device_id IN (${marks})`,
        ),
        events: await count(`SELECT count(*) AS n FROM device_events WHERE device_id IN (${marks})`),
        statusReports: await count(
          `SELECT count(*) AS n FROM command_history h JOIN commands c ON c.command_id = h.command_id
           WHERE c.device_id IN (${marks}) AND h.status IN ('accepted', 'rejected', 'succeeded', 'failed')`,
        ),
      };
      const sent = {
        telemetry: summary.telemetry.produced,
        chargingRecords: summary.outbox.enqueued.charging_record,
        events: summary.outbox.enqueued.event,
        statusReports: summary.outbox.enqueued.command_status,
      };
      console.info(
        `fleet e2e: ${COUNT} chargers (${summary.mix.connectors} connectors, ${summary.mix.v2g_chargers} V2G); ` +
          `sent by the agents = stored by the platform: ${JSON.stringify(sent)}; ` +
          `commands ${JSON.stringify(summary.commands.outcomes)}, p50 ${summary.commands.latency_ms.p50_ms} ms; ` +
          `${summary.failures.outage} requests failed by simulated outages, ` +
          `${summary.retried.transient_recovered} recovered after the platform outage`,
      );
      expect(stored).toEqual(sent);
      expect(sent.chargingRecords).toBeGreaterThan(0);
      // accepted + succeeded for 8 stops, 5 schedules and one flexibility command per charger.
      expect(sent.statusReports).toBe(2 * (8 + 5 + COUNT));
    } finally {
      await db.close();
    }
  }, 120_000);

  it('runs as the built command: charger-sim fleet ... --json, exit 0 without errors', async () => {
    const res = await runFleetCli(20, 77);
    expect(res.code, res.stderr).toBe(0);
    const out = JSON.parse(res.stdout) as FleetSummary;
    expect(out).toMatchObject({ count: 20, registered: 20, errors: 0, seed: 77, store: 'memory' });
    expect(out.outbox.backlog_items).toBe(0);
    expect(out.telemetry.produced).toBeGreaterThan(20);
    expect(out.telemetry.delivered).toBe(out.telemetry.produced);
    expect(out.memory.per_charger_bytes).toBeGreaterThan(0);
    const registered = await tp.store.listDevices(
      [tenant.operatorId],
      { site_id: tenant.siteId, page: 1, size: 100 },
      Date.now() - 90_000,
    );
    expect(registered.items.filter((d) => d.sn?.startsWith('SIM-77-')).length).toBe(20);
  }, 60_000);

  it('runs in worker threads: --workers 2 splits the same fleet, and the summary adds up', async () => {
    const res = await runFleetCli(21, 78, ['--workers', '2']);
    expect(res.code, res.stderr).toBe(0);
    const out = JSON.parse(res.stdout) as FleetSummary;
    expect(out).toMatchObject({ count: 21, started: 21, registered: 21, errors: 0, workers: 2, seed: 78 });
    expect(out.outbox.backlog_items).toBe(0);
    expect(out.telemetry.produced).toBeGreaterThan(21);
    expect(out.telemetry.delivered).toBe(out.telemetry.produced);
    // The merged figures are the workers' sums: every request is in one kind, every successful one but the
    // long polls (none ends within 8 s: they wait 25 s) in the latency histogram; every charger opened its poll.
    const kinds = Object.values(out.requests.by_kind);
    expect(kinds.reduce((n, k) => n + k.requests, 0)).toBe(out.requests.total);
    const { poll, ...timed } = out.requests.by_kind;
    expect(out.requests.latency_ms.count).toBe(Object.values(timed).reduce((n, k) => n + k.ok, 0));
    expect(out.requests.latency_ms.count).toBeGreaterThan(21 * 8);
    expect(out.connections.opened_for_polls).toBeGreaterThanOrEqual(21);
    // Each charger ran once, in one worker: 21 distinct serials registered, no more.
    const registered = await tp.store.listDevices(
      [tenant.operatorId],
      { site_id: tenant.siteId, page: 1, size: 100 },
      Date.now() - 90_000,
    );
    const serials = registered.items.flatMap((d) => (d.sn?.startsWith('SIM-78-') ? [d.sn] : []));
    expect(new Set(serials).size).toBe(21);
    expect(serials.length).toBe(21);
  }, 60_000);

  it('--workers refuses what is not a whole number ≥ 1 (exit 2)', async () => {
    const res = await runCli(['fleet', '--platform-url', tp.url, '--count', '2', '--workers', '0'], {
      script: join(REPO_ROOT, 'dist', 'simulators', 'cli.js'),
      timeoutMs: 20_000,
    });
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('--workers must be a whole number ≥ 1');
  }, 30_000);
});
