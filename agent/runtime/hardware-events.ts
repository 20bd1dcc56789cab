/**
 * Where a hardware event goes: to the platform as a device event (through the outbox), to the sampler (a
 * sample now; a session ends when the vehicle leaves) and to the control loop (a pass now).
 */
import type { Logger } from 'pino';
import { newEventId, toDeviceEvent } from '../core/device-events.js';
import type { HardwareEvent } from '../hal.js';
import type { Uplink } from '../link/uplink.js';
import type { AgentStore } from '../store/agent-store.js';
import type { ControlLoop } from './control-loop.js';
import type { Sampler } from './sampler.js';

export interface HardwareEventRoutes {
  store: AgentStore;
  uplink: Uplink;
  sampler: Sampler;
  controlLoop: ControlLoop;
  logger: Logger;
}

export function routeHardwareEvents(routes: HardwareEventRoutes): (event: HardwareEvent) => void {
  const { store, uplink, sampler, controlLoop, logger } = routes;
  return (event) => {
    const deviceEvent = toDeviceEvent(event, newEventId(event.at.getTime()));
    if (deviceEvent) {
      try {
        store.enqueueEvents([deviceEvent]);
        uplink.notify();
      } catch (error) {
        logger.error({ err: (error as Error).message }, 'queuing a hardware event failed');
      }
    }
    if (event.type === 'vehicle_unplugged') {
      void sampler.vehicleLeft(event.connectorId, event.at.getTime());
      controlLoop.vehicleLeft(event.connectorId);
    } else {
      controlLoop.trigger(event.type);
    }
    void sampler.sample(event.type);
  };
}
