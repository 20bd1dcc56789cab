import { expect } from 'vitest';
import type { OutboxItem } from '../../agent/store/outbox.js';
import type { ChargingRecordUpload, DeviceEvent, TelemetryRecord } from '../../shared/device-api.js';
import type { Charger } from './offline-chargers.js';
import type { TestPlatform } from './platform.js';
import { openStoredData } from './stored-data.js';

/**
 * After the platform of agent-30-days-offline.test.ts returns: everything owed reached it once, in order — each
 * kind in the order it was produced, no request reporting a duplicate — and its store holds it all.
 */

export interface Returned {
  /** The platform back on the same data, its data directory and the tenant's operator. */
  back: TestPlatform;
  platformDir: string;
  operatorId: string;
  outageAt: number;
  returnedAt: number;
  /** Per charger, how many exchanges it had made before the platform returned. */
  sentBefore: Map<Charger, number>;
  owed: Map<Charger, OutboxItem[]>;
}

export async function expectDeliveredOnce(chargers: Charger[], returned: Returned): Promise<void> {
  for (const c of chargers) {
    const items = returned.owed.get(c) ?? [];
    const owedTelemetry = expectSentOnce(c, items, returned.sentBefore.get(c));
    await expectStoredOnce(c, items, owedTelemetry, returned);
  }
}

/** Each owed item sent once, in order, none a duplicate on arrival; returns the owed telemetry's timestamps. */
function expectSentOnce(c: Charger, items: OutboxItem[], sentBefore: number | undefined): string[] {
  const name = c.plan.name;
  const sent = c.exchanges.slice(sentBefore).filter((x) => x.status >= 200 && x.status < 300);
  const posted = (p: string) => sent.filter((x) => x.method === 'POST' && x.path.endsWith(p));
  // Telemetry: every owed record in one accepted batch, in order, none a duplicate on arrival.
  const batches = posted('/v1/device/telemetry/batch');
  for (const b of batches) expect((b.answer as { data: { duplicates: number } }).data.duplicates).toBe(0);
  const sentTelemetry = batches.flatMap((b) =>
    (b.body as { records: TelemetryRecord[] }).records.map((r) => r.timestamp),
  );
  const owedTelemetry = items
    .filter((i) => i.kind === 'telemetry')
    .map((i) => (i.payload as TelemetryRecord).timestamp);
  expect(sentTelemetry.slice(0, owedTelemetry.length), name).toEqual(owedTelemetry);
  // Over the whole run, no telemetry record went out twice, and each went out after the ones before it.
  const everything = c.exchanges
    .filter((x) => x.status === 200 && x.method === 'POST' && x.path.includes('/v1/device/telemetry'))
    .flatMap((x) =>
      x.path.endsWith('/batch')
        ? (x.body as { records: TelemetryRecord[] }).records.map((r) => Date.parse(r.timestamp))
        : [Date.parse((x.body as TelemetryRecord).timestamp)],
    );
  expect(
    everything.every((t, i) => i === 0 || t > (everything[i - 1] as number)),
    name,
  ).toBe(true);
  // Events and charging records: each owed one sent once, in order, none a duplicate on arrival.
  for (const [kind, p, key, list] of [
    ['event', '/v1/device/events', 'event_id', 'events'],
    ['charging_record', '/v1/device/charging-records', 'record_id', 'records'],
  ] as const) {
    const uploads = posted(p);
    for (const u of uploads) expect((u.answer as { data: { duplicates: number } }).data.duplicates).toBe(0);
    const ids = uploads.flatMap((u) =>
      ((u.body as Record<string, Array<Record<string, string>>>)[list] ?? []).map((e) => e[key]),
    );
    const owedIds = items
      .filter((i) => i.kind === kind)
      .map((i) => (i.payload as Record<string, string>)[key]);
    expect(ids.slice(0, owedIds.length), `${name} ${kind}`).toEqual(owedIds);
    expect(new Set(ids).size, `${name} ${kind}`).toBe(ids.length);
  }
  return owedTelemetry;
}

async function expectStoredOnce(
  c: Charger,
  items: OutboxItem[],
  owedTelemetry: string[],
  { back, platformDir, operatorId, outageAt, returnedAt }: Returned,
): Promise<void> {
  const name = c.plan.name;
  // And the platform holds it all, stored in the order it came: the owed telemetry of the 30 days and
  // nothing that was dropped, every owed event, every charging record.
  const stored = await openStoredData(platformDir);
  try {
    const rows = await stored.all<{ ts_ms: number | string }>(
      'SELECT ts_ms FROM telemetry WHERE device_id = ? AND ts_ms >= ? AND ts_ms < ? ORDER BY id',
      [c.deviceId, outageAt, returnedAt],
    );
    expect(
      rows.map((r) => new Date(Number(r.ts_ms)).toISOString()),
      name,
    ).toEqual(owedTelemetry.filter((t) => Date.parse(t) < returnedAt));
    const owedEvents = items
      .filter((i) => i.kind === 'event')
      .map((i) => (i.payload as DeviceEvent).event_id);
    const owedSet = new Set(owedEvents);
    const events = await stored.all<{ event_id: string }>(
      'SELECT event_id FROM device_events WHERE device_id = ? ORDER BY id',
      [c.deviceId],
    );
    expect(
      events.map((e) => e.event_id).filter((id) => owedSet.has(id)),
      name,
    ).toEqual(owedEvents);
  } finally {
    await stored.close();
  }
  const records = await back.store.listChargingRecords([operatorId], {
    device_id: c.deviceId,
    page: 1,
    size: 100,
  });
  const owedRecords = items
    .filter((i) => i.kind === 'charging_record')
    .map((i) => i.payload as ChargingRecordUpload);
  expect(records.items.map((r) => r.record_id).sort()).toEqual(owedRecords.map((r) => r.record_id).sort());
  for (const r of owedRecords) {
    expect(records.items.find((x) => x.record_id === r.record_id)).toMatchObject({
      energy: r.energy,
      start_time: r.start_time,
      end_time: r.end_time,
    });
  }
}
