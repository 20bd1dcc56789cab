import type { CommandStatus, TelemetryRecord } from '../../shared/index.js';

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

/** Tells both sinks (the stream, or its relay, and the webhooks), in that order. */
export function bothEvents(first: PlatformEvents, second: PlatformEvents): PlatformEvents {
  return {
    telemetry(deviceId, records) {
      first.telemetry(deviceId, records);
      second.telemetry(deviceId, records);
    },
    deviceStatus(deviceId, status, atMs) {
      first.deviceStatus(deviceId, status, atMs);
      second.deviceStatus(deviceId, status, atMs);
    },
    commandStatus(c, atMs) {
      first.commandStatus(c, atMs);
      second.commandStatus(c, atMs);
    },
  };
}
