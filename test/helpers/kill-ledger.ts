import Database from 'better-sqlite3';
import { expect } from 'vitest';
import { type Charger, TELEMETRY_EPOCH_MS } from './fault-chargers.js';
import type { HttpResult } from './platform.js';

/**
 * What the platform acknowledged under the SIGKILL load of platform-faults.test.ts (the ledger), and the check
 * of the killed platform's database against it: every acknowledged write there exactly once, command states and
 * histories consistent, SQLite's integrity and foreign-key checks passing. Also what the load sends (its
 * payloads) and how an acknowledged heartbeat is noted.
 */

export const RANK: Record<string, number> = {
  queued: 0,
  delivered: 1,
  accepted: 2,
  succeeded: 3,
  failed: 3,
  rejected: 3,
  expired: 3,
  cancelled: 3,
};
export const FINAL = new Set(['succeeded', 'failed', 'rejected', 'expired', 'cancelled']);

export interface TelemetrySent {
  deviceId: string;
  connector_id: number;
  ts: number;
  power: number;
}
export interface RecordSent {
  deviceId: string;
  record_id: string;
  connector_id: number;
  start_time: string;
  end_time: string;
  energy: number;
}
export interface EventSent {
  deviceId: string;
  event_id: string;
  kind: string;
  timestamp: string;
}

export const telKey = (t: { deviceId: string; connector_id: number; ts: number }) =>
  `${t.deviceId}|${t.connector_id}|${t.ts}`;
export const recKey = (r: { deviceId: string; record_id: string }) => `${r.deviceId}|${r.record_id}`;
export const evKey = (e: { deviceId: string; event_id: string }) => `${e.deviceId}|${e.event_id}`;

/** Asserts that `found` is empty, showing how many and the first few. */
function expectNone(found: unknown[], what: string): void {
  expect(found.slice(0, 5), `${found.length} ${what}`).toEqual([]);
}

/** Everything the platform acknowledged (2xx), and what was sent without an answer (in flight at the kill). */
export class Ledger {
  telemetry = new Map<string, TelemetrySent>();
  records = new Map<string, RecordSent>();
  events = new Map<string, EventSent>();
  /** command_id -> device and the highest status an acknowledged answer showed. */
  commands = new Map<string, { deviceId: string; status: string }>();
  /** Commands on which the charger sent a status report that got no answer (it may or may not have landed). */
  unansweredReports = new Set<string>();
  /** device -> latest server_time of an acknowledged heartbeat. */
  heartbeats = new Map<string, number>();
  /** Sent, no answer: candidates for the replay after the restart. */
  unansweredTelemetry: TelemetrySent[] = [];
  unansweredRecords: RecordSent[] = [];
  unansweredEvents: EventSent[] = [];

  ackCommand(commandId: string, deviceId: string, status: string): void {
    const prev = this.commands.get(commandId);
    if (!prev || RANK[status]! > RANK[prev.status]!) this.commands.set(commandId, { deviceId, status });
  }
}

export interface RoundStats {
  round: number;
  killAfterMs: number;
  telemetry: number;
  records: number;
  events: number;
  commands: number;
  reports: number;
  heartbeats: number;
  inFlightAtKill: number;
  unanswered: number;
  replayed: number;
}

/**
 * Reads the data directory's database read-only (the platform is down) and checks it against the ledger:
 * every acknowledged write is there exactly once, command states and histories are consistent, and SQLite's
 * integrity and foreign-key checks pass.
 */
export function verifyDatabase(dbPath: string, ledger: Ledger, label: string): void {
  const db = new Database(dbPath, { readonly: true, fileMustExist: true });
  try {
    expect(db.pragma('integrity_check', { simple: true }), `${label}: integrity_check`).toBe('ok');
    expect(db.pragma('foreign_key_check'), `${label}: foreign_key_check`).toEqual([]);

    // Telemetry: each acknowledged record present with what it carried; no (device, connector, ts) twice.
    const tel = new Map<string, number | null>();
    for (const r of db.prepare('SELECT device_id, connector_id, ts_ms, power FROM telemetry').all() as Array<{
      device_id: string;
      connector_id: number;
      ts_ms: number;
      power: number | null;
    }>) {
      tel.set(telKey({ deviceId: r.device_id, connector_id: r.connector_id, ts: r.ts_ms }), r.power);
    }
    const lostTelemetry = [...ledger.telemetry.values()].filter((t) => tel.get(telKey(t)) !== t.power);
    expectNone(lostTelemetry, `${label}: acknowledged telemetry records lost or altered`);
    expect(
      db
        .prepare(
          'SELECT device_id, connector_id, ts_ms, COUNT(*) AS n FROM telemetry GROUP BY 1, 2, 3 HAVING n > 1',
        )
        .all(),
      `${label}: duplicated telemetry`,
    ).toEqual([]);

    // Charging records: by (device_id, record_id), exactly once.
    const recs = new Map<string, { energy: number; start_ms: number; n: number }>();
    for (const r of db
      .prepare(
        `SELECT device_id, record_id, MAX(energy) AS energy, MAX(start_ms) AS start_ms, COUNT(*) AS n
           FROM charging_records GROUP BY device_id, record_id`,
      )
      .all() as Array<{
      device_id: string;
      record_id: string;
      energy: number;
      start_ms: number;
      n: number;
    }>) {
      recs.set(recKey({ deviceId: r.device_id, record_id: r.record_id }), r);
    }
    const lostRecords = [...ledger.records.values()].filter((r) => {
      const got = recs.get(recKey(r));
      return !got || got.energy !== r.energy || got.start_ms !== Date.parse(r.start_time);
    });
    expectNone(lostRecords, `${label}: acknowledged charging records lost or altered`);
    expect(
      [...recs.entries()].filter(([, r]) => r.n !== 1),
      `${label}: duplicated charging records`,
    ).toEqual([]);

    // Events: by (device_id, event_id), exactly once.
    const evs = new Map<string, { kind: string; n: number }>();
    for (const e of db
      .prepare(
        'SELECT device_id, event_id, MAX(kind) AS kind, COUNT(*) AS n FROM device_events GROUP BY device_id, event_id',
      )
      .all() as Array<{ device_id: string; event_id: string; kind: string; n: number }>) {
      evs.set(evKey({ deviceId: e.device_id, event_id: e.event_id }), e);
    }
    const lostEvents = [...ledger.events.values()].filter((e) => evs.get(evKey(e))?.kind !== e.kind);
    expectNone(lostEvents, `${label}: acknowledged events lost`);
    expect(
      [...evs.entries()].filter(([, e]) => e.n !== 1),
      `${label}: duplicated events`,
    ).toEqual([]);

    // Commands: each acknowledged command exists, never behind its acknowledged status, and a final status
    // once acknowledged is the stored one.
    const cmds = new Map<string, { device_id: string; status: string }>();
    for (const c of db.prepare('SELECT command_id, device_id, status FROM commands').all() as Array<{
      command_id: string;
      device_id: string;
      status: string;
    }>) {
      cmds.set(c.command_id, c);
    }
    const badCommands: unknown[] = [];
    for (const [id, acked] of ledger.commands) {
      const got = cmds.get(id);
      if (
        !got ||
        got.device_id !== acked.deviceId ||
        RANK[got.status]! < RANK[acked.status]! ||
        (FINAL.has(acked.status) && got.status !== acked.status)
      ) {
        badCommands.push({ id, acked, got });
      }
    }
    expectNone(badCommands, `${label}: acknowledged commands lost or moved backwards`);

    // Histories: start queued, move strictly forward in time order, and end at the command's status.
    const history = new Map<string, Array<{ status: string; at_ms: number }>>();
    for (const h of db
      .prepare('SELECT command_id, status, at_ms FROM command_history ORDER BY command_id, rowid')
      .all() as Array<{ command_id: string; status: string; at_ms: number }>) {
      const list = history.get(h.command_id) ?? [];
      list.push(h);
      history.set(h.command_id, list);
    }
    const badHistories: unknown[] = [];
    for (const [id, c] of cmds) {
      const h = history.get(id) ?? [];
      const ordered = h.every(
        (x, i) => i === 0 || (RANK[x.status]! > RANK[h[i - 1]!.status]! && x.at_ms >= h[i - 1]!.at_ms),
      );
      if (h.length === 0 || h[0]!.status !== 'queued' || !ordered || h[h.length - 1]!.status !== c.status)
        badHistories.push({ id, status: c.status, history: h.map((x) => x.status) });
    }
    expectNone(badHistories, `${label}: inconsistent command histories`);
    expect(
      db
        .prepare(
          'SELECT command_id FROM command_history WHERE command_id NOT IN (SELECT command_id FROM commands)',
        )
        .all(),
      `${label}: history of unknown commands`,
    ).toEqual([]);

    // Heartbeats: the device row holds at least the latest acknowledged heartbeat.
    const hb = new Map(
      (
        db.prepare('SELECT device_id, last_heartbeat_ms FROM devices').all() as Array<{
          device_id: string;
          last_heartbeat_ms: number | null;
        }>
      ).map((d) => [d.device_id, d.last_heartbeat_ms ?? 0]),
    );
    const lostHeartbeats = [...ledger.heartbeats].filter(([d, ms]) => (hb.get(d) ?? 0) < ms);
    expectNone(lostHeartbeats, `${label}: acknowledged heartbeats lost`);
  } finally {
    db.close();
  }
}

// ---------------------------------------------------------------------------------------------------------
// 1. SIGKILL under load

/** The uploads' payloads: telemetry timestamps and record and event ids from counters, values from `rng`. */
export function payloadsOf(rng: () => number, pick: <T>(xs: readonly T[]) => T) {
  let tsCounter = 0;
  let idCounter = 0;
  const telemetryOf = (c: Charger): TelemetrySent => {
    tsCounter++;
    return {
      deviceId: c.deviceId,
      connector_id: 1 + (tsCounter % 2),
      ts: TELEMETRY_EPOCH_MS + tsCounter * 1000,
      power: Math.round(rng() * 22_000) / 1000,
    };
  };
  const telemetryBody = (t: TelemetrySent) => ({
    timestamp: new Date(t.ts).toISOString(),
    connector_id: t.connector_id,
    state: 'charging',
    power: t.power,
    voltage: 230,
  });
  const recordOf = (c: Charger): RecordSent => {
    idCounter++;
    const start = TELEMETRY_EPOCH_MS + idCounter * 3_600_000;
    return {
      deviceId: c.deviceId,
      record_id: `rec-${idCounter}`,
      connector_id: 1 + (idCounter % 2),
      start_time: new Date(start).toISOString(),
      end_time: new Date(start + 1_800_000).toISOString(),
      energy: Math.round(rng() * 50_000) / 1000,
    };
  };
  const recordBody = (r: RecordSent) => ({
    record_id: r.record_id,
    connector_id: r.connector_id,
    start_time: r.start_time,
    end_time: r.end_time,
    energy: r.energy,
  });
  const eventOf = (c: Charger): EventSent => {
    idCounter++;
    return {
      deviceId: c.deviceId,
      event_id: `evt-${idCounter}`,
      kind: pick(['vehicle_plugged', 'session_started', 'session_ended', 'fault_cleared']),
      timestamp: new Date(TELEMETRY_EPOCH_MS + idCounter * 1000).toISOString(),
    };
  };
  const eventBody = (e: EventSent) => ({ event_id: e.event_id, kind: e.kind, timestamp: e.timestamp });
  return { telemetryOf, telemetryBody, recordOf, recordBody, eventOf, eventBody };
}

/** An acknowledged heartbeat: its time in the ledger, its commands delivered to the charger (`received`). */
export function noteHeartbeat(
  { ledger, received }: { ledger: Ledger; received: Map<string, Map<string, string>> },
  c: Charger,
  res: HttpResult,
): void {
  ledger.heartbeats.set(
    c.deviceId,
    Math.max(ledger.heartbeats.get(c.deviceId) ?? 0, Date.parse(res.body.data.server_time)),
  );
  for (const cmd of res.body.data.commands as Array<{ command_id: string }>) {
    ledger.ackCommand(cmd.command_id, c.deviceId, 'delivered');
    const mine = received.get(c.deviceId)!;
    if (!mine.has(cmd.command_id)) mine.set(cmd.command_id, 'delivered');
  }
}
