/**
 * Hardware Abstraction Layer: the one interface an OEM implements to run the agent on its charger.
 *
 * The agent owns every decision (schedules, limits, commands); the HAL only reports what the hardware
 * measures and carries out simple actions. Connector ids are 1-based, as on the wire. Anything that talks
 * to hardware is async; an action that the hardware refuses rejects with a `HalError`.
 *
 * A HAL module (`charger-agent run --hal ./my-hal.js`) exports a `HalFactory` as its default export or as
 * `createHal`; see `hal-loader.ts`.
 */

export type ConnectorHardwareState = 'idle' | 'charging' | 'discharging' | 'fault';

/** One sample of one connector. */
export interface ConnectorReading {
  connectorId: number;
  state: ConnectorHardwareState;
  /** V (per phase on AC hardware). */
  voltageV: number;
  /** A (per phase on AC hardware); negative while discharging. */
  currentA: number;
  /** kW; negative while discharging. */
  powerKw: number;
  /** kWh imported: the meter register, which never decreases. */
  energyKwh: number;
  /** kWh exported to the grid (V2G), a separate register that never decreases. */
  energyExportedKwh?: number;
  vehiclePresent: boolean;
  /** Vehicle state of charge, percent 0-100, when the vehicle reports it. */
  soc?: number;
  temperatureC: number;
  /** 0 means no fault. */
  faultCode: number;
}

export interface ConnectorInfo {
  connectorId: number;
  ratedPowerKw: number;
  v2gCapable: boolean;
}

export interface DeviceInfo {
  connectorCount: number;
  connectors: ConnectorInfo[];
  model?: string;
  manufacturer?: string;
  firmwareVersion?: string;
}

interface EventBase {
  connectorId: number;
  at: Date;
}
export type HardwareEvent =
  | (EventBase & { type: 'vehicle_plugged' })
  | (EventBase & { type: 'vehicle_unplugged' })
  | (EventBase & { type: 'fault_raised'; faultCode: number })
  | (EventBase & { type: 'fault_cleared'; faultCode: number })
  | (EventBase & { type: 'state_changed'; from: ConnectorHardwareState; to: ConnectorHardwareState });
export type HardwareEventType = HardwareEvent['type'];

/**
 * The signed manifest of a firmware image (DESIGN.md §19), as the agent checked it. `target` is a hardware model,
 * or empty when the image fits every charger; `sha256` (lowercase hex) and `size` are the file's, already verified.
 */
export interface FirmwareManifest {
  kind: 'firmware';
  version: string;
  target: string;
  sha256: string;
  size: number;
}

export type HardwareEventListener = (event: HardwareEvent) => void;
export type Unsubscribe = () => void;

export interface Hal {
  getDeviceInfo(): Promise<DeviceInfo>;
  readConnector(connectorId: number): Promise<ConnectorReading>;
  /** Every connector, in connector id order. */
  readConnectors(): Promise<ConnectorReading[]>;

  /** Cap the power flow of the connector, kW, in either direction; applies at once if a session runs. */
  setPowerLimit(connectorId: number, kw: number): Promise<void>;
  /** Begin (or resume) charging the plugged-in vehicle within the current power limit. */
  startCharging(connectorId: number): Promise<void>;
  /** Stop charging or discharging; the vehicle stays plugged in. */
  stopCharging(connectorId: number): Promise<void>;
  /** Begin exporting `kw` (positive) from the vehicle; V2G hardware only. */
  startDischarging(connectorId: number, kw: number): Promise<void>;

  /** Receive hardware events; returns the function that unsubscribes. Listeners must not throw. */
  subscribe(listener: HardwareEventListener): Unsubscribe;

  /** Begin measuring and emitting events; the agent calls it once, after subscribing. */
  start?(): Promise<void>;
  /** Release the hardware; the agent calls it on shutdown. */
  close?(): Promise<void>;

  /**
   * Firmware updates over the air are optional: provide `installFirmware` and `firmwareVersion` both or neither
   * (the loader refuses one alone). Without them the agent rejects every firmware update, saying so; agent bundle
   * updates do not need them.
   *
   * Install the firmware image in `file` (in the agent's data directory; the agent deletes it afterwards). Called
   * once per update, only after the agent has checked the file's size, sha256 and signature and the install may
   * begin (inside the window when there is one; for `when_idle`, connectors idle too). Hand the image to the
   * charger's updater (RAUC, Mender, SWUpdate...) and resolve once it is installed and the charger is about to
   * reboot into it, or has. Reject with an Error whose message says why it was not installed: the agent reports the
   * update `install_failed` with that message. A reboot that ends the agent before the call settles is expected: the
   * agent verifies on its next start.
   */
  installFirmware?(file: string, manifest: FirmwareManifest): Promise<void>;
  /**
   * The firmware version the charger runs now (the same as `getDeviceInfo().firmwareVersion`). After the install
   * and its reboot the agent compares it with `manifest.version`: equal is `installed`, anything else (the
   * updater fell back to the old image) is `install_verification_failed`.
   */
  firmwareVersion?(): Promise<string>;

  /**
   * Remote maintenance (DESIGN.md §20), optional: without a method the agent rejects the command, saying so.
   *
   * Reboot the charger (`reset` with target `charger`). Called after the agent has reported the command and
   * flushed what it could; the reboot ends the agent. If the call resolves and the agent still runs (a HAL that
   * only restarts the power electronics), the agent stops and exits with its restart code, so that it starts
   * afresh with the hardware. Reject with an Error saying why the charger could not reboot.
   */
  reboot?(): Promise<void>;
  /**
   * Release the cable lock of the connector (`unlock_connector`). The agent calls it only while no energy flows
   * on the connector. Resolve once the lock is open; reject with a HalError (or an Error) saying why not.
   */
  unlockConnector?(connectorId: number): Promise<void>;
}

/** What the agent passes to a HAL factory: the command-line choices, plus its config file's `hal` block. */
export interface HalOptions {
  connectors?: number;
  v2g?: boolean;
  config?: Record<string, unknown>;
}

export type HalFactory = (options: HalOptions) => Hal | Promise<Hal>;

export type HalErrorCode = 'unknown_connector' | 'no_vehicle' | 'fault' | 'not_v2g_capable' | 'invalid_power';

/** Why the hardware refused an action; the agent reports the command as failed with this message. */
export class HalError extends Error {
  readonly code: HalErrorCode;
  constructor(code: HalErrorCode, message: string) {
    super(message);
    this.name = 'HalError';
    this.code = code;
  }
}

/** By shape, not `instanceof`: an OEM module may carry its own copy of this file. */
export function isHalError(error: unknown): error is HalError {
  return (
    error instanceof Error &&
    error.name === 'HalError' &&
    typeof (error as { code?: unknown }).code === 'string'
  );
}
