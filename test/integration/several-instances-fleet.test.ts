import { readFile } from 'node:fs/promises';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type Fleet, runFleet } from '../../simulators/fleet/fleet-runner.js';
import type { FleetStatsWindow } from '../../simulators/fleet/stats-window.js';
import { waitFor } from '../helpers/agent.js';
import { type ServeProcess, spawnServe, tempDirs } from '../helpers/cli.js';
import { expectCleanStop, expectStoredAsSent } from '../helpers/fleet.js';
import { startHaproxy, type TestBalancer } from '../helpers/haproxy.js';
import { type HttpClient, httpClient, operatorToken } from '../helpers/platform.js';
import { freePort, startRedisServer, type TestRedis } from '../helpers/redis.js';

/**
 * Issue 16: three `serve` processes over one PostgreSQL database and one Redis, behind HAProxy in TCP mode (as
 * docs/deployment.md runs them), and a fleet of real agents on the simulated HAL talking to the balancer. What
 * one instance accepts the others act on; one instance killed with SIGKILL under load, and Redis restarted, cost
 * the chargers nothing they cannot retry; what the agents sent is what was stored, none lost, none twice.
 * PostgreSQL only (`npm run test:postgres`); needs `haproxy` and `redis-server` (Debian packages).
 */

const COUNT = 120;
const SEED = 16_016;
const STOPPED = 30;
const dirs = tempDirs('several-instances-fleet-');
let redis: TestRedis;
let dataDir: string;
const instances: ServeProcess[] = [];
let balancer: TestBalancer;
let ca: string;
let fleet: Fleet | undefined;
let operator: HttpClient;
let token: string;
const streamed: Array<Record<string, unknown>> = [];
let stream: WebSocket | undefined;
let siteId: string;

const serveArgs = (name: string) => [
  '--env',
  'sandbox',
  '--data-dir',
  dataDir,
  '--redis',
  redis.url,
  '--instance-id',
  name,
];

beforeAll(async () => {
  redis = await startRedisServer();
  dataDir = await dirs.make();
  // One at a time: the first seeds the sandbox and creates the certificate the others then use.
  // Each with a metrics listener of its own (on one host, each instance needs its own --metrics-port).
  for (const name of ['inst-1', 'inst-2', 'inst-3'])
    instances.push(await spawnServe([...serveArgs(name), '--metrics-port', String(await freePort())]));
  ca = await readFile(instances[0]!.certPath, 'utf8');
  balancer = await startHaproxy(instances.map((i) => i.port));
  operator = httpClient(instances[0]!.url, ca);
  token = await operatorToken(operator, instances[0]!.clientId!, instances[0]!.clientSecret!);

  fleet = await runFleet({
    platformUrl: balancer.url,
    ca,
    count: COUNT,
    seed: SEED,
    rampMs: 4_000,
    outageShare: 0,
    allCharging: true,
    telemetryIntervalMs: 2_000,
    heartbeatIntervalMs: 8_000,
    tuning: {
      telemetry: { activeMs: 2_000, idleMs: 6_000 },
      pollWaitSeconds: 10,
      backoff: { baseMs: 1_000, capMs: 10_000 },
      requestTimeoutMs: 10_000,
    },
  });
  await waitFor(
    () => fleet!.live().registered,
    (n) => n === COUNT,
    60_000,
    250,
  );
}, 180_000);

afterAll(async () => {
  stream?.close();
  await fleet?.stop();
  await operator?.close();
  await balancer?.stop();
  for (const i of instances) await i.stop();
  await redis?.stop();
  await dirs.removeAll();
});

const fleetDeviceIds = () => fleet!.chargers().map((c) => c.deviceId!);

/** One metric's value from an instance's metrics listener. */
async function metric(instance: ServeProcess, name: string): Promise<number> {
  const text = await (await request(instance.metricsUrl!)).body.text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
  return line ? Number(line.split(' ').at(-1)) : Number.NaN;
}

describe('three instances behind HAProxy, one database, one Redis, a fleet of real agents', () => {
  it('spreads the chargers over every instance, and a subscriber on one instance sees every charger', async () => {
    const steady = await waitFor(
      () => fleet!.live(),
      (l) => l.online === COUNT,
      30_000,
      250,
    );
    expect(steady.online).toBe(COUNT);
    for (const i of instances) expect(await metric(i, 'charger_platform_chargers_online')).toBeGreaterThan(0);

    const one = await operator.get(`/v1/operator/devices/${fleetDeviceIds()[0]}`, { token });
    expect(one.status, one.text).toBe(200);
    stream = new WebSocket(`wss://127.0.0.1:${instances[2]!.port}/v1/operator/stream`, {
      ca,
      headers: { authorization: `Bearer ${token}` },
    });
    stream.on('message', (raw) => streamed.push(JSON.parse(raw.toString())));
    await new Promise<void>((resolve, reject) => {
      stream!.once('open', () => resolve());
      stream!.once('error', reject);
    });
    siteId = one.body.data.site_id;
    stream.send(JSON.stringify({ type: 'subscribe', site_ids: [siteId] }));
    const everyCharger = new Set(fleetDeviceIds());
    const heard = await waitFor(
      () => new Set(streamed.filter((m) => m.type === 'telemetry').map((m) => m.device_id as string)),
      (ids) => [...everyCharger].every((id) => ids.has(id)),
      20_000,
      250,
    );
    expect([...everyCharger].filter((id) => !heard.has(id))).toEqual([]);
  }, 60_000);

  it('carries out commands sent to one instance for chargers polling on the others, to succeeded', async () => {
    const targets = fleetDeviceIds().slice(0, STOPPED);
    const commandIds: string[] = [];
    for (const deviceId of targets) {
      const res = await operator.post(`/v1/operator/devices/${deviceId}/connectors/1/stop`, {
        token,
        json: { reason: 'user_request' },
      });
      expect(res.status, res.text).toBe(200);
      commandIds.push(res.body.data.command_id);
    }
    const succeeded = await waitFor(
      () =>
        new Set(
          streamed
            .filter((m) => m.type === 'command_status' && m.status === 'succeeded')
            .map((m) => m.command_id as string),
        ),
      (ids) => commandIds.every((id) => ids.has(id)),
      30_000,
      250,
    );
    expect(commandIds.filter((id) => !succeeded.has(id))).toEqual([]);
  }, 60_000);

  let killWindow: FleetStatsWindow;
  it('carries on through the others when one instance is killed (SIGKILL) under load', async () => {
    // A 10-s pause of the site: its end is the sweep's to see, which must go on whichever instance died.
    const control = await operator.post('/v1/operator/control/flexibility', {
      token,
      json: {
        target_type: 'site',
        target_ids: [siteId],
        command: 'pause_charging',
        params: { duration: 10 },
      },
    });
    expect(control.status, control.text).toBe(200);
    fleet!.takeWindow();
    instances[1]!.kill();
    expect((await instances[1]!.exited).signal).toBe('SIGKILL');
    // Its chargers' connections broke; they reconnect through the balancer to the two that remain.
    await new Promise((r) => setTimeout(r, 10_000));
    const back = await waitFor(
      () => fleet!.live({ backlog: true }),
      (l) => l.online === COUNT && l.outbox_backlog === 0,
      45_000,
      500,
    );
    expect(back.online).toBe(COUNT);
    expect(back.outbox_backlog).toBe(0);
    killWindow = fleet!.takeWindow();
    console.info(
      `several instances: SIGKILL of inst-2 under ${COUNT} chargers: ${killWindow.requests} requests, failed ` +
        `${JSON.stringify(killWindow.failed_by_cause)}, p99 ${killWindow.latency_ms.p99_ms} ms`,
    );
    // The kill cut the requests (long polls at least) of the chargers it served...
    expect(killWindow.failures.transient).toBeGreaterThan(0);
    // ... and nothing else: only what the kill itself cut (connections reset or refused, requests timed out): no 4xx, no 5xx.
    const answered = Object.keys(killWindow.failed_by_cause).filter((c) => c.startsWith('http_'));
    expect(answered).toEqual([]);
    expect(killWindow.failures.rate_limited).toBe(0);
    // The sweep kept running: the control ended as its window did.
    const controlStatus = await waitFor(
      async () =>
        (await operator.get(`/v1/operator/control/${control.body.data.control_id}`, { token })).body.data
          .status,
      (status) => status === 'completed',
      20_000,
      1_000,
    );
    expect(controlStatus).toBe('completed');
    // The survivors still serve and say so.
    for (const i of [instances[0]!, instances[2]!]) {
      const http = httpClient(i.url, ca);
      try {
        expect((await http.get('/readyz')).status).toBe(200);
      } finally {
        await http.close();
      }
    }
  }, 90_000);

  it('loses no request when Redis restarts mid-run', async () => {
    fleet!.takeWindow();
    await redis.restart();
    await new Promise((r) => setTimeout(r, 8_000));
    const window = fleet!.takeWindow();
    expect(window.requests).toBeGreaterThan(COUNT);
    expect(window.failed_by_cause).toEqual({});
  }, 60_000);

  it('stored exactly what the agents sent, kind by kind: none lost, none twice', async () => {
    expect(killWindow, 'the kill test ran first').toBeDefined();
    stream?.close();
    const summary = await fleet!.stop();
    fleet = undefined;
    expectCleanStop(summary, COUNT);
    expect(summary.commands.outcomes['stop:succeeded']).toBe(STOPPED);

    const sent = await expectStoredAsSent(dataDir, SEED, COUNT, summary);
    console.info(`several instances: sent by the agents = stored: ${JSON.stringify(sent)}`);
  }, 90_000);
});
