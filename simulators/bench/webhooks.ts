#!/usr/bin/env node
import '../supported-node.js';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { registerLoadChargers } from './bare-baseline.js';
import { benchArgsOrExit, DATABASE_OPTION } from './bench-args.js';
import { type BenchDatabase, type BenchStorage, withBenchDatabase } from './bench-database.js';
import { type BenchPlatform, benchClient, call, startBenchPlatform } from './bench-platform.js';
import { type LoadRound, type Request, runLoad, summarizeLoad } from './load-generator.js';
import { sampleProcess } from './process-sampler.js';

/**
 * Webhooks against ingest (DESIGN.md §14: deliveries never slow ingest): telemetry POSTs at full speed in which
 * every `--change-every` records of a charger change its connector's state (1, the default: every request queues
 * a `connector.state_changed` event) for each of `--endpoints` webhook endpoints, all subscribed to everything,
 * whose receiver answers only after `--receiver-delay-ms` (a slow receiver: the backlog grows). Measured in rotating rounds beside the same platform with those
 * endpoints disabled (nothing queued, nothing sent): the ratio is what webhooks cost the charger path.
 * Usage: npm run bench:webhooks [-- --devices 1000 --endpoints 10 --seconds 20 --rounds 4]
 */
export function measureWebhooks(
  opts: {
    devices: number;
    endpoints: number;
    connections: number;
    seconds: number;
    rounds: number;
    receiverDelayMs: number;
    /** Every how many records of a charger its connector changes state (1: every record). */
    changeEvery: number;
  },
  storage: BenchStorage = {},
) {
  return withBenchDatabase(storage, (database) => webhooksOn(database, opts));
}

/**
 * `count` webhook endpoints on the receiver, all events, for the sandbox's operator. One client per endpoint: each
 * toggles its own endpoint, within its own write budget (60 a minute).
 */
async function createEndpoints(platform: BenchPlatform, receiverUrl: string, count: number) {
  // The operator of the sandbox's default site, where registered chargers go (not the other tenant).
  const operators = (await platform.admin(['operators', 'list'])) as Array<{
    operator_id: string;
    name: string;
  }>;
  const sandbox = operators.find((o) => o.name === 'Sandbox Energy');
  if (!sandbox) throw new Error(`no sandbox operator among ${JSON.stringify(operators)}`);
  const hooks: Array<{ id: string; token: string }> = [];
  for (let i = 0; i < count; i++) {
    const token = await benchClient(platform, sandbox.operator_id);
    const res = await call(platform, 'POST', '/v1/operator/webhooks', {
      token,
      json: { url: `${receiverUrl}/hook-${i}`, events: ['*'] },
    });
    if (res.status !== 200) throw new Error(`webhook: ${res.status} ${JSON.stringify(res.body)}`);
    hooks.push({ id: res.body.data.webhook_id as string, token });
  }
  return {
    async setEndpoints(status: 'enabled' | 'disabled') {
      for (const h of hooks) {
        const res = await call(platform, 'PATCH', `/v1/operator/webhooks/${h.id}`, {
          token: h.token,
          json: { status },
        });
        if (res.status !== 200) throw new Error(`PATCH webhook: ${res.status} ${JSON.stringify(res.body)}`);
      }
    },
    /** Deliveries queued for every endpoint, from their delivery logs. */
    async queued() {
      let queued = 0;
      for (const h of hooks) {
        const log = await call(platform, 'GET', `/v1/operator/webhooks/${h.id}/deliveries?size=1`, {
          token: h.token,
        });
        queued += log.body.data.total as number;
      }
      return queued;
    },
  };
}

/**
 * Telemetry round robin over the chargers. Every `changeEvery` records of a charger its connector flips between
 * idle and charging (1: every record).
 */
function flippingTelemetry(headers: Array<Record<string, string>>, changeEvery: number) {
  const counters = headers.map(() => 0);
  const base = Date.now() - 86_400_000;
  let sent = 0;
  return (r: Request): Request => {
    const i = sent++ % headers.length;
    const n = counters[i]!++;
    r.path = '/v1/device/telemetry';
    r.headers = headers[i]!;
    r.body =
      `{"timestamp":"${new Date(base + n * 1000).toISOString()}","connector_id":1,` +
      (Math.floor(n / changeEvery) % 2 === 0
        ? '"state":"charging","power":22.1}'
        : '"state":"idle","power":0}');
    return r;
  };
}

async function webhooksOn(database: BenchDatabase, o: Parameters<typeof measureWebhooks>[0]) {
  // The sandbox puts registered chargers in its site and allows a loopback http receiver.
  const platform = await startBenchPlatform(['--env', 'sandbox'], { database: database.choice });
  const receiver = await startSlowReceiver(o.receiverDelayMs);
  try {
    const endpoints = await createEndpoints(platform, receiver.url, o.endpoints);
    const { setEndpoints } = endpoints;
    const request = flippingTelemetry(
      await registerLoadChargers(platform, 'WEBHOOKS', o.devices),
      o.changeEvery,
    );
    const cpu = { quiet: 0, busy: 0 };
    const round = async (side: 'quiet' | 'busy', ms: number) => {
      await setEndpoints(side === 'busy' ? 'enabled' : 'disabled');
      const before = sampleProcess(platform.pid);
      const result = await runLoad({
        origin: platform.url.replace('localhost', '127.0.0.1'),
        connections: o.connections,
        durationMs: ms,
        requests: request,
      });
      cpu[side] += sampleProcess(platform.pid).cpuSeconds - before.cpuSeconds;
      return result;
    };
    // Warm-up on both sides, not counted.
    await round('quiet', 2000);
    await round('busy', 2000);
    cpu.quiet = 0;
    cpu.busy = 0;
    const rounds = { quiet: [] as LoadRound[], busy: [] as LoadRound[] };
    const roundMs = (o.seconds * 1000) / o.rounds;
    for (let r = 0; r < o.rounds; r++) {
      const order: Array<'quiet' | 'busy'> = r % 2 === 0 ? ['busy', 'quiet'] : ['quiet', 'busy'];
      for (const side of order) rounds[side].push(await round(side, roundMs));
    }
    await setEndpoints('enabled');
    const quiet = summarizeLoad(rounds.quiet);
    const busy = summarizeLoad(rounds.busy);
    const queued = await endpoints.queued();
    const seconds = (side: 'quiet' | 'busy') => rounds[side].reduce((s, r) => s + r.seconds, 0);
    return {
      machine: `${process.platform} ${process.arch}, node ${process.version}`,
      backend: database.backend,
      devices: o.devices,
      endpoints: o.endpoints,
      receiver_delay_ms: o.receiverDelayMs,
      change_every: o.changeEvery,
      connections: o.connections,
      seconds: o.seconds,
      rounds: o.rounds,
      without_webhooks: quiet,
      with_webhooks: busy,
      /** Ingest with every request queuing an event for each endpoint, against none: the goal is 1. */
      ratio: Math.round((busy.rps / quiet.rps) * 1000) / 1000,
      p99_ratio: Math.round((busy.p99_ms / quiet.p99_ms) * 1000) / 1000,
      platform_cpu_cores: {
        without_webhooks: Math.round((cpu.quiet / seconds('quiet')) * 100) / 100,
        with_webhooks: Math.round((cpu.busy / seconds('busy')) * 100) / 100,
      },
      deliveries_queued: queued,
      receiver_requests: receiver.requests(),
      rps_by_round: {
        without_webhooks: rounds.quiet.map((r) => Math.round(r.latencies.length / r.seconds)),
        with_webhooks: rounds.busy.map((r) => Math.round(r.latencies.length / r.seconds)),
      },
    };
  } finally {
    await receiver.close();
    await platform.stop();
  }
}

/** A webhook receiver that answers 204 after `delayMs` (plain HTTP on loopback: the sandbox allows it). */
async function startSlowReceiver(delayMs: number) {
  let requests = 0;
  const server: Server = createServer((req, res) => {
    requests++;
    req.resume();
    req.on('end', () => setTimeout(() => res.writeHead(204).end(), delayMs));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests: () => requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values, texts } = benchArgsOrExit({
    usage: `Usage: npm run bench:webhooks [-- --devices 1000 --endpoints 10 --seconds 20 --rounds 4]
  telemetry in which every record is a state change, with webhook endpoints enabled and disabled in turn`,
    options: {
      devices: { default: 1000, integer: true, help: 'chargers sending (none over its own rate limit)' },
      endpoints: { default: 10, integer: true, help: 'webhook endpoints subscribed to every event' },
      connections: { default: 64, integer: true, help: 'keep-alive connections of the load generator' },
      seconds: { default: 20, help: 'seconds of load for each side, split over the rounds' },
      rounds: { default: 4, integer: true, help: 'rounds, alternating which side goes first' },
      'receiver-delay-ms': { default: 2000, integer: true, help: 'how long the receiver takes to answer' },
      'change-every': {
        default: 1,
        integer: true,
        help: 'every how many records a connector changes state (1: every record, the worst case)',
      },
    },
    texts: { database: DATABASE_OPTION },
  });
  const figures = await measureWebhooks(
    {
      devices: values.devices,
      endpoints: values.endpoints,
      connections: values.connections,
      seconds: values.seconds,
      rounds: values.rounds,
      receiverDelayMs: values['receiver-delay-ms'],
      changeEvery: values['change-every'],
    },
    { database: texts.database },
  );
  process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
}
