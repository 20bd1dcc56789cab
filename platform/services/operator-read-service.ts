import type * as z from 'zod';
import {
  type ChargingRecordsQuery,
  type Device,
  type DevicesQuery,
  decodeTelemetryCursor,
  ENERGY_INTERVAL_MS,
  type EnergyQuery,
  ONLINE_WINDOW_SECONDS,
  type StoredEvent,
  type StoredFirmwareReport,
  type TelemetryHistoryPage,
  type TelemetryHistoryQuery,
  toTimestamp,
} from '../../shared/index.js';
import { rollupAlignedRange } from '../domain/energy-rollup.js';
import { energySeriesItems } from '../domain/energy-series.js';
import { averagedWindow, historyPage, historyRange } from '../domain/telemetry-history.js';
import type { Store, StoredEventRow, StoredFirmwareRow, TelemetryHistoryRow } from '../storage/store.js';
import { connectorViewsByDevice, deviceView } from './device-view.js';
import type { Liveness } from './liveness.js';
import type { Tenancy, TenantActor } from './tenancy.js';

export interface OperatorReadServiceDeps {
  store: Store;
  tenancy: Tenancy;
  liveness: Liveness;
  now: () => number;
}

/**
 * What an operator reads: sites, chargers with their connectors' live state, their events, charging records and
 * energy. Each read is limited to the actor's operators (tenancy.ts); nothing here writes.
 */
export function createOperatorReadService(deps: OperatorReadServiceDeps) {
  const { store, tenancy, liveness } = deps;
  const onlineSince = () => deps.now() - ONLINE_WINDOW_SECONDS * 1000;

  return {
    sites(actor: TenantActor, page: number, size: number) {
      return store.listSitesFor(actor.operatorIds, page, size);
    },
    async site(actor: TenantActor, siteId: string) {
      const site = await tenancy.site(actor, siteId);
      return { ...site, device_count: await store.countDevicesInSite(site.site_id) };
    },
    async devices(actor: TenantActor, query: DevicesQuery) {
      if (query.site_id) await tenancy.site(actor, query.site_id);
      // The status filter runs in SQL: last-seen times held in memory must reach the database first.
      if (query.status) await liveness.flush();
      const page = await store.listDevices(actor.operatorIds, query, onlineSince());
      const connectors = connectorViewsByDevice(
        await store.listConnectorsOf(page.items.map((d) => d.device_id)),
      );
      return {
        ...page,
        items: page.items.map((d) => deviceView(d, connectors.get(d.device_id) ?? [], liveness.isOnline(d))),
      };
    },
    async device(actor: TenantActor, deviceId: string): Promise<Device> {
      const device = await tenancy.device(actor, deviceId);
      const connectors = await store.listConnectors(device.device_id);
      return deviceView(device, connectors, liveness.isOnline(device));
    },
    async events(actor: TenantActor, deviceId: string, page: number, size: number) {
      await tenancy.device(actor, deviceId);
      const found = await store.listEvents(deviceId, page, size);
      return { ...found, items: found.items.map(storedEventView) };
    },
    /** The charger's firmware reports, newest first. */
    async firmwareReports(actor: TenantActor, deviceId: string, page: number, size: number) {
      await tenancy.device(actor, deviceId);
      const found = await store.listFirmwareStatus(deviceId, page, size);
      return { ...found, items: found.items.map(storedFirmwareView) };
    },
    chargingRecords(actor: TenantActor, query: ChargingRecordsQuery) {
      return store.listChargingRecords(actor.operatorIds, query);
    },
    /** A device's or a site's energy series, over the request's range widened to whole rollup buckets. */
    async energy(actor: TenantActor, query: EnergyQuery) {
      const deviceIds = query.device_id
        ? [(await tenancy.device(actor, query.device_id)).device_id]
        : await store.deviceIdsInSite((await tenancy.site(actor, query.site_id!)).site_id);
      // Energy is kept in 15-minute buckets: the series covers the request's range widened to them.
      const { startMs, endMs } = rollupAlignedRange(Date.parse(query.start_time), Date.parse(query.end_time));
      const intervalMs = ENERGY_INTERVAL_MS[query.interval];
      const buckets = await store.energyBuckets(deviceIds, startMs, endMs, intervalMs);
      return {
        ...(query.device_id ? { device_id: query.device_id } : { site_id: query.site_id }),
        interval: query.interval,
        start_time: toTimestamp(startMs),
        end_time: toTimestamp(endMs),
        items: energySeriesItems(buckets, { startMs, endMs, intervalMs }),
      };
    },
    /** A page of a charger's telemetry, raw or averaged, oldest first (DESIGN.md §21). */
    async telemetry(
      actor: TenantActor,
      deviceId: string,
      query: TelemetryHistoryQuery,
    ): Promise<TelemetryHistoryPage> {
      await tenancy.device(actor, deviceId);
      const range = historyRange(query, deps.now());
      const cursor = query.cursor === undefined ? undefined : decodeTelemetryCursor(query.cursor);
      const after = cursor && { tsMs: cursor.tsMs, connectorId: cursor.connectorId };
      const read = { deviceId, connectorId: query.connector_id, after, limit: query.limit + 1 };
      let rows: TelemetryHistoryRow[] = [];
      let windowEndMs = range.endMs;
      if (range.bucketMs === undefined) {
        rows = await store.telemetryHistory({ ...read, startMs: range.startMs, endMs: range.endMs });
      } else {
        const fromMs = Math.max(range.startMs, after?.tsMs ?? range.startMs);
        const first =
          fromMs < range.endMs
            ? await store.firstTelemetryAt(deviceId, query.connector_id, fromMs, range.endMs)
            : undefined;
        const bucketMs = range.bucketMs;
        const window = averagedWindow({ ...range, bucketMs }, fromMs, first, query.limit);
        if (window) {
          windowEndMs = window.endMs;
          rows = await store.telemetryHistory({ ...read, ...window, bucketMs });
        }
      }
      return {
        device_id: deviceId,
        resolution: query.resolution,
        start_time: toTimestamp(range.startMs),
        end_time: toTimestamp(range.endMs),
        ...historyPage(rows, { resolution: query.resolution, limit: query.limit, windowEndMs, range }),
      };
    },
  };
}
export type OperatorReadService = ReturnType<typeof createOperatorReadService>;

type StoredEventView = z.infer<typeof StoredEvent>;

/** A stored event as the operator API shows it: optional fields only when the charger sent them. */
export function storedEventView(e: StoredEventRow): StoredEventView {
  const out: StoredEventView = {
    device_id: e.device_id,
    event_id: e.event_id,
    kind: e.kind,
    severity: e.severity as StoredEventView['severity'],
    timestamp: toTimestamp(e.ts_ms),
    received_at: toTimestamp(e.received_ms),
  };
  if (e.connector_id !== null) out.connector_id = e.connector_id;
  if (e.message !== null) out.message = e.message;
  if (e.data !== null) out.data = e.data as StoredEventView['data'];
  return out;
}

type StoredFirmwareView = z.infer<typeof StoredFirmwareReport>;

/** A stored firmware report as the operator API shows it: optional fields only when the charger sent them. */
export function storedFirmwareView(r: StoredFirmwareRow): StoredFirmwareView {
  const out: StoredFirmwareView = {
    status: r.status as StoredFirmwareView['status'],
    timestamp: toTimestamp(r.ts_ms),
    received_at: toTimestamp(r.received_ms),
  };
  if (r.version !== null) out.version = r.version;
  if (r.progress !== null) out.progress = r.progress;
  if (r.message !== null) out.message = r.message;
  if (r.update_id !== null) out.update_id = r.update_id;
  if (r.report_id !== null) out.report_id = r.report_id;
  return out;
}
