import { expect } from 'vitest';
import type { Charger } from './fault-chargers.js';
import {
  evKey,
  type Ledger,
  noteHeartbeat,
  type payloadsOf,
  RANK,
  type RoundStats,
  recKey,
  telKey,
} from './kill-ledger.js';
import type { HttpClient } from './platform.js';

/**
 * The checks after each restart of the SIGKILL rounds of platform-faults.test.ts: pending commands come back (at
 * least once) but never one acknowledged as final, and replaying uploads is idempotent — acknowledged ones count
 * as duplicates, unanswered ones land once.
 */

/** The part of the load's state the checks read and update (kill-load.ts). */
export interface ReplayState {
  chargers: Charger[];
  ledger: Ledger;
  received: Map<string, Map<string, string>>;
  payloads: ReturnType<typeof payloadsOf>;
}

export async function afterRestart(st: ReplayState, h: HttpClient, round: RoundStats): Promise<void> {
  const { ledger, chargers } = st;
  for (const c of chargers) {
    const res = await h.post('/v1/device/heartbeat', {
      token: c.token,
      json: { timestamp: new Date().toISOString(), status: 'online', fault_code: 0 },
    });
    expect(res.status, res.text).toBe(200);
    const redelivered = new Set(
      (res.body.data.commands as Array<{ command_id: string }>).map((x) => x.command_id),
    );
    const reportedRedelivered = [...redelivered].filter(
      (id) => RANK[ledger.commands.get(id)?.status ?? 'queued']! >= 2,
    );
    expect(reportedRedelivered, 'a command acknowledged as accepted or final was delivered again').toEqual(
      [],
    );
    const pending = [...ledger.commands]
      .filter(
        ([id, x]) => x.deviceId === c.deviceId && RANK[x.status]! <= 1 && !ledger.unansweredReports.has(id),
      )
      .map(([id]) => id);
    expect(
      pending.filter((id) => !redelivered.has(id)),
      'pending commands not delivered again',
    ).toEqual([]);
    noteHeartbeat(st, c, res);
    await replayUploads(st, h, c, round);
  }
  ledger.unansweredRecords = [];
  ledger.unansweredEvents = [];
  ledger.unansweredTelemetry = [];
}

/** Replays a charger's acknowledged uploads (all duplicates) and its unanswered ones (each lands once). */
async function replayUploads(st: ReplayState, h: HttpClient, c: Charger, round: RoundStats): Promise<void> {
  const { ledger } = st;
  const { recordBody, eventBody, telemetryBody } = st.payloads;
  const replay = async <T>(
    path: string,
    field: string,
    items: T[],
    body: (x: T) => unknown,
    max: number,
  ): Promise<{ accepted: number; duplicates: number }> => {
    const sum = { accepted: 0, duplicates: 0 };
    for (let i = 0; i < items.length; i += max) {
      const chunk = items.slice(i, i + max);
      const r = await h.post(path, { token: c.token, json: { [field]: chunk.map(body) } });
      expect(r.status, r.text).toBe(200);
      sum.accepted += r.body.data.accepted;
      sum.duplicates += r.body.data.duplicates;
    }
    return sum;
  };
  const mineOnly = <T extends { deviceId: string }>(xs: Iterable<T>) =>
    [...xs].filter((x) => x.deviceId === c.deviceId);

  // Acknowledged charging records, replayed: all duplicates, none stored again.
  const ackedRecords = mineOnly(ledger.records.values()).slice(-100);
  if (ackedRecords.length > 0) {
    const again = await replay('/v1/device/charging-records', 'records', ackedRecords, recordBody, 100);
    expect(again).toEqual({ accepted: 0, duplicates: ackedRecords.length });
    round.replayed += ackedRecords.length;
  }
  // Unanswered ones (in flight at the kill), replayed as an agent's outbox would: each lands once.
  const lostRecords = mineOnly(ledger.unansweredRecords);
  if (lostRecords.length > 0) {
    const again = await replay('/v1/device/charging-records', 'records', lostRecords, recordBody, 100);
    expect(again.accepted + again.duplicates).toBe(lostRecords.length);
    for (const r of lostRecords) ledger.records.set(recKey(r), r);
  }
  const lostEvents = mineOnly(ledger.unansweredEvents);
  const ackedEvents = mineOnly(ledger.events.values()).slice(-50);
  if (ackedEvents.length > 0) {
    const again = await replay('/v1/device/events', 'events', ackedEvents, eventBody, 100);
    expect(again).toEqual({ accepted: 0, duplicates: ackedEvents.length });
  }
  if (lostEvents.length > 0) {
    const again = await replay('/v1/device/events', 'events', lostEvents, eventBody, 100);
    expect(again.accepted + again.duplicates).toBe(lostEvents.length);
    for (const e of lostEvents) ledger.events.set(evKey(e), e);
  }
  const ackedTelemetry = mineOnly(ledger.telemetry.values()).slice(-300);
  if (ackedTelemetry.length > 0) {
    const again = await replay('/v1/device/telemetry/batch', 'records', ackedTelemetry, telemetryBody, 500);
    expect(again).toEqual({ accepted: 0, duplicates: ackedTelemetry.length });
  }
  const lostTelemetry = mineOnly(ledger.unansweredTelemetry);
  if (lostTelemetry.length > 0) {
    const again = await replay('/v1/device/telemetry/batch', 'records', lostTelemetry, telemetryBody, 500);
    expect(again.accepted + again.duplicates).toBe(lostTelemetry.length);
    for (const t of lostTelemetry) ledger.telemetry.set(telKey(t), t);
  }
}
