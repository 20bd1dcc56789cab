import type {
  ChargingRecord,
  ChargingRecordsQuery,
  ChargingSchedule,
  CommandName,
  CommandStatus,
  DeviceCommandsQuery,
  HeartbeatStatus,
  PendingCommand,
  TelemetryMeasurement,
  TelemetryRecord,
} from '../../shared/index.js';
import type { EnergyBucket } from '../domain/energy.js';
import type { ArtifactRepository } from './artifact-repository.js';
import type { ClientRepository } from './client-repository.js';
import type { AvailabilityOf, CommandRow, NewCommand } from './command-types.js';
import type { ConfigurationRepository } from './configuration-repository.js';
import type { DeviceRepository, DeviceVersions } from './device-repository.js';
import type { DeviceSecretRepository } from './device-secret-repository.js';
import type { DiagnosticsRepository } from './diagnostics-repository.js';
import type { ClientEntry, DeviceEntry } from './directory-rows.js';
import type { EnrolmentRepository } from './enrolment-repository.js';
import type { Page } from './page.js';
import type { TelemetryHistoryRepository } from './telemetry-history-repository.js';
import type { UpdateRepository } from './update-repository.js';
import type { WebhookRepository } from './webhook-repository.js';

export interface OperatorRow {
  operator_id: string;
  name: string;
}
export interface SiteRow {
  site_id: string;
  operator_id: string;
  name: string;
  timezone: string;
}
/** A sample's measurements as stored: null where the record carried none. */
export type StoredMeasurements = { [K in TelemetryMeasurement]: number | null };
export type ConnectorRow = StoredMeasurements & {
  device_id: string;
  connector_id: number;
  max_power_kw: number | null;
  v2g_capable: boolean;
  /** False while an operator has taken the connector out of service (DESIGN.md §20). */
  available: boolean;
  state: string | null;
  last_telemetry_ms: number | null;
};
export interface ControlRow {
  control_id: string;
  client_id: string;
  target_type: 'site' | 'operator' | 'all';
  target_ids: string[];
  command: CommandName;
  params: Record<string, unknown>;
  status: 'executing' | 'completed' | 'cancelled';
  created_ms: number;
  ends_ms: number;
  /** The creating client's operators: who may follow the control. */
  operator_ids: string[];
}
export interface ScheduleRow {
  device_id: string;
  connector_id: number;
  schedule: ChargingSchedule;
  updated_ms: number;
}

export interface CommandHistoryRow {
  status: CommandStatus;
  at_ms: number;
  reason: string | null;
}
/** A command with every status change it went through, oldest first. */
export interface CommandWithHistory {
  command: CommandRow;
  history: CommandHistoryRow[];
}
/** A charger's report about one of its commands. */
export interface StatusReport {
  status: 'accepted' | 'rejected' | 'succeeded' | 'failed';
  reason?: string | undefined;
  result?: Record<string, unknown> | undefined;
}
export type StatusReportOutcome =
  | { outcome: 'not_found' }
  | { outcome: 'conflict'; status: CommandStatus }
  | { outcome: 'ok'; command: CommandRow; changed: boolean };
export interface ControlWithCommands {
  control: ControlRow;
  commands: Array<{ device_id: string; command_id: string; status: CommandStatus }>;
}
export interface StoredEventRow {
  device_id: string;
  event_id: string;
  kind: string;
  severity: string;
  connector_id: number | null;
  ts_ms: number;
  message: string | null;
  data: Record<string, unknown> | null;
  received_ms: number;
}
/** A stored firmware report (DESIGN.md §7, §19). */
export interface StoredFirmwareRow {
  status: string;
  version: string | null;
  progress: number | null;
  message: string | null;
  update_id: string | null;
  report_id: string | null;
  ts_ms: number;
  received_ms: number;
}
/** A firmware report to store: what the charger left out is absent or null. */
export type NewFirmwareReport = {
  [K in Exclude<keyof StoredFirmwareRow, 'status' | 'ts_ms' | 'received_ms'>]?:
    | StoredFirmwareRow[K]
    | undefined;
} & { status: string; ts_ms: number };
export interface MaintenanceStats {
  /** Rows deleted by retention since start, by kind. */
  pruned: Record<string, number>;
  retentionPasses: number;
  lastRetentionPassMs: number | null;
  lastRetentionPassDurationMs: number | null;
  /** Telemetry rows stored but not rolled up yet. */
  rollupLagRows: number;
}
/** A bucket of energy, as domain/energy.ts integrates it. */
export type EnergyBucketRow = EnergyBucket;

/** Operators, sites, clients (client-repository.ts), the principal directory, settings. */
export interface OperatorDirectory extends ClientRepository {
  createOperator(name: string): Promise<OperatorRow>;
  listOperators(): Promise<OperatorRow[]>;
  getOperator(operatorId: string): Promise<OperatorRow | undefined>;
  createSite(input: {
    operator_id: string;
    name: string;
    timezone: string;
    site_id?: string;
  }): Promise<SiteRow>;
  listSites(operatorId?: string): Promise<SiteRow[]>;
  getSite(siteId: string): Promise<SiteRow | undefined>;
  /** Everything the in-memory principal directory holds, for all devices and clients. */
  loadDirectory(): Promise<{ devices: DeviceEntry[]; clients: ClientEntry[] }>;
  loadDeviceEntry(deviceId: string): Promise<DeviceEntry | undefined>;
  loadClientEntry(clientId: string): Promise<ClientEntry | undefined>;
  setRequireSignature(kind: 'client' | 'device', id: string, required: boolean): Promise<boolean>;
  listSitesFor(
    operatorIds: readonly string[],
    page: number,
    size: number,
  ): Promise<Page<SiteRow & { device_count: number }>>;
  getSetting(key: string): Promise<string | undefined>;
  setSetting(key: string, value: string): Promise<void>;
  /** Bumped when another process (the admin CLI) changed the database. */
  externalChangeVersion(): number;
}

/** Connectors and their live state, telemetry, heartbeats and liveness. */
export interface TelemetryRepository {
  listConnectors(deviceId: string): Promise<ConnectorRow[]>;
  getConnector(deviceId: string, connectorId: number): Promise<ConnectorRow | undefined>;
  listConnectorsOf(deviceIds: readonly string[]): Promise<ConnectorRow[]>;
  /** Stores records (ignoring exact repeats) and returns how many were new. */
  recordTelemetry(deviceId: string, records: readonly TelemetryRecord[], receivedMs: number): Promise<number>;
  recordHeartbeat(
    deviceId: string,
    hb: { status: HeartbeatStatus; fault_code: number; atMs: number },
  ): Promise<void>;
  touchDevices(seen: ReadonlyMap<string, number>): Promise<void>;
}

/** Commands, schedules and flexibility controls (DESIGN.md §5): each change one atomic compare-and-set. */
export interface CommandRepository {
  enqueueCommands(commands: readonly NewCommand[], nowMs: number): Promise<CommandRow[]>;
  /**
   * Queued and delivered, unexpired commands of a device; marks queued ones delivered and reports each of
   * those to `onDelivered` (the live stream's command_status message).
   */
  takePendingCommands(
    deviceId: string,
    nowMs: number,
    onDelivered?: (command: CommandRow) => void,
  ): Promise<PendingCommand[]>;
  saveSchedule(row: ScheduleRow, command: NewCommand): Promise<CommandRow>;
  createControl(control: ControlRow, commands: readonly NewCommand[]): Promise<CommandRow[]>;
  getCommand(commandId: string): Promise<CommandWithHistory | undefined>;
  /**
   * A page of a device's commands (whoever queued them), newest first: by creation time, then command id, both
   * descending (byte-wise), so that pages do not shift between equal times. `status` keeps only that status.
   */
  listDeviceCommands(deviceId: string, query: DeviceCommandsQuery): Promise<Page<CommandWithHistory>>;
  /**
   * Moves the command forward to the reported status (domain/command-lifecycle.ts), keeping the report's `result`
   * when it carries one; when it moved, sets the connector's availability `availabilityOf` answers for it, in the
   * same transaction.
   */
  reportCommandStatus(
    deviceId: string,
    commandId: string,
    report: StatusReport,
    nowMs: number,
    availabilityOf?: AvailabilityOf,
  ): Promise<StatusReportOutcome>;
  /** `queued` → `cancelled`; anything else is a conflict. */
  cancelCommand(commandId: string, nowMs: number): Promise<CommandRow | 'not_found' | 'conflict'>;
  /** Every `queued` or `delivered` command past its expiry becomes `expired` (DESIGN.md §5); returns them. */
  expireCommands(nowMs: number): Promise<CommandRow[]>;
  countCommandsByStatus(): Promise<Record<string, number>>;
  getControl(controlId: string): Promise<ControlWithCommands | undefined>;
  /** Marks the control cancelled, cancels its still-queued commands and queues `reversals`, atomically. */
  cancelControl(
    controlId: string,
    reversals: readonly NewCommand[],
    nowMs: number,
  ): Promise<{ cancelled: CommandRow[]; queued: CommandRow[] }>;
  /** Controls whose window has ended become `completed`; answers them. */
  completeControls(nowMs: number): Promise<ControlRow[]>;
  listSchedules(
    deviceId: string,
    connectorId: number,
    page: number,
    size: number,
  ): Promise<Page<ChargingSchedule>>;
  /** Removes the platform’s copy and queues the delete_schedule command; undefined when there was none. */
  deleteSchedule(
    deviceId: string,
    connectorId: number,
    scheduleId: string,
    command: NewCommand,
    nowMs: number,
  ): Promise<CommandRow | undefined>;
}

/** Charging records (DESIGN.md §12: bounded however long the history). */
export interface ChargingRecordRepository {
  listChargingRecords(
    operatorIds: readonly string[],
    query: ChargingRecordsQuery,
  ): Promise<Page<ChargingRecord>>;
  /** `stored` is told, once committed, the ids of the records that were new. */
  insertChargingRecords(
    records: readonly ChargingRecord[],
    stored?: (recordIds: readonly string[]) => void,
  ): Promise<number>;
}

/** Energy series from the 15-minute rollups (DESIGN.md §12). */
export interface EnergyRepository {
  energyBuckets(
    deviceIds: readonly string[],
    startMs: number,
    endMs: number,
    intervalMs: number,
  ): Promise<EnergyBucketRow[]>;
}

/** Charger events and firmware reports. */
export interface DeviceHistoryRepository {
  insertEvents(
    deviceId: string,
    events: ReadonlyArray<Omit<StoredEventRow, 'device_id' | 'received_ms'>>,
    nowMs: number,
    /** Told, once committed, the ids of the events that were new. */
    stored?: (eventIds: readonly string[]) => void,
  ): Promise<{ accepted: number; duplicates: number }>;
  listEvents(deviceId: string, page: number, size: number): Promise<Page<StoredEventRow>>;
  /**
   * Stores the report and, in the same transaction, the device's versions it implies (decided by the service,
   * domain/inventory.ts). A report whose `report_id` is already stored for the device changes nothing: false.
   */
  recordFirmwareStatus(
    deviceId: string,
    report: NewFirmwareReport,
    nowMs: number,
    versions: DeviceVersions,
  ): Promise<boolean>;
  /** The device's firmware reports, newest first (by the charger's timestamp, then arrival). */
  listFirmwareStatus(deviceId: string, page: number, size: number): Promise<Page<StoredFirmwareRow>>;
}

export type { ArtifactRepository, ArtifactRow, NewArtifact } from './artifact-repository.js';
export type {
  ClientRepository,
  ClientRow,
  ClientSummary,
  StoredClientRotation,
} from './client-repository.js';
export type {
  AvailabilityOf,
  CommandRow,
  ConnectorAvailability,
  NewCommand,
} from './command-types.js';
export type { ConfigurationRepository, StoredConfiguration } from './configuration-repository.js';
export type {
  DeviceRepository,
  DeviceRow,
  DeviceVersions,
  RegisterInput,
  RegistrationWrite,
  SerialState,
  StoredRegistration,
  TargetedDevice,
} from './device-repository.js';
export type { DeviceSecretRepository, StoredRotationOutcome } from './device-secret-repository.js';
export type { DiagnosticsRepository, DiagnosticsRow, NewDiagnostics } from './diagnostics-repository.js';
export type { ClientEntry, DeviceEntry } from './directory-rows.js';
export type { EnrolmentRepository, EnrolmentRow, NewEnrolment } from './enrolment-repository.js';
export type { Page } from './page.js';
export type {
  TelemetryHistoryRead,
  TelemetryHistoryRepository,
  TelemetryHistoryRow,
} from './telemetry-history-repository.js';
export type {
  BatchCommand,
  UpdateCandidate,
  UpdateDeviceChange,
  UpdateDeviceObservation,
  UpdateDeviceRow,
  UpdateRepository,
  UpdateRow,
} from './update-repository.js';
export type {
  AttemptRecord,
  DeliveryRow,
  NewDelivery,
  WebhookChanges,
  WebhookRepository,
  WebhookRow,
} from './webhook-repository.js';

/**
 * Jobs that must run on one instance at a time (DESIGN.md §13): the sweep of commands, controls and expired
 * pending device secrets.
 */
export type ExclusiveJob = 'sweep';
/** What `runAlone` answers: `run`'s value, or that another run of the job had it. */
export type RunAloneOutcome<T> = { ran: true; value: T } | { ran: false };

/** Background upkeep (DESIGN.md §12): rollups and retention. The server runs it on timers. */
export interface Maintenance {
  /** Rolls up everything stored and runs one retention pass. */
  runMaintenance(): Promise<void>;
  /**
   * Runs `run` unless another instance, or another call on this store, is running the same job right now:
   * then `{ ran: false }` at once, never waiting for it. On PostgreSQL a session advisory lock elects the
   * instance, and goes with its connection if the instance dies; `run`'s error is rethrown once it is released.
   * `close` waits for a run in progress.
   */
  runAlone<T>(job: ExclusiveJob, run: () => Promise<T>): Promise<RunAloneOutcome<T>>;
  maintenanceStats(): MaintenanceStats;
  close(): Promise<void>;
}

/**
 * The repository layer: one interface per aggregate, each implemented by every backend (`sqlite/`). Signatures
 * are async so that an asynchronous backend (PostgreSQL) can stand in without touching services or routes.
 */
export type Store = OperatorDirectory &
  DeviceRepository &
  DeviceSecretRepository &
  TelemetryRepository &
  TelemetryHistoryRepository &
  CommandRepository &
  ChargingRecordRepository &
  EnergyRepository &
  DeviceHistoryRepository &
  ConfigurationRepository &
  WebhookRepository &
  EnrolmentRepository &
  ArtifactRepository &
  UpdateRepository &
  DiagnosticsRepository &
  Maintenance;
