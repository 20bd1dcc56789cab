import type Database from 'better-sqlite3';
import type { RetentionSteps } from '../maintenance-steps.js';
import {
  RETENTION_BATCH as BATCH,
  DIAGNOSTICS_BATCH,
  TELEMETRY_PRUNED_THROUGH_SETTING,
} from '../retention-policy.js';
import type { SqliteTelemetryBlocks } from './telemetry-blocks.js';

/**
 * Retention's steps (DESIGN.md §12) on SQLite, a small batch per write so that no request waits behind them;
 * `../maintenance-scheduler.ts` runs the passes and counts.
 *
 * - Raw telemetry: rows older than the window by both their time and their arrival. Rows are visited in
 *   arrival (id) order, so the step stops at the first row that arrived inside the window instead of scanning
 *   the table; a record uploaded late (an outbox after an outage) stays a full window after it arrived. The
 *   newest row is always kept, so that row ids never restart (rollups and the live state follow them).
 * - History: device events, firmware reports, finished commands with their history, and finished controls.
 * - Rollups, per device along their primary key.
 * - Diagnostics records by their creation time, each with its archive's chunks.
 */
export interface SqliteRetention extends RetentionSteps {
  /** The newest time (ms) of any telemetry row pruned: raw telemetry after it is complete. */
  telemetryHorizonMs(): number;
}

/** What a chunk of a walk in rowid order did: rows deleted, whether to go on, and from which rowid. */
interface Chunk {
  more: boolean;
  deleted: number;
  next: number;
}

const FINISHED_COMMANDS = `('succeeded', 'failed', 'rejected', 'expired', 'cancelled')`;

export function createSqliteRetention(
  db: Database.Database,
  write: <T>(run: () => T) => Promise<T>,
  /** Telemetry rows above this id are not rolled up yet: never pruned before they are. */
  rolledUpTo: () => number,
  /** Compressed blocks (DESIGN.md §21): rolled up before they were made, pruned by their hour. */
  blocks?: () => Pick<SqliteTelemetryBlocks, 'pruneBefore'>,
): SqliteRetention {
  const stmt = retentionStatements(db);
  const prunedThrough = db.prepare('SELECT value FROM settings WHERE key = ?').pluck();
  const setPrunedThrough = db.prepare(
    'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
  );
  let prunedThroughMs = Number(
    prunedThrough.get(TELEMETRY_PRUNED_THROUGH_SETTING) ?? Number.NEGATIVE_INFINITY,
  );

  /** One chunk of rows in arrival order from `cursor`: how many it deleted, and where the next starts. */
  const telemetryChunk = (cursor: number, before: number): Chunk => {
    let through = prunedThroughMs;
    let deleted = 0;
    let next = cursor;
    const done = (more: boolean) => {
      if (through > prunedThroughMs) {
        setPrunedThrough.run(TELEMETRY_PRUNED_THROUGH_SETTING, String(through));
        prunedThroughMs = through;
      }
      return { more, deleted, next };
    };
    const keep = Number(stmt.maxTelemetryId.get() ?? 0);
    const limit = rolledUpTo();
    const rows = stmt.telemetryChunk.all(cursor, BATCH) as Array<{
      id: number;
      ts_ms: number;
      received_ms: number;
    }>;
    for (const row of rows) {
      next = row.id;
      // Arrived inside the window (so did everything after it), or not rolled up yet.
      if (row.received_ms >= before || row.id > limit) return done(false);
      if (row.ts_ms < before && row.id !== keep) {
        stmt.deleteTelemetry.run(row.id);
        deleted++;
        if (row.ts_ms > through) through = row.ts_ms;
      }
    }
    return done(rows.length === BATCH);
  };

  /** Runs `chunk` from the start of its table, a write each, until it says there is no more. */
  const inChunks = async (chunk: (cursor: number) => Chunk, deleted: (rows: number) => void) => {
    for (let cursor = 0, more = true; more; ) {
      const out = await write(() => chunk(cursor));
      deleted(out.deleted);
      ({ more, next: cursor } = out);
    }
  };

  return {
    // One process serves a SQLite file: a pass never has to wait for another instance's.
    alone: async (pass) => {
      await pass();
      return true;
    },
    async pruneTelemetry(before, count) {
      await inChunks(
        (cursor) => telemetryChunk(cursor, before),
        (n) => count('telemetry', n),
      );
      const pruneBlocks = blocks?.();
      if (!pruneBlocks) return;
      for (let more = true; more; ) {
        const { deleted, samples } = await write(() => {
          const out = pruneBlocks.pruneBefore(before);
          if (out.newestMs > prunedThroughMs) {
            prunedThroughMs = out.newestMs;
            setPrunedThrough.run(TELEMETRY_PRUNED_THROUGH_SETTING, String(out.newestMs));
          }
          return out;
        });
        count('telemetry', samples);
        more = deleted === BATCH;
      }
    },
    async devicesAfter(after, limit) {
      return stmt.devices.all(after, limit) as string[];
    },
    pruneDeviceHistory: (id, before) =>
      write(() => ({
        events: stmt.deleteEvents.run(id, before).changes,
        firmware: stmt.deleteFirmware.run(id, before).changes,
      })),
    pruneCommands: (before, count) =>
      inChunks(
        (cursor) => commandsChunk(stmt, cursor, before),
        (n) => count('commands', n),
      ),
    pruneControls: (before) => write(() => stmt.deleteControls.run(before).changes),
    pruneRollups: (id, before) => write(() => stmt.deleteRollups.run(id, before).changes),
    pruneDiagnostics: (before) =>
      write(() => {
        const ids = stmt.oldDiagnostics.all(before) as string[];
        for (const id of ids) {
          stmt.deleteDiagnosticsChunks.run(id);
          stmt.deleteDiagnostics.run(id);
        }
        return ids.length;
      }),
    telemetryHorizonMs() {
      return prunedThroughMs;
    },
  };
}

type RetentionStatements = ReturnType<typeof retentionStatements>;

function retentionStatements(db: Database.Database) {
  return {
    telemetryChunk: db.prepare(
      'SELECT id, ts_ms, received_ms FROM telemetry_recent WHERE id > ? ORDER BY id LIMIT ?',
    ),
    maxTelemetryId: db.prepare('SELECT MAX(id) FROM telemetry_recent').pluck(),
    deleteTelemetry: db.prepare('DELETE FROM telemetry_recent WHERE id = ?'),
    devices: db
      .prepare('SELECT device_id FROM devices WHERE device_id > ? ORDER BY device_id LIMIT ?')
      .pluck(),
    deleteEvents: db.prepare(
      `DELETE FROM device_events WHERE rowid IN
         (SELECT rowid FROM device_events WHERE device_id = ? AND ts_ms < ? LIMIT ${BATCH})`,
    ),
    deleteFirmware: db.prepare(
      `DELETE FROM firmware_status WHERE id IN
         (SELECT id FROM firmware_status WHERE device_id = ? AND ts_ms < ? LIMIT ${BATCH})`,
    ),
    deleteRollups: db.prepare(
      `DELETE FROM energy_rollups WHERE (device_id, bucket_ms, connector_id) IN
         (SELECT device_id, bucket_ms, connector_id FROM energy_rollups WHERE device_id = ? AND bucket_ms < ?
          LIMIT ${BATCH})`,
    ),
    commandsChunk: db.prepare(
      'SELECT rowid AS rowid, command_id, status, created_ms, updated_ms FROM commands WHERE rowid > ? ORDER BY rowid LIMIT ?',
    ),
    deleteCommand: db.prepare('DELETE FROM commands WHERE command_id = ?'),
    deleteCommandHistory: db.prepare('DELETE FROM command_history WHERE command_id = ?'),
    deleteControls: db.prepare(
      `DELETE FROM controls WHERE rowid IN
         (SELECT rowid FROM controls WHERE status <> 'executing' AND ends_ms < ? LIMIT ${BATCH})`,
    ),
    oldDiagnostics: db
      .prepare(`SELECT diagnostics_id FROM diagnostics WHERE created_ms < ? LIMIT ${DIAGNOSTICS_BATCH}`)
      .pluck(),
    deleteDiagnosticsChunks: db.prepare('DELETE FROM diagnostics_chunks WHERE diagnostics_id = ?'),
    deleteDiagnostics: db.prepare('DELETE FROM diagnostics WHERE diagnostics_id = ?'),
  };
}

/** One chunk of commands in creation (rowid) order from `cursor`: finished ones from before `before` go. */
function commandsChunk(stmt: RetentionStatements, cursor: number, before: number): Chunk {
  let deleted = 0;
  let next = cursor;
  const rows = stmt.commandsChunk.all(cursor, BATCH) as Array<{
    rowid: number;
    command_id: string;
    status: string;
    created_ms: number;
    updated_ms: number;
  }>;
  for (const row of rows) {
    next = row.rowid;
    // Created inside the window: so was everything after it, and it cannot have finished before it.
    if (row.created_ms >= before) return { more: false, deleted, next };
    if (row.updated_ms < before && FINISHED_COMMANDS.includes(`'${row.status}'`)) {
      stmt.deleteCommandHistory.run(row.command_id);
      stmt.deleteCommand.run(row.command_id);
      deleted++;
    }
  }
  return { more: rows.length === BATCH, deleted, next };
}
