import type {
  ArtifactKind,
  ChargingRecordUpload,
  DeviceEvent,
  FirmwareStatusReport,
  HeartbeatRequest,
  PendingCommand,
  TelemetryRecord,
} from '../../shared/index.js';
import { agentVersionFromEvents, versionsFromFirmwareReport } from '../domain/inventory.js';
import { changedKeys, configurationFromEvents } from '../domain/maintenance.js';
import type { Store } from '../storage/store.js';
import type { CommandNotifier } from './command-notifier.js';
import type { CommandService } from './command-service.js';
import type { Liveness } from './liveness.js';
import type { PlatformEvents } from './platform-events.js';
import type { WebhookEvents } from './webhook-events.js';

export interface DeviceReportingServiceDeps {
  store: Store;
  commands: CommandService;
  notifier: CommandNotifier;
  liveness: Liveness;
  events: PlatformEvents;
  webhooks: WebhookEvents;
  now: () => number;
  /**
   * The kind (agent or firmware) of a charger's update, for an `installed` report that names one
   * (domain/inventory.ts): the update service's, undefined when the charger was sent no such update.
   */
  updateKindOf?: (deviceId: string, updateId: string) => Promise<ArtifactKind | undefined>;
}

/** Pending commands and the instant they were read (the answer's `server_time`). */
export interface CommandsAnswer {
  commands: PendingCommand[];
  atMs: number;
}

/**
 * What a charger reports (DESIGN.md §7, §12): heartbeats, telemetry, events, charging records and firmware
 * status, and its polls for commands. Each report is stored first; the live stream and webhooks hear only of
 * what storage accepted, after it committed.
 */
export function createDeviceReportingService(deps: DeviceReportingServiceDeps) {
  const { store, commands, liveness, webhooks } = deps;

  /**
   * Keeps a configuration report unless a newer one is stored; a kept one whose values moved is a
   * `device.configuration_changed` (the previous one is read only when someone wants that).
   */
  async function recordConfiguration(
    deviceId: string,
    configuration: { values: Record<string, string | number | boolean>; reported_at_ms: number },
  ): Promise<void> {
    const wanted = webhooks.wants('device.configuration_changed');
    const previous = wanted ? await store.getConfiguration(deviceId) : undefined;
    const kept = await store.recordConfiguration(deviceId, configuration);
    if (!kept || !wanted) return;
    const changed = changedKeys(previous?.values, configuration.values);
    if (changed.length > 0)
      webhooks.configurationChanged(deviceId, configuration.values, changed, configuration.reported_at_ms);
  }

  return {
    /** Stores the heartbeat and answers the pending commands; a charger going offline gets none. */
    async heartbeat(deviceId: string, hb: HeartbeatRequest): Promise<CommandsAnswer> {
      const t = deps.now();
      if (hb.status === 'offline') liveness.markOffline(deviceId, t);
      await store.recordHeartbeat(deviceId, { status: hb.status, fault_code: hb.fault_code, atMs: t });
      // A charger going offline gets no commands: it would not be there to run them.
      return { commands: hb.status === 'offline' ? [] : await commands.takePending(deviceId, t), atMs: t };
    },
    /**
     * The long poll: pending commands at once, or as soon as one is queued, or none after `waitMs`. `signal`
     * ends the wait early (the charger hung up). It subscribes before it reads, so no command slips between.
     */
    async pollCommands(deviceId: string, waitMs: number, signal: AbortSignal): Promise<CommandsAnswer> {
      const waiter = waitMs > 0 ? deps.notifier.subscribe(deviceId) : undefined;
      let pending = await commands.takePending(deviceId, deps.now());
      if (pending.length === 0 && waiter) {
        if (await waiter.wait(waitMs, signal)) pending = await commands.takePending(deviceId, deps.now());
      } else {
        waiter?.cancel();
      }
      return { commands: pending, atMs: deps.now() };
    },
    /** Stores telemetry (exact repeats ignored) and streams it when anything was new; answers how many. */
    async telemetry(deviceId: string, records: readonly TelemetryRecord[]): Promise<number> {
      const accepted = await store.recordTelemetry(deviceId, records, deps.now());
      if (accepted > 0) deps.events.telemetry(deviceId, records);
      return accepted;
    },
    /**
     * Stores events (idempotent on event_id); new faults go to the webhooks, a new `boot` event's
     * `data.version` becomes the device's `agent_version`, and the newest `configuration_reported` event becomes
     * the device's reported configuration unless a newer one is stored (DESIGN.md §20).
     */
    async events(deviceId: string, events: readonly DeviceEvent[]) {
      const rows = events.map((e) => ({
        event_id: e.event_id,
        kind: e.kind,
        severity: e.severity,
        connector_id: e.connector_id ?? null,
        ts_ms: Date.parse(e.timestamp),
        message: e.message ?? null,
        data: e.data ?? null,
      }));
      const faults = webhooks.wants('device.fault');
      const boots = rows.some((r) => r.kind === 'boot');
      let fresh: ReadonlySet<string> = new Set();
      const outcome = await store.insertEvents(
        deviceId,
        rows,
        deps.now(),
        faults || boots
          ? (stored) => {
              fresh = new Set(stored);
              if (faults) webhooks.deviceEvents(deviceId, events, stored);
            }
          : undefined,
      );
      // Only new boots: a replayed one (the outbox after an outage) must not bring an old version back.
      const agentVersion = boots
        ? agentVersionFromEvents(rows.filter((r) => fresh.has(r.event_id)))
        : undefined;
      if (agentVersion !== undefined)
        await store.setDeviceVersions(deviceId, { agent_version: agentVersion });
      // Replays too: the store keeps only a newer report, and a retry after a failure here must still land.
      const configuration = configurationFromEvents(rows);
      if (configuration) await recordConfiguration(deviceId, configuration);
      return outcome;
    },
    /** Stores charging records (idempotent on record_id); answers how many were new. */
    chargingRecords(deviceId: string, records: readonly ChargingRecordUpload[]) {
      return store.insertChargingRecords(
        records.map((r) => ({ ...r, device_id: deviceId })),
        webhooks.wants('charging_record.created')
          ? (stored) => webhooks.chargingRecords(deviceId, records, stored)
          : undefined,
      );
    },
    /**
     * Stores a firmware report, with the versions it implies (domain/inventory.ts), and sends the webhook. A
     * report whose `report_id` is already stored for the charger is answered the same and changes nothing.
     */
    async firmwareStatus(deviceId: string, report: FirmwareStatusReport): Promise<void> {
      const kind =
        report.status === 'installed' && report.update_id !== undefined
          ? await deps.updateKindOf?.(deviceId, report.update_id)
          : undefined;
      const stored = await store.recordFirmwareStatus(
        deviceId,
        {
          status: report.status,
          version: report.version ?? null,
          progress: report.progress ?? null,
          message: report.message ?? null,
          update_id: report.update_id ?? null,
          report_id: report.report_id ?? null,
          ts_ms: Date.parse(report.timestamp),
        },
        deps.now(),
        versionsFromFirmwareReport(report, kind),
      );
      if (stored) webhooks.firmwareStatus(deviceId, report);
    },
  };
}
export type DeviceReportingService = ReturnType<typeof createDeviceReportingService>;
