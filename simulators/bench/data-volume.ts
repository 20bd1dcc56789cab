#!/usr/bin/env node
import '../supported-node.js';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import * as z from 'zod';
import { TELEMETRY_BATCH_MAX } from '../../shared/index.js';
import { benchArgsOrExit, DATABASE_OPTION } from './bench-args.js';
import {
  type BenchDatabase,
  createBenchDatabase,
  type DatabaseBytes,
  existingBenchDatabase,
} from './bench-database.js';
import { type BenchPlatform, startBenchPlatform } from './bench-platform.js';
import { type Charger, type Http, inPool, registerCharger } from './data-volume-http.js';
import {
  recordsOfCharger,
  STEP_MS,
  TELEMETRY_GAP_MS,
  type UploadFigures,
  uploadRecords,
  uploadTelemetry,
} from './data-volume-load.js';
import { measureReads, type ReadTarget } from './data-volume-reads.js';
import { startCpuMeter } from './process-sampler.js';

/**
 * Data volume: days of 5-s telemetry of a site's two-connector chargers and a year of charging records over
 * many chargers, loaded through the charger API; then each operator read (energy of the site and of one
 * charger, charging-record pages, the devices list) timed end to end, `--repeats` times, while probe chargers
 * heart-beat every 20 ms: the worst heartbeat under way during each read. Goal: every read < 100 ms, no
 * heartbeat > 50 ms. Also the load rates and the database's bytes per charger-day of telemetry.
 * `--reuse DIR` serves a directory loaded before with `--keep` (fast iteration on the reads); figures to
 * publish come from a fresh load. `--database URL` runs it on a throw-away PostgreSQL database on that server.
 * Usage: npm run bench:data-volume [-- --days 7 --site-chargers 20 --records 2000000 --record-chargers 1000]
 */
export interface DataVolumeOptions {
  days: number;
  siteChargers: number;
  records: number;
  recordChargers: number;
  repeats: number;
  /** Load into this directory (missing or empty) instead of a temporary one. */
  dataDir?: string;
  keep?: boolean;
  /** A directory loaded earlier (kept with `keep`): serve it as it is, load nothing. */
  reuse?: string;
  /** A PostgreSQL server to load into a new database on (SQLite without it). */
  database?: string;
}

const DAY = 86_400_000;
const META_FILE = 'data-volume.json';
const SITE_SIZE = 20;
const PROBE_CHARGERS = 10;
const READ_GOAL_MS = 100;
const HEARTBEAT_GOAL_MS = 50;
const log = (line: string) => process.stderr.write(`${line}\n`);
const round = (x: number) => Math.round(x * 100) / 100;

/**
 * `bytes_per_charger_day`: the whole database (`total`) over the charger-days of telemetry, on both backends;
 * on PostgreSQL also the telemetry partitions alone (the database's own catalogs are some 7 MiB).
 */
type DiskFigures = DatabaseBytes & {
  bytes_per_charger_day: number;
  telemetry_bytes_per_charger_day?: number;
};

function diskFigures(bytes: DatabaseBytes, chargerDays: number): DiskFigures {
  const per = (n: number) => Math.round(n / chargerDays);
  const telemetry = 'telemetry' in bytes ? { telemetry_bytes_per_charger_day: per(bytes.telemetry) } : {};
  return { ...bytes, bytes_per_charger_day: per(bytes.total), ...telemetry };
}

/** What a load leaves for the reads; kept in the data directory (META_FILE) for `--reuse`. */
interface Loaded extends ReadTarget {
  /** The platform's `--database`: `sqlite`, or the PostgreSQL URL loaded into (absent in older loads: SQLite). */
  database?: string;
  end_ms: number;
  days: number;
  site_chargers: number;
  records: number;
  record_chargers: number;
  operator_id: string;
  site_id: string;
  charger_id: string;
  charger_records: number;
  devices_total: number;
  probes: Array<{ device_id: string; secret: string }>;
  load: {
    seconds: number;
    registration_seconds: number;
    /** `paced_cap_rows_per_s`: the most the chargers' own pacing lets through (the rate limit's bound). */
    telemetry: UploadFigures & Cpu & { rows_per_s: number; paced_cap_rows_per_s: number };
    records: UploadFigures & Cpu & { records_per_s: number };
    /** Counted in the database after the load (the SQLite file read-only; PostgreSQL by `count(*)`). */
    stored: { telemetry_rows: number; charging_records: number; all_stored: boolean };
    disk_after_telemetry: DiskFigures;
    disk_after_load: DiskFigures;
  };
}

/** CPU cores used meanwhile by the platform, this bench and anything else (two cores: all of it shared). */
interface Cpu {
  cpu_cores: { platform: number; bench: number; others: number };
}

async function withCpu<T extends object>(pid: number, work: () => Promise<T>): Promise<T & Cpu> {
  const meter = startCpuMeter(pid);
  const result = await work();
  const { target, self, others } = meter();
  return { ...result, cpu_cores: { platform: target, bench: self, others } };
}

const Created = { operator: z.object({ operator_id: z.string() }), site: z.object({ site_id: z.string() }) };

/**
 * An operator with a site of `siteChargers` chargers and more sites of `SITE_SIZE` for the rest, and probe
 * chargers in no site (they add nothing to what the operator reads).
 */
async function registerInSites(p: BenchPlatform, http: Http, o: DataVolumeOptions) {
  const operator = Created.operator.parse(await p.admin(['operators', 'create', '--name', 'Data Volume']));
  const newSite = async (name: string) =>
    Created.site.parse(await p.admin(['sites', 'create', '--operator', operator.operator_id, '--name', name]))
      .site_id;
  const siteId = await newSite('Data volume site');
  const total = Math.max(o.siteChargers, o.recordChargers);
  const otherSites: string[] = [];
  const otherNames = Array.from({ length: Math.ceil((total - o.siteChargers) / SITE_SIZE) }, (_, i) => i);
  // The admin CLI is a process per command: two at a time on a two-core machine.
  await inPool(otherNames, 2, async (i) => {
    otherSites[i] = await newSite(`Data volume site ${i + 2}`);
  });
  log(`registering ${total} chargers and ${PROBE_CHARGERS} probe chargers`);
  const chargers: Charger[] = [];
  const probes: Charger[] = [];
  await inPool(
    Array.from({ length: total + PROBE_CHARGERS }, (_, i) => i),
    8,
    async (i) => {
      if (i < total) chargers[i] = await registerCharger(http, `DV-${i}`);
      else probes[i - total] = await registerCharger(http, `DV-PROBE-${i - total}`);
    },
  );
  // Probes stay in no site: they add nothing to what the operator reads.
  await inPool(chargers, 2, (c, i) =>
    p.assign(
      c.deviceId,
      i < o.siteChargers ? siteId : otherSites[Math.floor((i - o.siteChargers) / SITE_SIZE)]!,
    ),
  );
  return { operator, siteId, chargers, probes, total };
}

/**
 * Waits for the platform's compaction pass (DESIGN.md §21) to have moved the load's samples older than about
 * two hours into blocks, as a platform that has run for days holds them, before anything is read.
 */
async function compacted(database: BenchDatabase, dataDir: string, siteChargers: number): Promise<void> {
  // Two connectors at 5 s, the last two to three hours of them.
  const recentAtMost = siteChargers * 2 * 720 * 3;
  const t0 = performance.now();
  for (;;) {
    const rows = await database.count(dataDir, 'telemetry');
    if (rows <= recentAtMost) return;
    if (performance.now() - t0 > 20 * 60_000)
      throw new Error(`compaction did not finish: ${rows} recent rows`);
    log(`waiting for the compaction pass: ${rows} recent rows`);
    await sleep(10_000);
  }
}

async function load(
  p: BenchPlatform,
  database: BenchDatabase,
  http: Http,
  o: DataVolumeOptions,
): Promise<Loaded> {
  const t0 = performance.now();
  const { operator, siteId, chargers, probes, total } = await registerInSites(p, http, o);
  const registrationSeconds = (performance.now() - t0) / 1000;

  const steps = Math.round((o.days * DAY) / STEP_MS);
  const endMs = Math.floor(Date.now() / STEP_MS) * STEP_MS;
  log(`telemetry: ${o.siteChargers} chargers × 2 connectors × ${steps} samples, 500 a request`);
  const siteChargers = chargers.slice(0, o.siteChargers);
  const telemetry = await withCpu(p.pid, () =>
    uploadTelemetry(http, siteChargers, endMs - steps * STEP_MS, steps, 1),
  );
  const chargerDays = o.siteChargers * o.days;
  const disk = async (): Promise<DiskFigures> => {
    // The platform's background work settles first: its rollup pass (both backends) and, on SQLite, the
    // checkpoint that trims the WAL.
    await sleep(5_000);
    return diskFigures(await database.bytes(p.dataDir), chargerDays);
  };
  const diskAfterTelemetry = await disk();
  log(`charging records: ${o.records} over 365 days on ${o.recordChargers} chargers, 100 a request`);
  const recordChargers = chargers.slice(0, o.recordChargers);
  const records = await withCpu(p.pid, () =>
    uploadRecords(http, recordChargers, o.records, endMs - 365 * DAY, endMs, 2, 16),
  );
  const diskAfterLoad = await disk();

  await compacted(database, p.dataDir, o.siteChargers);
  const stored = {
    telemetry_rows: await database.telemetrySamples(p.dataDir),
    charging_records: await database.count(p.dataDir, 'charging_records'),
  };
  const allStored =
    stored.telemetry_rows === telemetry.sent &&
    telemetry.accepted === telemetry.sent &&
    stored.charging_records === records.sent &&
    records.accepted === records.sent;
  if (!allStored) log(`NOT ALL STORED: ${JSON.stringify({ stored, telemetry, records })}`);
  return {
    database: database.choice,
    end_ms: endMs,
    days: o.days,
    site_chargers: o.siteChargers,
    records: o.records,
    record_chargers: o.recordChargers,
    operator_id: operator.operator_id,
    site_id: siteId,
    charger_id: chargers[0]!.deviceId,
    charger_records: recordsOfCharger(o.records, o.recordChargers, 0),
    devices_total: total,
    probes: probes.map((c) => ({ device_id: c.deviceId, secret: c.secret })),
    load: {
      seconds: round((performance.now() - t0) / 1000),
      registration_seconds: round(registrationSeconds),
      telemetry: {
        ...telemetry,
        seconds: round(telemetry.seconds),
        rows_per_s: Math.round(telemetry.sent / telemetry.seconds),
        paced_cap_rows_per_s: Math.round((o.siteChargers * TELEMETRY_BATCH_MAX * 1000) / TELEMETRY_GAP_MS),
      },
      records: {
        ...records,
        seconds: round(records.seconds),
        records_per_s: Math.round(records.sent / records.seconds),
      },
      stored: { ...stored, all_stored: allStored },
      disk_after_telemetry: diskAfterTelemetry,
      disk_after_load: diskAfterLoad,
    },
  };
}

export async function measureDataVolume(o: DataVolumeOptions) {
  let loaded: Loaded | undefined;
  if (o.reuse) loaded = JSON.parse(await readFile(join(o.reuse, META_FILE), 'utf8')) as Loaded;
  else if (o.dataDir && (await readdir(o.dataDir).catch(() => [])).length > 0)
    throw new Error(`--data-dir ${o.dataDir} is not empty: give a new directory (or --reuse a loaded one)`);
  const keep = o.reuse !== undefined || o.keep === true;
  // A reused load is served from the database it was loaded into (remembered in META_FILE), never dropped.
  const database = loaded
    ? existingBenchDatabase(loaded.database ?? 'sqlite')
    : await createBenchDatabase(o.database);
  try {
    return await measureOn(database, o, keep, loaded);
  } finally {
    await database.release(keep);
    if (keep && !o.reuse && database.describe) log(`database kept: ${database.describe}`);
  }
}

async function measureOn(database: BenchDatabase, o: DataVolumeOptions, keep: boolean, reused?: Loaded) {
  let loaded = reused;
  const p = await startBenchPlatform([], { dataDir: o.reuse ?? o.dataDir, keep, database: database.choice });
  try {
    if (!loaded) {
      loaded = await load(p, database, { origin: p.url, dispatcher: p.dispatcher }, o);
      await writeFile(join(p.dataDir, META_FILE), `${JSON.stringify(loaded, null, 2)}\n`);
    }
    const diskNow = await database.bytes(p.dataDir);
    const reads = await measureReads(p, loaded, o.repeats);
    const { probes: _, load: loadFigures, database: _choice, ...data } = loaded;
    return {
      machine: `${process.platform} ${process.arch}, node ${process.version}`,
      backend: database.backend,
      /** The PostgreSQL database, when kept (`--keep`, `--reuse`): without its password. */
      database: keep ? database.describe : null,
      data_dir: keep ? p.dataDir : null,
      /** True when this run read a directory loaded by an earlier run: its load figures are that run's. */
      reused: o.reuse !== undefined,
      data: { ...data, charger_days: loaded.site_chargers * loaded.days },
      load: loadFigures,
      disk_at_reads: diskNow,
      ...reads,
      goals: {
        every_read_under_ms: READ_GOAL_MS,
        no_heartbeat_over_ms: HEARTBEAT_GOAL_MS,
        reads_met: reads.reads.every((r) => r.ms.max < READ_GOAL_MS),
        heartbeats_met: reads.reads.every((r) => (r.worst_heartbeat_ms.max ?? 0) <= HEARTBEAT_GOAL_MS),
      },
    };
  } finally {
    await p.stop();
    if (keep && !o.reuse) log(`data kept in ${p.dataDir}: read it again with --reuse ${p.dataDir}`);
  }
}

export type DataVolumeFigures = Awaited<ReturnType<typeof measureDataVolume>>;

/** PostgreSQL's telemetry partitions alone, in the table (absent on SQLite). */
const telemetryAlone = (d: DiskFigures) =>
  d.telemetry_bytes_per_charger_day === undefined
    ? ''
    : ` (telemetry partitions alone: ${d.telemetry_bytes_per_charger_day} B)`;

export function dataVolumeTable(f: DataVolumeFigures): string {
  const l = f.load;
  const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;
  const lines = [
    `Backend: ${f.backend}${f.database ? ` (${f.database})` : ''}`,
    `Data: ${f.data.site_chargers} site chargers × ${f.data.days} d of 5-s telemetry (${l.telemetry.sent} rows), ${f.data.records} charging records on ${f.data.record_chargers} chargers${f.reused ? ' (reused load)' : ''}`,
    `Load: telemetry ${l.telemetry.rows_per_s} rows/s (${l.telemetry.requests} batches, ${l.telemetry.seconds} s, ${l.telemetry.refused} × 429, pacing allows ${l.telemetry.paced_cap_rows_per_s}/s; cores: platform ${l.telemetry.cpu_cores.platform}, bench ${l.telemetry.cpu_cores.bench}, others ${l.telemetry.cpu_cores.others})`,
    `      records ${l.records.records_per_s}/s (${l.records.requests} requests, ${l.records.seconds} s, ${l.records.refused} × 429; cores: platform ${l.records.cpu_cores.platform}, bench ${l.records.cpu_cores.bench}, others ${l.records.cpu_cores.others}); stored: ${l.stored.all_stored ? 'all' : 'NOT ALL'}, in ${l.registration_seconds} s of set-up and ${l.seconds} s in all`,
    `Disk after telemetry: ${mib(l.disk_after_telemetry.total)}, ${l.disk_after_telemetry.bytes_per_charger_day} B per charger-day${telemetryAlone(l.disk_after_telemetry)}; after load (with records): ${mib(l.disk_after_load.total)}, ${l.disk_after_load.bytes_per_charger_day} B per charger-day`,
    `Heartbeat probe: ${f.heartbeat_probe.chargers} chargers, one every ${f.heartbeat_probe.every_ms} ms; idle p50 ${f.heartbeat_probe.idle_ms.p50} ms, p99 ${f.heartbeat_probe.idle_ms.p99} ms, max ${f.heartbeat_probe.idle_ms.max} ms`,
    `Cores during the reads: platform ${f.cpu_cores_during_reads.platform}, bench ${f.cpu_cores_during_reads.bench}, others ${f.cpu_cores_during_reads.others}; bench event-loop delay max ${f.bench_event_loop_delay_ms.max} ms`,
    '',
    `${'read'.padEnd(24)}${'p50 ms'.padStart(10)}${'max ms'.padStart(10)}${'worst heartbeat ms'.padStart(20)}  answer`,
    ...f.reads.map(
      (r) =>
        `${r.name.padEnd(24)}${String(r.ms.p50).padStart(10)}${String(r.ms.max).padStart(10)}${String(r.worst_heartbeat_ms.max ?? '–').padStart(20)}  ${r.answer}`,
    ),
    '',
    `Goal every read < ${READ_GOAL_MS} ms: ${f.goals.reads_met ? 'met' : 'missed'}; no heartbeat > ${HEARTBEAT_GOAL_MS} ms: ${f.goals.heartbeats_met ? 'met' : 'missed'}`,
  ];
  return `${lines.join('\n')}\n`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values, given, texts, flags } = benchArgsOrExit({
    usage: `Usage: npm run bench:data-volume [-- options]
  days of 5-s telemetry of a site and a year of charging records loaded through the charger API, then each
  operator read timed with the worst charger heartbeat during it (goal: reads < 100 ms, heartbeats < 50 ms).
  --reuse is for iterating on the reads: figures to publish come from a fresh load.`,
    options: {
      days: { default: 7, help: 'days of telemetry (a fraction for a smoke run)' },
      'site-chargers': { default: 20, integer: true, help: 'chargers of the site (two connectors each)' },
      records: { default: 2_000_000, integer: true, help: 'charging records over the last 365 days' },
      'record-chargers': { default: 1000, integer: true, help: 'chargers the records are spread over' },
      repeats: { default: 5, integer: true, help: 'times each read is made' },
    },
    texts: {
      'data-dir': { value: 'DIR', help: 'load into DIR (missing or empty) instead of a temporary directory' },
      reuse: { value: 'DIR', help: 'load nothing: read DIR, loaded before with --keep' },
      json: { value: 'FILE', help: 'also write the figures to FILE' },
      database: DATABASE_OPTION,
    },
    flags: { keep: { help: 'keep the loaded data directory and PostgreSQL database (for --reuse)' } },
  });
  if (texts.reuse && (texts['data-dir'] || flags.keep || texts.database)) {
    process.stderr.write(
      'error: --reuse serves a loaded directory as it is, on the database it was loaded into: no --data-dir, --keep or --database with it\n',
    );
    process.exit(2);
  }
  const loadOptions = [...given].filter((name) => name !== 'repeats');
  if (texts.reuse && loadOptions.length > 0)
    log(`--reuse: ${loadOptions.map((n) => `--${n}`).join(', ')} ignored (the data is as it was loaded)`);
  const figures = await measureDataVolume({
    days: values.days,
    siteChargers: values['site-chargers'],
    records: values.records,
    recordChargers: values['record-chargers'],
    repeats: values.repeats,
    dataDir: texts['data-dir'],
    keep: flags.keep,
    reuse: texts.reuse,
    database: texts.database,
  }).catch((err: unknown) => {
    log(`error: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
  const json = `${JSON.stringify(figures, null, 2)}\n`;
  process.stdout.write(`${dataVolumeTable(figures)}\n${json}`);
  if (texts.json) await writeFile(texts.json, json);
}
