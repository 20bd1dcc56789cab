import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type Database from 'better-sqlite3';
import type { TelemetryHistoryRow } from '../store.js';
import * as blockCodec from '../telemetry-block.js';
import { type HistoryStatements, runHistoryRead } from '../telemetry-history-rows.js';

/**
 * Operator reads off the event loop that serves chargers (DESIGN.md §12): a worker thread with its own
 * read-only connection runs the read queries of the heavier operator endpoints (energy series, charging
 * records, a device's commands). The main thread keeps deciding what to read; only the SQL runs in the worker, so a year of a site's
 * rollups takes its time there while heartbeats and telemetry keep being served.
 *
 * WAL mode lets the reader see every committed write, and never blocks a writer. Should the worker fail, reads
 * run on the main connection again (`onFailure` is told once).
 */
export interface SqlReader {
  all<T>(sql: string, params: readonly unknown[]): Promise<T[]>;
  get<T>(sql: string, params: readonly unknown[]): Promise<T | undefined>;
  /** A telemetry history page (DESIGN.md §21): statements run, blocks decoded and the page built, all here. */
  telemetryHistory(statements: HistoryStatements): Promise<TelemetryHistoryRow[]>;
  close(): Promise<void>;
}

type Request =
  | { id: number; mode: 'all' | 'get'; sql: string; params: readonly unknown[] }
  | { id: number; mode: 'history'; statements: HistoryStatements };
type Reply = { id: number; result: unknown } | { id: number; error: { message: string; code?: string } };

interface WorkerInput {
  driverPath: string;
  dbPath: string;
  /** The block codec and the history rules, loaded by path (both self-contained: node: imports only). */
  codecPath: string;
  historyPath: string;
}

/**
 * A module beside this one's parent (storage/), as built (`.js`) or, when running from the sources (tests),
 * as written (`.ts`, which Node loads by stripping its types).
 */
function storageModule(name: string): string {
  const built = fileURLToPath(new URL(`../${name}.js`, import.meta.url));
  return existsSync(built) ? built : fileURLToPath(new URL(`../${name}.ts`, import.meta.url));
}

/**
 * The worker's whole program, evaluated in the worker from its source text (so that it runs from the
 * TypeScript sources in tests as from the build): it may use only its arguments.
 */
function readLoop(input: WorkerInput, load: (id: string) => unknown): void {
  const Driver = load(input.driverPath) as typeof Database;
  const { parentPort } = load('node:worker_threads') as typeof import('node:worker_threads');
  const codec = load(input.codecPath) as typeof import('../telemetry-block.js');
  const history = load(input.historyPath) as typeof import('../telemetry-history-rows.js');
  const db = new Driver(input.dbPath, { readonly: true, fileMustExist: true });
  db.pragma('busy_timeout = 5000');
  const statements = new Map<string, Database.Statement>();
  const prepared = (sql: string) => {
    let s = statements.get(sql);
    if (!s) {
      s = db.prepare(sql);
      statements.set(sql, s);
    }
    return s;
  };
  parentPort?.on('message', (m: Request | 'close') => {
    if (m === 'close') {
      db.close();
      parentPort.close();
      return;
    }
    try {
      let result: unknown;
      if (m.mode === 'history') {
        result = history.runHistoryRead((sql, p) => prepared(sql).all(p), m.statements, codec);
      } else {
        const s = prepared(m.sql);
        result = m.mode === 'get' ? s.get(...m.params) : s.all(...m.params);
      }
      parentPort.postMessage({ id: m.id, result });
    } catch (err) {
      const e = err as { message?: string; code?: string };
      parentPort.postMessage({ id: m.id, error: { message: String(e.message), code: e.code } });
    }
  });
}

/** Reads on the calling thread's connection: for short-lived processes, and after a worker failure. */
export function createInlineReader(db: Database.Database): SqlReader {
  const statements = new Map<string, Database.Statement>();
  const prepared = (sql: string) => {
    let s = statements.get(sql);
    if (!s) {
      s = db.prepare(sql);
      statements.set(sql, s);
    }
    return s;
  };
  return {
    async all<T>(sql: string, params: readonly unknown[]) {
      return prepared(sql).all(...params) as T[];
    },
    async get<T>(sql: string, params: readonly unknown[]) {
      return prepared(sql).get(...params) as T | undefined;
    },
    async telemetryHistory(statements) {
      return runHistoryRead((sql, p) => prepared(sql).all(p), statements, blockCodec);
    },
    async close() {},
  };
}

export function createWorkerReader(
  db: Database.Database,
  dbPath: string,
  onFailure?: (message: string) => void,
): SqlReader {
  const input: WorkerInput = {
    driverPath: createRequire(import.meta.url).resolve('better-sqlite3'),
    dbPath,
    codecPath: storageModule('telemetry-block'),
    historyPath: storageModule('telemetry-history-rows'),
  };
  const worker = new Worker(`(${readLoop.toString()})(require('node:worker_threads').workerData, require)`, {
    eval: true,
    workerData: input,
  });
  const inline = createInlineReader(db);
  const pending = new Map<
    number,
    { request: Request; resolve: (v: unknown) => void; reject: (e: unknown) => void }
  >();
  let nextId = 0;
  let closing = false;
  let failed = false;
  const fail = (message: string) => {
    if (closing || failed) return;
    failed = true;
    onFailure?.(message);
    // Reads in flight are answered on the main connection instead.
    const inFlight = [...pending.values()];
    pending.clear();
    for (const { request, resolve, reject } of inFlight) inlineAnswer(inline, request).then(resolve, reject);
  };
  worker.on('message', (reply: Reply) => {
    const p = pending.get(reply.id);
    if (!p) return;
    pending.delete(reply.id);
    if ('error' in reply) p.reject(Object.assign(new Error(reply.error.message), { code: reply.error.code }));
    else p.resolve(reply.result);
  });
  worker.on('error', (err) => fail(err.message));
  worker.on('exit', (code) => fail(`read worker exited (${code})`));
  // Idle, it must not keep a process alive that is otherwise done; with reads in flight it must.
  worker.unref();
  const ask = (question: DistributiveOmit<Request, 'id'>) =>
    new Promise<unknown>((resolve, reject) => {
      const id = nextId++;
      const request = { ...question, id } as Request;
      pending.set(id, {
        request,
        resolve: (v) => {
          if (pending.size === 0) worker.unref();
          resolve(v);
        },
        reject: (e) => {
          if (pending.size === 0) worker.unref();
          reject(e);
        },
      });
      worker.ref();
      worker.postMessage(request);
    });
  return {
    async all<T>(sql: string, params: readonly unknown[]) {
      if (failed || closing) return inline.all<T>(sql, params);
      return (await ask({ mode: 'all', sql, params })) as T[];
    },
    async get<T>(sql: string, params: readonly unknown[]) {
      if (failed || closing) return inline.get<T>(sql, params);
      return (await ask({ mode: 'get', sql, params })) as T | undefined;
    },
    async telemetryHistory(statements) {
      if (failed || closing) return inline.telemetryHistory(statements);
      return (await ask({ mode: 'history', statements })) as TelemetryHistoryRow[];
    },
    async close() {
      if (closing) return;
      closing = true;
      if (failed) return;
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
      worker.ref();
      worker.postMessage('close');
      await exited;
    },
  };
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** What a request answers when read on the main connection. */
function inlineAnswer(inline: SqlReader, request: Request): Promise<unknown> {
  if (request.mode === 'history') return inline.telemetryHistory(request.statements);
  return request.mode === 'get'
    ? inline.get(request.sql, request.params)
    : inline.all(request.sql, request.params);
}
