/**
 * Charger events for `POST /v1/device/events`: what the hardware reported (vehicle plugged or unplugged, fault
 * raised or cleared) and the agent's own boot. Pure mapping; the runtime queues them in the outbox. State
 * changes are not events: telemetry carries them.
 */
import { randomBytes } from 'node:crypto';
import type { DeviceEvent } from '../../shared/device-api.js';
import { replaceControlCharacters } from '../../shared/primitives.js';
import { iso } from '../clock.js';
import type { HardwareEvent } from '../hal.js';

/** Unique per charger: the platform ignores a repeated event_id, so replays after a crash are harmless. */
export function newEventId(atMs: number, random = () => randomBytes(4).toString('hex')): string {
  return `ev-${atMs.toString(36)}-${random()}`;
}

export function toDeviceEvent(event: HardwareEvent, eventId: string): DeviceEvent | undefined {
  const base = { event_id: eventId, timestamp: iso(event.at.getTime()), connector_id: event.connectorId };
  switch (event.type) {
    case 'vehicle_plugged':
      return { ...base, kind: 'vehicle_plugged', severity: 'info' };
    case 'vehicle_unplugged':
      return { ...base, kind: 'vehicle_unplugged', severity: 'info' };
    case 'fault_raised':
      return {
        ...base,
        kind: 'fault_raised',
        severity: 'error',
        // The platform refuses control characters in a message; a HAL's fault code is not ours to trust.
        message: replaceControlCharacters(`fault ${event.faultCode}`),
        data: { fault_code: event.faultCode },
      };
    case 'fault_cleared':
      return { ...base, kind: 'fault_cleared', severity: 'info', data: { fault_code: event.faultCode } };
    case 'state_changed':
      return undefined;
  }
}

export function bootEvent(atMs: number, eventId: string, version: string): DeviceEvent {
  return {
    event_id: eventId,
    kind: 'boot',
    severity: 'info',
    timestamp: iso(atMs),
    message: `charger-agent ${version} started`,
    data: { version },
  };
}
