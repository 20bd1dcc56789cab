import type { CommandStatus, TelemetryRecord } from '../shared/index.js';

/** What the live stream (and anything else listening) hears about, published by the routes and sweepers. */
export interface PlatformEvents {
  telemetry(deviceId: string, records: readonly TelemetryRecord[]): void;
  deviceStatus(deviceId: string, status: 'online' | 'offline', atMs: number): void;
  commandStatus(
    c: {
      command_id: string;
      device_id: string;
      command: string;
      status: CommandStatus;
      reason?: string | null;
    },
    atMs: number,
  ): void;
}

export const noEvents: PlatformEvents = {
  telemetry() {},
  deviceStatus() {},
  commandStatus() {},
};
