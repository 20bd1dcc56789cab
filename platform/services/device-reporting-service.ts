import type {
  ChargingRecordUpload,
  DeviceEvent,
  FirmwareStatusReport,
  HeartbeatRequest,
  PendingCommand,
  TelemetryRecord,
} from '../../shared/index.js';
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
    /** Stores events (idempotent on event_id); new faults go to the webhooks. */
    events(deviceId: string, events: readonly DeviceEvent[]) {
      return store.insertEvents(
        deviceId,
        events.map((e) => ({
          event_id: e.event_id,
          kind: e.kind,
          severity: e.severity,
          connector_id: e.connector_id ?? null,
          ts_ms: Date.parse(e.timestamp),
          message: e.message ?? null,
          data: e.data ?? null,
        })),
        deps.now(),
        webhooks.wants('device.fault')
          ? (stored) => webhooks.deviceEvents(deviceId, events, stored)
          : undefined,
      );
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
    async firmwareStatus(deviceId: string, report: FirmwareStatusReport): Promise<void> {
      await store.recordFirmwareStatus(
        deviceId,
        {
          status: report.status,
          version: report.version,
          progress: report.progress,
          message: report.message,
          ts_ms: Date.parse(report.timestamp),
        },
        deps.now(),
      );
      webhooks.firmwareStatus(deviceId, report);
    },
  };
}
export type DeviceReportingService = ReturnType<typeof createDeviceReportingService>;
