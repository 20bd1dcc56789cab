import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';
import type { TelemetryRecord } from '../../shared/index.js';

/**
 * Telemetry, the hottest write by far, lives in its own SQLite file, written by a worker thread of its own:
 *
 * - The event loop only hands records over (one message per turn) and settles each request when the worker
 *   says its records are committed: durable before acknowledged, as before, but the inserts, the commits and
 *   the WAL checkpoints (one fsync each) run beside the event loop, on the other core.
 * - A file of its own means a lock of its own: the worker never holds up a heartbeat, a command or an admin
 *   command writing the main database, and they never hold it up.
 * - Each connector's live state (its newest record) is kept beside the telemetry, in the same transaction.
 * - The worker commits at most once per `commitIntervalMs` under load, so that a busy platform makes fewer,
 *   larger commits; a lone write commits at once. A batch that fails is retried request by request, so one
 *   bad request does not fail its neighbours.
 *
 * Reads (connector state for device views, samples for energy) use a connection of the event loop's own; WAL
 * lets them run while the worker writes.
 */
export const TELEMETRY_DATABASE_FILE = 'telemetry.sqlite';

/** The schema, for this file (`prefix` ''), or for it attached to another connection (`'tm.'`). */
export function telemetrySchema(prefix = ''): string {
  return `
  CREATE TABLE IF NOT EXISTS ${prefix}telemetry (
    id INTEGER PRIMARY KEY,
    device_id TEXT NOT NULL,
    connector_id INTEGER NOT NULL,
    ts_ms INTEGER NOT NULL,
    state TEXT NOT NULL,
    voltage REAL,
    current REAL,
    power REAL,
    energy_delivered REAL,
    soc INTEGER,
    temperature REAL,
    phase_details TEXT,
    received_ms INTEGER NOT NULL
  );
  -- Replayed uploads (an agent's outbox after an outage) must not duplicate anything; also the index of
  -- time-range reads (energy): device, then time.
  CREATE UNIQUE INDEX IF NOT EXISTS ${prefix}telemetry_unique ON telemetry(device_id, ts_ms, connector_id);
  CREATE TABLE IF NOT EXISTS ${prefix}connector_state (
    device_id TEXT NOT NULL,
    connector_id INTEGER NOT NULL,
    state TEXT NOT NULL,
    power REAL,
    voltage REAL,
    current REAL,
    energy_delivered REAL,
    soc INTEGER,
    temperature REAL,
    last_telemetry_ms INTEGER NOT NULL,
    PRIMARY KEY (device_id, connector_id)
  ) WITHOUT ROWID;
  `;
}

/** A connector's live state: the values of its newest stored record. */
export interface ConnectorStateRow {
  device_id: string;
  connector_id: number;
  state: string;
  power: number | null;
  voltage: number | null;
  current: number | null;
  energy_delivered: number | null;
  soc: number | null;
  temperature: number | null;
  last_telemetry_ms: number;
}

export interface TelemetrySample {
  connector_id: number;
  ts_ms: number;
  power: number | null;
}

export interface TelemetryDbOptions {
  /** Commits at most this often under load, ms. */
  commitIntervalMs?: number;
  /** Told when the writer thread failed (it is started again for the next write). */
  onWriterFailure?: (message: string) => void;
}

export interface TelemetryDb {
  /** Stores the records (exact repeats ignored) once committed; resolves with how many were new. */
  record(deviceId: string, records: readonly TelemetryRecord[], receivedMs: number): Promise<number>;
  connectorStates(deviceIds: readonly string[]): ConnectorStateRow[];
  connectorState(deviceId: string, connectorId: number): ConnectorStateRow | undefined;
  /** A device's samples in [fromMs, toMs), in time order. */
  samples(deviceId: string, fromMs: number, toMs: number): Iterable<TelemetrySample>;
  close(): Promise<void>;
}

interface WriteMessage {
  batch: number;
  writes: Array<{ deviceId: string; receivedMs: number; records: readonly TelemetryRecord[] }>;
}
type WriteResult = { count: number } | { error: { message: string; code?: string } };
interface ResultMessage {
  batch: number;
  results: WriteResult[];
}

interface WriterInput {
  driverPath: string;
  path: string;
  schema: string;
  commitIntervalMs: number;
}

/**
 * The writer thread's whole program, evaluated in the worker from its source text (so that it runs from the
 * TypeScript sources in tests as from the build): it may use only its arguments.
 */
function telemetryWriter(input: WriterInput, load: (id: string) => unknown): void {
  const Driver = load(input.driverPath) as typeof Database;
  const { parentPort } = load('node:worker_threads') as typeof import('node:worker_threads');
  if (!parentPort) return;
  const port = parentPort;
  const db = new Driver(input.path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 5000');
  db.pragma('temp_store = MEMORY');
  db.exec(input.schema);
  const insert = db.prepare(
    `INSERT OR IGNORE INTO telemetry (device_id, connector_id, ts_ms, state, voltage, current, power,
       energy_delivered, soc, temperature, phase_details, received_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const upsert = db.prepare(
    `INSERT INTO connector_state (device_id, connector_id, state, power, voltage, current, energy_delivered, soc,
       temperature, last_telemetry_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (device_id, connector_id) DO UPDATE SET state = excluded.state, power = excluded.power,
       voltage = excluded.voltage, current = excluded.current, energy_delivered = excluded.energy_delivered,
       soc = excluded.soc, temperature = excluded.temperature, last_telemetry_ms = excluded.last_telemetry_ms
     WHERE connector_state.last_telemetry_ms <= excluded.last_telemetry_ms`,
  );
  type Write = WriteMessage['writes'][number];
  type Pending = { batch: number; writes: Write[] };
  const value = (v: number | undefined) => (v === undefined ? null : v);

  /** Inserts `writes` in the open transaction; each connector's state from its newest new record. */
  const apply = (writes: readonly Write[]): number[] => {
    const newest = new Map<string, unknown[]>();
    const counts = writes.map((w) => {
      let n = 0;
      for (const t of w.records) {
        const ts = Date.parse(t.timestamp);
        const row = [
          w.deviceId,
          t.connector_id,
          ts,
          t.state,
          value(t.voltage),
          value(t.current),
          value(t.power),
          value(t.energy_delivered),
          value(t.soc),
          value(t.temperature),
        ];
        const phases = t.phase_details ? JSON.stringify(t.phase_details) : null;
        if (insert.run(...row, phases, w.receivedMs).changes !== 1) continue;
        n++;
        const key = `${w.deviceId}\u0000${t.connector_id}`;
        const seen = newest.get(key);
        if (!seen || (seen[2] as number) <= ts) newest.set(key, row);
      }
      return n;
    });
    for (const row of newest.values()) {
      upsert.run(row[0], row[1], row[3], row[6], row[4], row[5], row[7], row[8], row[9], row[2]);
    }
    return counts;
  };
  const failure = (err: unknown): WriteResult => ({
    error: { message: (err as Error).message, code: (err as { code?: string }).code },
  });

  let queue: Pending[] = [];
  let scheduled = false;
  let lastCommitAt = Number.NEGATIVE_INFINITY;
  let closing = false;

  const commit = () => {
    scheduled = false;
    const pending = queue;
    queue = [];
    if (pending.length > 0) {
      lastCommitAt = performance.now();
      const writes = pending.flatMap((p) => p.writes);
      let results: WriteResult[];
      try {
        results = db
          .transaction(apply)
          .immediate(writes)
          .map((count) => ({ count }));
      } catch {
        // One request's failure must not fail its neighbours: each on its own.
        results = writes.map((w) => {
          try {
            return { count: db.transaction(apply).immediate([w])[0] ?? 0 };
          } catch (err) {
            return failure(err);
          }
        });
      }
      let i = 0;
      for (const p of pending) {
        port.postMessage({ batch: p.batch, results: results.slice(i, i + p.writes.length) });
        i += p.writes.length;
      }
    }
    if (closing) {
      db.close();
      port.close();
    }
  };
  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    const wait = lastCommitAt + input.commitIntervalMs - performance.now();
    if (wait >= 1 && !closing) setTimeout(commit, wait);
    else setImmediate(commit);
  };
  port.on('message', (message: WriteMessage | 'close') => {
    if (message === 'close') closing = true;
    else queue.push({ batch: message.batch, writes: message.writes });
    schedule();
  });
}

/** The error a writer's failure stands for: SQLite's own, so that storage faults are recognised as such. */
function asError(error: { message: string; code?: string }): Error {
  return error.code ? new Database.SqliteError(error.message, error.code) : new Error(error.message);
}

export function openTelemetryDb(dataDir: string, options: TelemetryDbOptions = {}): TelemetryDb {
  const path = join(dataDir, TELEMETRY_DATABASE_FILE);
  const reader = new Database(path);
  reader.pragma('journal_mode = WAL');
  reader.pragma('busy_timeout = 5000');
  reader.exec(telemetrySchema());
  const stateOf = reader.prepare('SELECT * FROM connector_state WHERE device_id = ? AND connector_id = ?');
  const statesOf = reader.prepare('SELECT * FROM connector_state WHERE device_id = ? ORDER BY connector_id');
  const samplesOf = reader.prepare(
    `SELECT connector_id, ts_ms, power FROM telemetry WHERE device_id = ? AND ts_ms >= ? AND ts_ms < ?
     ORDER BY ts_ms, connector_id`,
  );
  const input: WriterInput = {
    driverPath: createRequire(import.meta.url).resolve('better-sqlite3'),
    path,
    schema: telemetrySchema(),
    commitIntervalMs: options.commitIntervalMs ?? 0,
  };

  let worker: Worker | undefined;
  let nextBatch = 0;
  const inflight = new Map<number, Array<{ resolve: (n: number) => void; reject: (e: Error) => void }>>();
  let pending: Array<{
    write: WriteMessage['writes'][number];
    resolve: (n: number) => void;
    reject: (e: Error) => void;
  }> = [];
  let sendScheduled = false;

  /** Everything not yet answered fails with `error`; the next write starts a new writer. */
  const writerFailed = (error: Error) => {
    worker = undefined;
    for (const waiting of inflight.values()) for (const w of waiting) w.reject(error);
    inflight.clear();
    options.onWriterFailure?.(error.message);
  };
  const startWriter = (): Worker => {
    const w = new Worker(
      `(${telemetryWriter.toString()})(require('node:worker_threads').workerData, require)`,
      {
        eval: true,
        workerData: input,
      },
    );
    w.on('message', (message: ResultMessage) => {
      const waiting = inflight.get(message.batch);
      if (!waiting) return;
      inflight.delete(message.batch);
      if (inflight.size === 0) w.unref();
      message.results.forEach((r, i) => {
        const w = waiting[i];
        if (!w) return;
        if ('count' in r) w.resolve(r.count);
        else w.reject(asError(r.error));
      });
    });
    w.on('error', (err) => {
      if (worker === w) writerFailed(err);
    });
    w.on('exit', (code) => {
      if (worker === w) writerFailed(new Error(`telemetry writer exited (${code})`));
    });
    // Idle, it must not keep a process alive that is otherwise done; with writes on their way, it must.
    w.unref();
    return w;
  };
  const send = () => {
    sendScheduled = false;
    const batch = pending;
    pending = [];
    if (batch.length === 0) return;
    worker ??= startWriter();
    worker.ref();
    const id = nextBatch++;
    inflight.set(
      id,
      batch.map((p) => ({ resolve: p.resolve, reject: p.reject })),
    );
    worker.postMessage({ batch: id, writes: batch.map((p) => p.write) } satisfies WriteMessage);
  };

  const inList = new Map<number, Database.Statement>();
  return {
    record(deviceId, records, receivedMs) {
      return new Promise<number>((resolve, reject) => {
        pending.push({ write: { deviceId, receivedMs, records }, resolve, reject });
        if (!sendScheduled) {
          sendScheduled = true;
          setImmediate(send);
        }
      });
    },
    connectorStates(deviceIds) {
      if (deviceIds.length === 1) return statesOf.all(deviceIds[0]) as ConnectorStateRow[];
      if (deviceIds.length === 0) return [];
      let stmt = inList.get(deviceIds.length);
      if (!stmt) {
        stmt = reader.prepare(
          `SELECT * FROM connector_state WHERE device_id IN (${new Array(deviceIds.length).fill('?').join(',')})
           ORDER BY device_id, connector_id`,
        );
        inList.set(deviceIds.length, stmt);
      }
      return stmt.all(...deviceIds) as ConnectorStateRow[];
    },
    connectorState(deviceId, connectorId) {
      return stateOf.get(deviceId, connectorId) as ConnectorStateRow | undefined;
    },
    samples(deviceId, fromMs, toMs) {
      return samplesOf.iterate(deviceId, fromMs, toMs) as Iterable<TelemetrySample>;
    },
    async close() {
      send();
      const w = worker;
      worker = undefined;
      if (w) {
        const exited = new Promise<void>((resolve) => w.once('exit', () => resolve()));
        w.ref();
        w.postMessage('close');
        await exited;
      }
      for (const waiting of inflight.values())
        for (const p of waiting) p.reject(new Error('telemetry database closed'));
      inflight.clear();
      reader.close();
    },
  };
}
