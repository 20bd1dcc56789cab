import type { HeartbeatStatus } from '../../shared/index.js';
import type { RegistrationDecision } from '../domain/registration.js';
import type { Page } from './page.js';

export interface DeviceRow {
  device_id: string;
  sn: string;
  model: string | null;
  manufacturer: string | null;
  firmware_version: string | null;
  /** The charger agent's release (DESIGN.md §19), once the charger said it. */
  agent_version: string | null;
  mac: string | null;
  site_id: string | null;
  registered: boolean;
  secret_sealed: string | null;
  secret_gen: number;
  /** A rotation's new secret, until it is used or its grace is over (domain/secret-rotation.ts). */
  pending_secret_sealed: string | null;
  pending_since_ms: number | null;
  last_seen_ms: number | null;
  last_heartbeat_ms: number | null;
  reported_status: HeartbeatStatus | null;
  fault_code: number | null;
}

/** A charger's inventory: what it runs (DESIGN.md §19). */
export interface DeviceVersions {
  firmware_version?: string | undefined;
  agent_version?: string | undefined;
}

export interface RegisterInput {
  sn: string;
  model: string;
  manufacturer: string;
  firmware_version: string;
  agent_version?: string | undefined;
  mac?: string;
  connectors?: Array<{ connector_id: number; max_power_kw: number; v2g_capable: boolean }>;
}

/** What a registration reads of a serial inside its transaction, for the rule to decide on. */
export interface SerialState {
  /** The serial is on the allowlist. */
  allowed: boolean;
  /** The device of that serial, if one was ever registered, and the operator of the site that holds it. */
  existing: { registered: boolean; operatorId: string | null } | undefined;
}

/** What a registration stores, besides the charger's own declaration: decided above the backend. */
export interface RegistrationWrite {
  /** The rule (domain/registration.ts, bound to the policy by services/registration-service.ts). */
  decide: (state: SerialState) => RegistrationDecision;
  /** The new secret, sealed: stored as the device's only secret. */
  secretSealed: string;
  /** Where a new charger goes; a charger registering again keeps its site. */
  defaultSiteId?: string | undefined;
}

/** What `registerDevice` did: the registered device, or the decision that refused it. */
export type StoredRegistration =
  | { kind: 'registered'; device: DeviceRow }
  | { kind: 'not_allowed' }
  | { kind: 'other_operator' }
  | { kind: 'already_registered' };

/** A device a control reaches, and the operator whose site holds it (the control's tenancy, DESIGN.md §18). */
export interface TargetedDevice {
  device_id: string;
  operator_id: string;
}

/** Chargers: registration, tenancy, sites (their secrets: device-secret-repository.ts). */
export interface DeviceRepository {
  allowSerial(sn: string): Promise<void>;
  /**
   * One transaction: reads the serial's state, asks `write.decide` and stores what it says (a new device, or
   * a reset one registered again under its old id with the next secret generation).
   */
  registerDevice(input: RegisterInput, write: RegistrationWrite): Promise<StoredRegistration>;
  getDevice(deviceId: string): Promise<DeviceRow | undefined>;
  /** The device only if it is in a site of one of these operators (tenancy, DESIGN.md §2). */
  getDeviceForOperators(deviceId: string, operatorIds: readonly string[]): Promise<DeviceRow | undefined>;
  /** The registered devices a control's targets reach within these operators, each with its operator. */
  listDevicesForTargets(
    operatorIds: readonly string[],
    target: { type: 'site' | 'operator' | 'all'; ids: readonly string[] },
  ): Promise<TargetedDevice[]>;
  assignDevice(deviceId: string, siteId: string): Promise<boolean>;
  resetDevice(deviceId: string): Promise<boolean>;
  listDevices(
    operatorIds: readonly string[],
    q: {
      site_id?: string | undefined;
      status?: 'online' | 'offline' | undefined;
      firmware_version?: string | undefined;
      agent_version?: string | undefined;
      page: number;
      size: number;
    },
    onlineSinceMs: number,
  ): Promise<Page<DeviceRow>>;
  /** Sets the versions given (an absent one is left as it is); false when there is no such device. */
  setDeviceVersions(deviceId: string, versions: DeviceVersions): Promise<boolean>;
  countDevicesInSite(siteId: string): Promise<number>;
  deviceIdsInSite(siteId: string): Promise<string[]>;
}
