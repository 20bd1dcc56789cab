/**
 * What the control loop follows without the platform: schedules per connector, flexibility limits keyed by
 * control_id, and a technician's or a command's override per connector.
 */
import type Database from 'better-sqlite3';
import type { ConnectorOverride } from '../core/connector-policy.js';
import { repeatedLimit, type StoredLimit } from '../core/limit-policy.js';
import type { StoredSchedule } from '../core/schedule-engine.js';

type Db = Database.Database;

export interface ControlStore {
  listSchedules(connectorId?: number): Array<{ connectorId: number; schedule: StoredSchedule }>;
  upsertSchedule(connectorId: number, schedule: StoredSchedule, commandId: string): void;
  deleteSchedule(connectorId: number, scheduleId: string): boolean;

  listLimits(): StoredLimit[];
  /** Stores a limit keyed by control_id; a repeat can shorten a control (a reversal) but never extend it. */
  upsertLimit(limit: StoredLimit): StoredLimit;
  pruneLimits(endedBefore: string): number;

  listOverrides(): Map<number, ConnectorOverride>;
  setOverride(connectorId: number, override: ConnectorOverride | undefined): void;
}

interface LimitRow {
  control_id: string;
  kind: 'power_limit' | 'pause';
  power_limit_percent: number | null;
  starts_at: string;
  ends_at: string;
  reason: string | null;
  command_id: string;
  received_at: string;
}

/** `write` prepares a statement on first use; `nowIso` stamps rows that carry no time of their own. */
export function createControlStore(
  db: Db,
  write: (sql: string) => Database.Statement,
  nowIso: () => string,
): ControlStore {
  const q = {
    schedulesAll: db.prepare('SELECT * FROM schedules ORDER BY connector_id, schedule_id'),
    schedulesOf: db.prepare('SELECT * FROM schedules WHERE connector_id = ? ORDER BY schedule_id'),
    limits: db.prepare('SELECT * FROM limits ORDER BY starts_at, control_id'),
    limit: db.prepare('SELECT * FROM limits WHERE control_id = ?'),
    overrides: db.prepare('SELECT * FROM overrides ORDER BY connector_id'),
  };
  return {
    listSchedules(connectorId) {
      const rows = (
        connectorId === undefined ? q.schedulesAll.all() : q.schedulesOf.all(connectorId)
      ) as Array<{
        connector_id: number;
        schedule: string;
        received_at: string;
      }>;
      return rows.map((r) => ({
        connectorId: r.connector_id,
        schedule: { ...(JSON.parse(r.schedule) as StoredSchedule), received_at: r.received_at },
      }));
    },
    upsertSchedule(connectorId, schedule, commandId) {
      const { received_at, ...wire } = schedule;
      write(
        `INSERT INTO schedules (connector_id, schedule_id, schedule, received_at, command_id) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (connector_id, schedule_id) DO UPDATE SET schedule = excluded.schedule,
           received_at = excluded.received_at, command_id = excluded.command_id`,
      ).run(connectorId, wire.schedule_id, JSON.stringify(wire), received_at ?? nowIso(), commandId);
    },
    deleteSchedule(connectorId, scheduleId) {
      return (
        write('DELETE FROM schedules WHERE connector_id = ? AND schedule_id = ?').run(connectorId, scheduleId)
          .changes === 1
      );
    },

    listLimits() {
      return (q.limits.all() as LimitRow[]).map(toLimit);
    },
    upsertLimit(limit) {
      const existing = q.limit.get(limit.control_id) as LimitRow | undefined;
      const stored = repeatedLimit(existing, limit);
      write(
        `INSERT INTO limits (control_id, kind, power_limit_percent, starts_at, ends_at, reason, command_id, received_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (control_id) DO UPDATE SET kind = excluded.kind,
           power_limit_percent = excluded.power_limit_percent, starts_at = excluded.starts_at,
           ends_at = excluded.ends_at, reason = excluded.reason, command_id = excluded.command_id,
           received_at = excluded.received_at`,
      ).run(
        stored.control_id,
        stored.kind,
        stored.power_limit_percent ?? null,
        stored.starts_at,
        stored.ends_at,
        stored.reason ?? null,
        stored.commandId,
        stored.receivedAt,
      );
      return stored;
    },
    pruneLimits(endedBefore) {
      // ISO strings of one format compare like instants; every stored time comes from toISOString.
      return write('DELETE FROM limits WHERE ends_at < ?').run(endedBefore).changes;
    },

    listOverrides() {
      const map = new Map<number, ConnectorOverride>();
      for (const row of q.overrides.all() as Array<{ connector_id: number; override: string }>) {
        map.set(row.connector_id, JSON.parse(row.override) as ConnectorOverride);
      }
      return map;
    },
    setOverride(connectorId, override) {
      if (override === undefined) {
        write('DELETE FROM overrides WHERE connector_id = ?').run(connectorId);
        return;
      }
      write(
        `INSERT INTO overrides (connector_id, override, updated_at) VALUES (?, ?, ?)
         ON CONFLICT (connector_id) DO UPDATE SET override = excluded.override, updated_at = excluded.updated_at`,
      ).run(connectorId, JSON.stringify(override), nowIso());
    },
  };
}

function toLimit(row: LimitRow): StoredLimit {
  const limit: StoredLimit = {
    control_id: row.control_id,
    kind: row.kind,
    starts_at: row.starts_at,
    ends_at: row.ends_at,
    commandId: row.command_id,
    receivedAt: row.received_at,
  };
  if (row.power_limit_percent !== null) limit.power_limit_percent = row.power_limit_percent;
  if (row.reason !== null) limit.reason = row.reason;
  return limit;
}
