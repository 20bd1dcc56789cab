#!/usr/bin/env node
import '../supported-node.js';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import pg from 'pg';
import { toTelemetryRecord } from '../../agent/core/telemetry.js';
import {
  envelopeOf,
  TELEMETRY_BATCH_MAX,
  TelemetryBatchAccepted,
  type TelemetryRecord,
} from '../../shared/index.js';
import { createSimulatedHal } from '../simulated-hal.js';
import { benchArgsOrExit, DATABASE_OPTION } from './bench-args.js';
import { type BenchDatabase, createBenchDatabase } from './bench-database.js';
import { startBenchPlatform } from './bench-platform.js';
import {
  type Charger,
  expectOk,
  type Http,
  inPool,
  registerCharger,
  sendWithin,
  throttle,
} from './data-volume-http.js';
import { TELEMETRY_GAP_MS } from './data-volume-load.js';

/**
 * Telemetry on disk (DESIGN.md §21): days of two-connector chargers at 5 s with the simulated HAL's values
 * (vehicles arriving and leaving, sessions tapering, voltage noise, contacts warming), as the agent rounds them,
 * loaded through the charger API into a real `serve`. The telemetry's bytes are read from the database itself
 * (SQLite's `dbstat`, PostgreSQL's relation sizes; tables with their indexes) twice: just after the load, while
 * every sample is a row of the recent table — the baseline, how every sample was stored before §21 — and once
 * the platform's own compaction pass has moved them into blocks. Goal: ≤ 400 KB per charger-day after.
 * Usage: npm run bench:telemetry-disk [-- --chargers 10 --days 1 --database postgres://…]
 */
const STEP_MS = 5_000;
const DAY_MS = 86_400_000;
const GOAL_BYTES_PER_CHARGER_DAY = 400_000;
const log = (line: string) => process.stderr.write(`${line}\n`);

interface Options {
  chargers: number;
  days: number;
  database?: string;
}

export interface TelemetryDiskFigures {
  backend: 'sqlite' | 'postgres';
  chargers: number;
  days: number;
  samples: number;
  /** Bytes of the recent table with its indexes, every sample in it (before compaction). */
  before: { bytes: number; bytes_per_charger_day: number; bytes_per_sample: number };
  /** Bytes of the recent table and the blocks, with their indexes, once compacted. */
  after: {
    bytes: number;
    bytes_per_charger_day: number;
    bytes_per_sample: number;
    recent_rows: number;
    blocks: number;
    compaction_seconds: number;
  };
  ratio: number;
  goal_met: boolean;
}

/** One charger's telemetry from `startMs`, `steps` samples a connector, as its agent would send it. */
async function* chargerTelemetry(
  seed: number,
  startMs: number,
  steps: number,
): AsyncGenerator<TelemetryRecord[]> {
  let t = startMs;
  const hal = createSimulatedHal({ connectors: 2, seed, now: () => t, autoStartCharging: true });
  const sessionStart = new Map<number, number>();
  for (let i = 0; i < steps; i++) {
    hal.tick(STEP_MS);
    t += STEP_MS;
    const batch: TelemetryRecord[] = [];
    // Never started: readings do not follow the wall clock, only `tick`.
    for (const reading of await hal.readConnectors()) {
      if (!reading.vehiclePresent) sessionStart.delete(reading.connectorId);
      else if (!sessionStart.has(reading.connectorId))
        sessionStart.set(reading.connectorId, reading.energyKwh);
      const delivered = reading.energyKwh - (sessionStart.get(reading.connectorId) ?? reading.energyKwh);
      const record = toTelemetryRecord(reading, t, delivered);
      if (record) batch.push(record);
    }
    yield batch;
  }
}

/** The telemetry's bytes (recent table, blocks; each with its indexes) and counts, read from the database. */
async function telemetryBytes(database: BenchDatabase, dataDir: string) {
  if (database.backend === 'sqlite') {
    const db = new Database(join(dataDir, 'platform.sqlite'), { readonly: true });
    try {
      const bytesOf = (table: string) =>
        (
          db
            .prepare(
              `SELECT COALESCE(SUM(pgsize), 0) AS n FROM dbstat
               WHERE name IN (SELECT name FROM sqlite_schema WHERE tbl_name = ?)`,
            )
            .get(table) as { n: number }
        ).n;
      const count = (table: string) =>
        (db.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;
      return {
        recent: bytesOf('telemetry'),
        blocks: bytesOf('telemetry_blocks'),
        recentRows: count('telemetry'),
        blockRows: count('telemetry_blocks'),
      };
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ connectionString: database.choice });
  await client.connect();
  try {
    const one = async (sql: string) => Number((await client.query<{ n: string }>(sql)).rows[0]?.n ?? 0);
    return {
      recent: await one(
        `SELECT COALESCE(SUM(pg_total_relation_size(inhrelid)), 0) AS n FROM pg_inherits
         WHERE inhparent = 'telemetry'::regclass`,
      ),
      blocks: await one(`SELECT pg_total_relation_size('telemetry_blocks') AS n`),
      recentRows: await one('SELECT count(*) AS n FROM telemetry'),
      blockRows: await one('SELECT count(*) AS n FROM telemetry_blocks'),
    };
  } finally {
    await client.end();
  }
}

async function upload(http: Http, chargers: readonly Charger[], startMs: number, steps: number) {
  const schema = envelopeOf(TelemetryBatchAccepted);
  let accepted = 0;
  await inPool(chargers, chargers.length, async (c, k) => {
    const budget = throttle(TELEMETRY_GAP_MS);
    let records: TelemetryRecord[] = [];
    const send = async () => {
      const answer = await sendWithin(budget, http, 'POST', '/v1/device/telemetry/batch', {
        token: c.token,
        body: JSON.stringify({ records }),
      });
      accepted += expectOk('telemetry batch', answer, schema).data.accepted;
      records = [];
    };
    for await (const batch of chargerTelemetry(k + 1, startMs, steps)) {
      records.push(...batch);
      if (records.length >= TELEMETRY_BATCH_MAX - 1) await send();
    }
    if (records.length > 0) await send();
  });
  return accepted;
}

export async function measureTelemetryDisk(o: Options): Promise<TelemetryDiskFigures> {
  const database = await createBenchDatabase(o.database);
  const p = await startBenchPlatform([], { database: database.choice });
  try {
    const http: Http = { origin: p.url, dispatcher: p.dispatcher };
    const chargers: Charger[] = [];
    await inPool(
      Array.from({ length: o.chargers }, (_, i) => i),
      8,
      async (i) => {
        chargers[i] = await registerCharger(http, `DISK-${i}`);
      },
    );
    const steps = Math.round((o.days * DAY_MS) / STEP_MS);
    // Ending at a UTC midnight at least two hours ago: every sample may be compacted, and on PostgreSQL every
    // day partition they fill is one compaction may empty.
    const endMs = Math.floor((Date.now() - 2 * 3_600_000) / DAY_MS) * DAY_MS;
    log(`telemetry: ${o.chargers} chargers × 2 connectors × ${steps} samples of the simulated HAL`);
    const samples = await upload(http, chargers, endMs - steps * STEP_MS, steps);
    const before = await telemetryBytes(database, p.dataDir);
    if (before.blockRows > 0) log('note: the compaction pass had started before the baseline was read');
    log(
      `before compaction: ${before.recent} B in ${before.recentRows} rows; waiting for the platform's pass`,
    );
    const t0 = performance.now();
    let after = before;
    for (;;) {
      await sleep(5_000);
      after = await telemetryBytes(database, p.dataDir);
      if (after.recentRows <= 1) break;
      if (performance.now() - t0 > 15 * 60_000)
        throw new Error(`compaction did not finish: ${after.recentRows} rows left`);
    }
    const chargerDays = o.chargers * o.days;
    const figures = (bytes: number) => ({
      bytes,
      bytes_per_charger_day: Math.round(bytes / chargerDays),
      bytes_per_sample: Math.round((bytes / samples) * 100) / 100,
    });
    const afterBytes = after.recent + after.blocks;
    return {
      backend: database.backend,
      chargers: o.chargers,
      days: o.days,
      samples,
      before: figures(before.recent),
      after: {
        ...figures(afterBytes),
        recent_rows: after.recentRows,
        blocks: after.blockRows,
        compaction_seconds: Math.round((performance.now() - t0) / 1000),
      },
      ratio: Math.round((afterBytes / before.recent) * 1000) / 1000,
      goal_met: afterBytes / chargerDays <= GOAL_BYTES_PER_CHARGER_DAY,
    };
  } finally {
    await p.stop();
    await database.release(false);
  }
}

export function telemetryDiskTable(f: TelemetryDiskFigures): string {
  const kb = (b: number) => `${(b / 1000).toFixed(1)} KB`;
  return [
    `Backend: ${f.backend}; ${f.chargers} chargers × ${f.days} d × 2 connectors at 5 s: ${f.samples} samples`,
    `before compaction (every sample a row): ${kb(f.before.bytes_per_charger_day)} per charger-day, ${f.before.bytes_per_sample} B a sample`,
    `after compaction (blocks + recent):     ${kb(f.after.bytes_per_charger_day)} per charger-day, ${f.after.bytes_per_sample} B a sample (${f.after.blocks} blocks, ${f.after.recent_rows} recent rows, ${f.after.compaction_seconds} s)`,
    `ratio after/before: ${f.ratio}; goal ≤ ${kb(GOAL_BYTES_PER_CHARGER_DAY)} per charger-day: ${f.goal_met ? 'met' : 'missed'}`,
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values, texts } = benchArgsOrExit({
    usage: `Usage: npm run bench:telemetry-disk [-- options]
  the simulated HAL's telemetry loaded through the charger API; its bytes before and after compaction.`,
    options: {
      chargers: { default: 10, integer: true, help: 'two-connector chargers' },
      days: { default: 1, help: 'days of 5-s telemetry each' },
    },
    texts: { json: { value: 'FILE', help: 'also write the figures to FILE' }, database: DATABASE_OPTION },
  });
  const figures = await measureTelemetryDisk({
    chargers: values.chargers,
    days: values.days,
    database: texts.database,
  }).catch((err: unknown) => {
    log(`error: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
  const json = `${JSON.stringify(figures, null, 2)}\n`;
  process.stdout.write(`${telemetryDiskTable(figures)}\n\n${json}`);
  if (texts.json) await writeFile(texts.json, json);
}
