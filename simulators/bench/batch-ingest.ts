#!/usr/bin/env node
import '../supported-node.js';
import { type BareServer, registerLoadChargers, startBareServer } from './bare-baseline.js';
import { benchArgsOrExit, DATABASE_OPTION } from './bench-args.js';
import { type BenchDatabase, type BenchStorage, withBenchDatabase } from './bench-database.js';
import { startBenchPlatform } from './bench-platform.js';
import { type LoadRound, type Request, runLoad, summarizeLoad } from './load-generator.js';
import { sampleProcess } from './process-sampler.js';

/**
 * Backlog upload: `POST /v1/device/telemetry/batch` with 500 records a request (an agent's outbox after an
 * outage), at full speed from many chargers (none over its own reporting limit), in rows stored per second.
 * Beside it, in alternating rounds, a bare node:https server that reads and parses the same bodies: the ceiling
 * of HTTPS and JSON alone on this machine. Every acknowledged row is checked to be stored.
 * Usage: npm run bench:batch-ingest [-- --devices 1000 --connections 16 --seconds 15 --rounds 5]
 */
export function measureBatchIngest(
  DEVICES = 1000,
  CONNECTIONS = 16,
  SECONDS = 15,
  ROUNDS = 5,
  storage: BenchStorage = {},
) {
  return withBenchDatabase(storage, (database) =>
    batchIngestOn(database, storage.keep === true, DEVICES, CONNECTIONS, SECONDS, ROUNDS),
  );
}

const ROWS = 500;
const TAIL =
  '","connector_id":1,"state":"charging","voltage":231.2,"current":31.9,"power":22.1,' +
  '"energy_delivered":12.345,"soc":57,"temperature":31.5}';

/**
 * Batches of `ROWS` records, round robin over the chargers, to the platform; one batch of the same size to the
 * bare server. Five days back: a backlog, every record new (the platform ignores exact repeats).
 */
function batchRequests(headers: Array<Record<string, string>>) {
  const devices = headers.map((auth) => ({ auth, n: 0 }));
  const base = Date.now() - 5 * 86_400_000;
  const body = (d: { n: number }) => {
    const parts: string[] = new Array(ROWS);
    for (let k = 0; k < ROWS; k++)
      parts[k] = `{"timestamp":"${new Date(base + d.n++ * 5000).toISOString()}${TAIL}`;
    return `{"records":[${parts.join(',')}]}`;
  };
  const counts = { sent: 0 };
  const platformRequest = (request: Request): Request => {
    const d = devices[counts.sent++ % devices.length]!;
    request.path = '/v1/device/telemetry/batch';
    request.headers = d.auth;
    request.body = body(d);
    return request;
  };
  const bareRequest: Request = {
    path: '/v1/device/telemetry/batch',
    headers: devices[0]!.auth,
    body: body({ n: 0 }),
  };
  return { counts, platformRequest, bareRequest };
}

async function batchIngestOn(
  database: BenchDatabase,
  keep: boolean,
  DEVICES: number,
  CONNECTIONS: number,
  SECONDS: number,
  ROUNDS: number,
) {
  const platform = await startBenchPlatform([], { database: database.choice, keep });
  let bare: BareServer | undefined;
  try {
    const requests = batchRequests(await registerLoadChargers(platform, 'BATCH', DEVICES));
    const { platformRequest, bareRequest } = requests;
    bare = await startBareServer(platform);
    const targets = {
      platform: { origin: platform.url.replace('localhost', '127.0.0.1'), pid: platform.pid },
      bare: { origin: bare.origin, pid: bare.pid },
    };
    const cpu = { platform: 0, bare: 0 };
    const round = async (which: keyof typeof targets, ms: number) => {
      const before = sampleProcess(targets[which].pid);
      const result = await runLoad({
        origin: targets[which].origin,
        connections: CONNECTIONS,
        durationMs: ms,
        requests: which === 'platform' ? platformRequest : bareRequest,
      });
      cpu[which] += sampleProcess(targets[which].pid).cpuSeconds - before.cpuSeconds;
      return result;
    };
    const warm = await round('platform', 2000);
    await round('bare', 2000);
    cpu.platform = 0;
    cpu.bare = 0;
    const rounds = { platform: [] as LoadRound[], bare: [] as LoadRound[] };
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? (['platform', 'bare'] as const) : (['bare', 'platform'] as const);
      for (const which of order) rounds[which].push(await round(which, (SECONDS * 1000) / ROUNDS));
    }
    const onPlatform = summarizeLoad(rounds.platform);
    const onBare = summarizeLoad(rounds.bare);
    const stored = await database.telemetrySamples(platform.dataDir);
    const acknowledged =
      [warm, ...rounds.platform].reduce((n, r) => n + (r.statusCounts['200'] ?? 0), 0) * ROWS;
    const seconds = (which: keyof typeof rounds) => rounds[which].reduce((s, r) => s + r.seconds, 0);
    return {
      machine: `${process.platform} ${process.arch}, node ${process.version}`,
      backend: database.backend,
      devices: DEVICES,
      connections: CONNECTIONS,
      rows_per_request: ROWS,
      platform: { ...onPlatform, rows_per_s: onPlatform.rps * ROWS },
      bare_https: { ...onBare, rows_per_s: onBare.rps * ROWS },
      ratio: Math.round((onPlatform.rps / onBare.rps) * 1000) / 1000,
      cpu_cores: {
        platform_server: Math.round((cpu.platform / seconds('platform')) * 100) / 100,
        bare_server: Math.round((cpu.bare / seconds('bare')) * 100) / 100,
      },
      sent_rows: requests.counts.sent * ROWS,
      acknowledged_rows: acknowledged,
      stored_rows: stored,
      all_stored: acknowledged <= stored && stored <= requests.counts.sent * ROWS,
    };
  } finally {
    bare?.stop();
    await platform.stop();
    if (keep) process.stderr.write(`data directory kept: ${platform.dataDir}\n`);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values, texts, flags } = benchArgsOrExit({
    usage: `Usage: npm run bench:batch-ingest [-- --devices 1000 --connections 16 --seconds 15 --rounds 5]
  500-record telemetry batches at full speed, in rows per second, beside a bare node:https server`,
    options: {
      devices: {
        default: 1000,
        integer: true,
        help: 'chargers uploading (none over its own reporting limit)',
      },
      connections: { default: 16, integer: true, help: 'keep-alive connections of the load generator' },
      seconds: { default: 15, help: 'seconds of load for each side, split over the rounds' },
      rounds: { default: 5, integer: true, help: 'alternating rounds' },
    },
    texts: { database: DATABASE_OPTION },
    flags: { keep: { help: 'keep the data directory (and the PostgreSQL database) to look at afterwards' } },
  });
  const { devices, connections, seconds, rounds } = values;
  const storage = { database: texts.database, keep: flags.keep };
  const figures = await measureBatchIngest(devices, connections, seconds, rounds, storage);
  process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
}
