import type {
  ChargingRecord,
  ChargingRecordsQuery,
  ChargingSchedule,
  CommandName,
  CommandStatus,
  HeartbeatStatus,
  PendingCommand,
  Scope,
  TelemetryRecord,
} from '../../shared/index.js';

/**
 * The repository layer. Signatures are async so that a PostgreSQL implementation can replace the embedded
 * SQLite one without touching route code.
 */
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
export interface ClientRow {
  client_id: string;
  secret_sealed: string;
  scopes: Scope[];
  operator_ids: string[];
}
export interface DeviceRow {
  device_id: string;
  sn: string;
  model: string | null;
  manufacturer: string | null;
  firmware_version: string | null;
  mac: string | null;
  site_id: string | null;
  registered: boolean;
  secret_sealed: string | null;
  secret_gen: number;
  last_seen_ms: number | null;
  last_heartbeat_ms: number | null;
  reported_status: HeartbeatStatus | null;
  fault_code: number | null;
}
export interface ConnectorRow {
  device_id: string;
  connector_id: number;
  max_power_kw: number | null;
  v2g_capable: boolean;
  state: string | null;
  power: number | null;
  voltage: number | null;
  current: number | null;
  energy_delivered: number | null;
  soc: number | null;
  temperature: number | null;
  last_telemetry_ms: number | null;
}
export interface CommandRow {
  command_id: string;
  device_id: string;
  command: CommandName;
  params: Record<string, unknown>;
  status: CommandStatus;
  expiry_ms: number;
  created_ms: number;
  updated_ms: number;
  control_id: string | null;
  client_id: string | null;
}
export interface NewCommand {
  device_id: string;
  command: CommandName;
  params: Record<string, unknown>;
  expiry_ms: number;
  control_id?: string;
  client_id?: string;
}
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
}
export interface ScheduleRow {
  device_id: string;
  connector_id: number;
  schedule: ChargingSchedule;
  updated_ms: number;
}

export type RegistrationOutcome =
  | { kind: 'registered'; device: DeviceRow; secret: string }
  | { kind: 'not_allowed' }
  | { kind: 'already_registered' };

export interface RegisterInput {
  sn: string;
  model: string;
  manufacturer: string;
  firmware_version: string;
  mac?: string;
  connectors?: Array<{ connector_id: number; max_power_kw: number; v2g_capable: boolean }>;
}

export interface Page<T> {
  total: number;
  page: number;
  size: number;
  items: T[];
}

export interface Store {
  // Operators, sites, clients (admin CLI and sandbox seed)
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
  createClient(input: {
    operator_ids: string[];
    scopes: Scope[];
  }): Promise<{ client: ClientRow; secret: string }>;
  getClient(clientId: string): Promise<ClientRow | undefined>;

  // Devices
  allowSerial(sn: string): Promise<void>;
  registerDevice(
    input: RegisterInput,
    policy: { registration: 'open' | 'allowlist'; defaultSiteId?: string | undefined },
  ): Promise<RegistrationOutcome>;
  getDevice(deviceId: string): Promise<DeviceRow | undefined>;
  /** The device only if it is in a site of one of these operators (tenancy, DESIGN.md §2). */
  getDeviceForOperators(deviceId: string, operatorIds: readonly string[]): Promise<DeviceRow | undefined>;
  listDeviceIdsForTargets(
    operatorIds: readonly string[],
    target: { type: 'site' | 'operator' | 'all'; ids: readonly string[] },
  ): Promise<string[]>;
  assignDevice(deviceId: string, siteId: string): Promise<boolean>;
  resetDevice(deviceId: string): Promise<boolean>;
  /** device_id → secret generation, for token revocation checks without per-request reads. */
  loadSecretGenerations(): Promise<Map<string, number>>;

  // Connectors and telemetry
  listConnectors(deviceId: string): Promise<ConnectorRow[]>;
  getConnector(deviceId: string, connectorId: number): Promise<ConnectorRow | undefined>;
  recordTelemetry(deviceId: string, records: readonly TelemetryRecord[], receivedMs: number): Promise<void>;
  recordHeartbeat(
    deviceId: string,
    hb: { status: HeartbeatStatus; fault_code: number; atMs: number },
  ): Promise<void>;
  touchDevices(seen: ReadonlyMap<string, number>): Promise<void>;

  // Charging records
  listChargingRecords(
    operatorIds: readonly string[],
    query: ChargingRecordsQuery,
  ): Promise<Page<ChargingRecord>>;
  insertChargingRecords(records: readonly ChargingRecord[]): Promise<number>;

  // Commands, schedules, controls
  enqueueCommands(commands: readonly NewCommand[], nowMs: number): Promise<CommandRow[]>;
  /** Queued and delivered, unexpired commands of a device; marks queued ones delivered. */
  takePendingCommands(deviceId: string, nowMs: number): Promise<PendingCommand[]>;
  saveSchedule(row: ScheduleRow, command: NewCommand): Promise<CommandRow>;
  createControl(control: ControlRow, commands: readonly NewCommand[]): Promise<CommandRow[]>;

  getSetting(key: string): Promise<string | undefined>;
  setSetting(key: string, value: string): Promise<void>;

  /** Bumped when another process (the admin CLI) changed the database. */
  externalChangeVersion(): number;
  close(): Promise<void>;
}
