import type Database from 'better-sqlite3';
import type { PrunedKind, RetentionPolicy, RetentionStats } from '../retention-policy.js';

/**
 * Retention (DESIGN.md §12) on SQLite: a background pass deletes what has aged out, a small batch per write so
 * that no request waits behind it, and counts what it deleted for /metrics.
 *
 * - Raw telemetry: rows older than `telemetryDays` by both their time and their arrival. Rows are visited in
 *   arrival (id) order, so the pass stops at the first row that arrived inside the window instead of scanning
 *   the table; a record uploaded late (an outbox after an outage) stays a full window after it arrived. The
 *   newest row is always kept, so that row ids never restart (rollups and the live state follow them).
 * - History (`historyDays`): device events, firmware reports, finished commands with their history, and
 *   finished controls.
 * - Rollups (`rollupDays`), per device along their primary key.
 * - Charging records are kept.
 *
 * 0 days keeps that kind forever.
 */

export interface SqliteRetention {
  /** One whole pass, a batch per write; concurrent calls share it. */
  prune(): Promise<void>;
  stats(): RetentionStats;
  /** Settles when no pass is running (before the database closes). */
  idle(): Promise<void>;
  /** The newest time (ms) of any telemetry row pruned: raw telemetry after it is complete. */
  telemetryHorizonMs(): number;
}

const BATCH = 2000;
const PRUNED_THROUGH_SETTING = 'telemetry_pruned_through_ms';
const DAY_MS = 86_400_000;
const FINISHED_COMMANDS = `('succeeded', 'failed', 'rejected', 'expired', 'cancelled')`;

export function createSqliteRetention(
  db: Database.Database,
  write: <T>(run: () => T) => Promise<T>,
  policy: RetentionPolicy,
  now: () => number,
  /** Telemetry rows above this id are not rolled up yet: never pruned before they are. */
  rolledUpTo: () => number,
): SqliteRetention {
  const stmt = {
    telemetryChunk: db.prepare(
      'SELECT id, ts_ms, received_ms FROM telemetry WHERE id > ? ORDER BY id LIMIT ?',
    ),
    maxTelemetryId: db.prepare('SELECT MAX(id) FROM telemetry').pluck(),
    deleteTelemetry: db.prepare('DELETE FROM telemetry WHERE id = ?'),
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
  };
  const pruned: Record<PrunedKind, number> = {
    telemetry: 0,
    device_events: 0,
    firmware_status: 0,
    commands: 0,
    controls: 0,
    energy_rollups: 0,
  };
  const prunedThrough = db.prepare('SELECT value FROM settings WHERE key = ?').pluck();
  const setPrunedThrough = db.prepare(
    'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
  );
  let prunedThroughMs = Number(prunedThrough.get(PRUNED_THROUGH_SETTING) ?? Number.NEGATIVE_INFINITY);
  let passes = 0;
  let lastPassMs: number | null = null;
  let lastPassDurationMs: number | null = null;

  const cutoff = (days: number) => now() - days * DAY_MS;

  const pruneTelemetry = async () => {
    const before = cutoff(policy.telemetryDays);
    let cursor = 0;
    for (;;) {
      const more = await write(() => {
        let through = prunedThroughMs;
        const done = (result: boolean) => {
          if (through > prunedThroughMs) {
            setPrunedThrough.run(PRUNED_THROUGH_SETTING, String(through));
            prunedThroughMs = through;
          }
          return result;
        };
        const keep = Number(stmt.maxTelemetryId.get() ?? 0);
        const limit = rolledUpTo();
        const rows = stmt.telemetryChunk.all(cursor, BATCH) as Array<{
          id: number;
          ts_ms: number;
          received_ms: number;
        }>;
        for (const row of rows) {
          cursor = row.id;
          // Arrived inside the window (so did everything after it), or not rolled up yet.
          if (row.received_ms >= before || row.id > limit) return done(false);
          if (row.ts_ms < before && row.id !== keep) {
            stmt.deleteTelemetry.run(row.id);
            pruned.telemetry++;
            if (row.ts_ms > through) through = row.ts_ms;
          }
        }
        return done(rows.length === BATCH);
      });
      if (!more) return;
    }
  };

  /** Runs `perDevice` for every device, a batch of devices per write, until each has nothing left. */
  const forEachDevice = async (perDevice: (deviceId: string) => boolean) => {
    let after = '';
    for (;;) {
      const ids = stmt.devices.all(after, 50) as string[];
      if (ids.length === 0) return;
      for (const id of ids) {
        while (await write(() => perDevice(id))) {
          // This device had a whole batch: there may be more.
        }
      }
      after = ids.at(-1)!;
    }
  };

  const pruneCommands = async (before: number) => {
    let cursor = 0;
    for (;;) {
      const more = await write(() => {
        const rows = stmt.commandsChunk.all(cursor, BATCH) as Array<{
          rowid: number;
          command_id: string;
          status: string;
          created_ms: number;
          updated_ms: number;
        }>;
        for (const row of rows) {
          cursor = row.rowid;
          // Created inside the window: so was everything after it, and it cannot have finished before it.
          if (row.created_ms >= before) return false;
          if (row.updated_ms < before && FINISHED_COMMANDS.includes(`'${row.status}'`)) {
            stmt.deleteCommandHistory.run(row.command_id);
            stmt.deleteCommand.run(row.command_id);
            pruned.commands++;
          }
        }
        return rows.length === BATCH;
      });
      if (!more) return;
    }
  };

  const pass = async () => {
    const started = now();
    if (policy.telemetryDays > 0) await pruneTelemetry();
    if (policy.historyDays > 0) {
      const before = cutoff(policy.historyDays);
      await forEachDevice((id) => {
        const events = stmt.deleteEvents.run(id, before).changes;
        const firmware = stmt.deleteFirmware.run(id, before).changes;
        pruned.device_events += events;
        pruned.firmware_status += firmware;
        return events === BATCH || firmware === BATCH;
      });
      await pruneCommands(before);
      while (
        await write(() => {
          const n = stmt.deleteControls.run(before).changes;
          pruned.controls += n;
          return n === BATCH;
        })
      ) {
        // Another batch of finished controls.
      }
    }
    if (policy.rollupDays > 0) {
      const before = cutoff(policy.rollupDays);
      await forEachDevice((id) => {
        const n = stmt.deleteRollups.run(id, before).changes;
        pruned.energy_rollups += n;
        return n === BATCH;
      });
    }
    passes++;
    lastPassMs = now();
    lastPassDurationMs = lastPassMs - started;
  };

  let running: Promise<void> | undefined;
  return {
    prune() {
      running ??= pass().finally(() => {
        running = undefined;
      });
      return running;
    },
    idle() {
      return running?.catch(() => undefined) ?? Promise.resolve();
    },
    stats() {
      return { pruned: { ...pruned }, passes, lastPassMs, lastPassDurationMs };
    },
    telemetryHorizonMs() {
      return prunedThroughMs;
    },
  };
}
