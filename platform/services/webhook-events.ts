import type { FastifyBaseLogger } from 'fastify';
import type {
  ChargingRecord,
  DeviceEvent,
  FirmwareStatusReport,
  TelemetryRecord,
  WebhookEventType,
} from '../../shared/index.js';
import { toTimestamp } from '../../shared/index.js';
import { mayFollowControl } from '../domain/flexibility.js';
import { newId } from '../domain/ids.js';
import type {
  ControlRow,
  DeviceRow,
  DiagnosticsRow,
  NewDelivery,
  Store,
  UpdateRow,
  WebhookRow,
} from '../storage/store.js';
import type { PlatformEvents } from './platform-events.js';
import type { PrincipalDirectory } from './principal-directory.js';

export interface WebhookEventsOptions {
  store: Store;
  directory: PrincipalDirectory;
  now: () => number;
  log: FastifyBaseLogger;
  /** Told after deliveries are queued. */
  onQueued: () => void;
  /** How often the endpoints are read again (changes made on other instances), ms. */
  reloadMs?: number;
}

type Data = Record<string, unknown>;
/** Device events of these severities are also sent as `device.fault`. */
const FAULT_SEVERITIES = new Set(['error', 'critical']);

/**
 * Turns what happens on the platform into queued webhook deliveries (DESIGN.md §14): one delivery per event
 * and endpoint whose client may see the device. An event is queued right after the change it reports has
 * been committed, together with the others of the same turn of the event loop in one insert, and is never
 * awaited by the request that caused it. Nothing is queued, and nothing built, for a type no endpoint wants.
 */
export function createWebhookEvents(opts: WebhookEventsOptions) {
  const { store, directory, now, log } = opts;
  let endpoints: WebhookRow[] = [];
  let wanted = new Set<string>();
  let pending: NewDelivery[] = [];
  let flushing: Promise<void> | undefined;
  let loading: Promise<void> | undefined;
  /** The last state this instance saw of each connector (`device:connector`), while someone wants changes. */
  const connectorStates = new Map<string, string>();

  let reloadAfter: Promise<void> | undefined;
  const load = () =>
    store
      .enabledWebhooks()
      .then((rows) => {
        endpoints = rows;
        wanted = new Set(rows.flatMap((r) => r.events));
        if (!wants('connector.state_changed')) connectorStates.clear();
      })
      .catch((err: unknown) => log.warn({ err }, 'webhook endpoints not reloaded'))
      .finally(() => {
        loading = undefined;
      });
  /** Reads the endpoints; a read already running may predate the caller's change, so another follows it. */
  const reload = (): Promise<void> => {
    if (!loading) {
      loading = load();
      return loading;
    }
    reloadAfter ??= loading.then(() => {
      reloadAfter = undefined;
      return reload();
    });
    return reloadAfter;
  };
  const timer = setInterval(() => void reload(), opts.reloadMs ?? 5_000);
  timer.unref();

  function wants(type: WebhookEventType): boolean {
    return wanted.has(type) || wanted.has('*');
  }

  function maySee(hook: WebhookRow, deviceId: string | null): boolean {
    if (deviceId === null) return true;
    const operator = directory.device(deviceId)?.operator_id;
    if (!operator) return false;
    return directory.client(hook.client_id)?.operator_ids.includes(operator) ?? false;
  }

  function queue(hooks: readonly WebhookRow[], type: WebhookEventType, data: Data, atMs: number): void {
    if (hooks.length === 0) return;
    const created = now();
    const payload = JSON.stringify({ type, timestamp: toTimestamp(atMs), data });
    for (const h of hooks)
      pending.push({
        delivery_id: newId('msg'),
        webhook_id: h.webhook_id,
        type,
        payload,
        created_ms: created,
      });
    flushing ??= nextTurn().then(flush);
  }

  /** Queues `type` for every endpoint that subscribes to it and whose client may see `deviceId`. */
  function emit(type: WebhookEventType, deviceId: string, data: Data, atMs: number = now()): void {
    if (!wants(type)) return;
    const hooks = endpoints.filter(
      (h) => (h.events.includes(type) || h.events.includes('*')) && maySee(h, deviceId),
    );
    queue(hooks, type, data, atMs);
  }

  async function flush(): Promise<void> {
    const rows = pending;
    pending = [];
    try {
      await store.enqueueDeliveries(rows);
      opts.onQueued();
    } catch (err) {
      log.error({ err, lost: rows.length }, 'webhook deliveries could not be queued');
    } finally {
      flushing = pending.length > 0 ? nextTurn().then(flush) : undefined;
    }
  }

  /** What the stream also hears: telemetry (for connector state changes), liveness, command statuses. */
  const platformEvents: PlatformEvents = {
    telemetry(deviceId: string, records: readonly TelemetryRecord[]) {
      if (!wants('connector.state_changed')) return;
      for (const r of records) {
        const key = `${deviceId}:${r.connector_id}`;
        const before = connectorStates.get(key);
        if (before === r.state) continue;
        connectorStates.set(key, r.state);
        // The first state this instance sees of a connector is where it starts, not a change.
        if (before === undefined) continue;
        const at = Date.parse(r.timestamp);
        emit(
          'connector.state_changed',
          deviceId,
          {
            device_id: deviceId,
            connector_id: r.connector_id,
            state: r.state,
            previous_state: before,
            at: toTimestamp(at),
          },
          at,
        );
      }
    },
    deviceStatus(deviceId, status, atMs) {
      emit(`device.${status}`, deviceId, { device_id: deviceId, status, at: toTimestamp(atMs) }, atMs);
    },
    commandStatus(c, atMs) {
      if (c.status === 'queued') return;
      const data: Data = {
        command_id: c.command_id,
        device_id: c.device_id,
        command: c.command,
        status: c.status,
        at: toTimestamp(atMs),
      };
      if (c.reason) data.reason = c.reason;
      emit('command.status_changed', c.device_id, data, atMs);
    },
  };

  return {
    /** Reads the endpoints now; the server awaits it once at start. */
    reload,
    platformEvents,
    wants,
    /** Look for due deliveries now (a redelivery). */
    nudge: opts.onQueued,
    deviceRegistered(row: DeviceRow, atMs: number) {
      if (!wants('device.registered')) return;
      const data: Data = { device_id: row.device_id, sn: row.sn };
      if (row.model !== null) data.model = row.model;
      if (row.manufacturer !== null) data.manufacturer = row.manufacturer;
      if (row.firmware_version !== null) data.firmware_version = row.firmware_version;
      if (row.agent_version !== null) data.agent_version = row.agent_version;
      if (row.site_id !== null) data.site_id = row.site_id;
      emit('device.registered', row.device_id, data, atMs);
    },
    /** Records of one charger's upload; only those `storedIds` names were new. */
    chargingRecords(
      deviceId: string,
      records: ReadonlyArray<Omit<ChargingRecord, 'device_id'>>,
      storedIds: readonly string[],
    ) {
      const fresh = new Set(storedIds);
      for (const r of records) {
        if (!fresh.has(r.record_id)) continue;
        const { record_id, ...rest } = r;
        emit(
          'charging_record.created',
          deviceId,
          { record_id, device_id: deviceId, ...rest },
          Date.parse(r.end_time),
        );
      }
    },
    /** A charger's newly kept configuration report, when its values differ from the one before (DESIGN.md §20). */
    configurationChanged(
      deviceId: string,
      values: Readonly<Record<string, string | number | boolean>>,
      changed: readonly string[],
      reportedAtMs: number,
    ) {
      emit(
        'device.configuration_changed',
        deviceId,
        { device_id: deviceId, values, changed, reported_at: toTimestamp(reportedAtMs) },
        reportedAtMs,
      );
    },
    firmwareStatus(deviceId: string, report: FirmwareStatusReport) {
      emit(
        'firmware.status_changed',
        deviceId,
        { device_id: deviceId, ...report },
        Date.parse(report.timestamp),
      );
    },
    /** Events of one charger's upload, as uploaded; those of severity `error` or `critical` are faults. */
    deviceEvents(deviceId: string, events: readonly DeviceEvent[], storedIds: readonly string[]) {
      const fresh = new Set(storedIds);
      for (const e of events) {
        if (!FAULT_SEVERITIES.has(e.severity) || !fresh.has(e.event_id)) continue;
        emit('device.fault', deviceId, { device_id: deviceId, ...e }, Date.parse(e.timestamp));
      }
    },
    /** A control's new status, to the endpoints whose client may follow it (sees every operator it reaches). */
    controlStatus(control: ControlRow, atMs: number) {
      if (!wants('control.status_changed')) return;
      const hooks = endpoints.filter(
        (h) =>
          (h.events.includes('control.status_changed') || h.events.includes('*')) &&
          mayFollowControl(control.operator_ids, directory.client(h.client_id)?.operator_ids ?? []),
      );
      const data: Data = {
        control_id: control.control_id,
        status: control.status,
        command: control.command,
        target_type: control.target_type,
        target_ids: control.target_ids,
        created_at: toTimestamp(control.created_ms),
        ends_at: toTimestamp(control.ends_ms),
        at: toTimestamp(atMs),
      };
      queue(hooks, 'control.status_changed', data, atMs);
    },
    /** An update's new status, to the endpoints whose client acts for the update's operator. */
    updateStatus(update: UpdateRow, progress: Record<string, number>, atMs: number) {
      if (!wants('update.status_changed')) return;
      const hooks = endpoints.filter(
        (h) =>
          (h.events.includes('update.status_changed') || h.events.includes('*')) &&
          (directory.client(h.client_id)?.operator_ids ?? []).includes(update.operator_id),
      );
      const data: Data = {
        update_id: update.update_id,
        status: update.status,
        artifact: {
          artifact_id: update.artifact_id,
          kind: update.artifact_kind,
          version: update.artifact_version,
        },
        progress,
        at: toTimestamp(atMs),
      };
      if (update.reason !== null) data.reason = update.reason;
      queue(hooks, 'update.status_changed', data, atMs);
    },
    /** A diagnostics archive became available (DESIGN.md §20): once, by the instance that checked it. */
    diagnosticsAvailable(row: DiagnosticsRow) {
      const data: Data = {
        diagnostics_id: row.diagnostics_id,
        device_id: row.device_id,
        size: row.size,
        sha256: row.sha256,
      };
      emit('diagnostics.available', row.device_id, data, row.updated_ms);
    },
    /** A test event to one endpoint, whatever it subscribes to; answers the queued delivery's id. */
    async test(hook: WebhookRow): Promise<string> {
      const created = now();
      const delivery: NewDelivery = {
        delivery_id: newId('msg'),
        webhook_id: hook.webhook_id,
        type: 'webhook.test',
        payload: JSON.stringify({
          type: 'webhook.test',
          timestamp: toTimestamp(created),
          data: { webhook_id: hook.webhook_id },
        }),
        created_ms: created,
      };
      await store.enqueueDeliveries([delivery]);
      opts.onQueued();
      return delivery.delivery_id;
    },
    /** Waits until everything emitted so far is queued (tests, shutdown). */
    async settled(): Promise<void> {
      while (flushing) await flushing;
    },
    async close(): Promise<void> {
      clearInterval(timer);
      while (flushing) await flushing;
      await loading;
    },
  };
}
export type WebhookEvents = ReturnType<typeof createWebhookEvents>;

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
