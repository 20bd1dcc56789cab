import type { ConnectorInfo, Hal } from '../../agent/hal.js';
import type { SimulatedHal } from '../../simulators/simulated-hal.js';

/** A HAL that records every call and checks it against what the declared hardware can take (agent-fuzz-commands). */

/** Connector 1: 22 kW, no V2G; connector 2: 11 kW, V2G. */
export const DECLARED: ConnectorInfo[] = [
  { connectorId: 1, ratedPowerKw: 22, v2gCapable: false },
  { connectorId: 2, ratedPowerKw: 11, v2gCapable: true },
];

export interface HalRecorder {
  hal: Hal;
  calls: Array<{ fn: string; connectorId: number; kw?: number }>;
  violations: string[];
}

/** The simulated HAL behind the declared connectors, every call checked against what the hardware can take. */
export function recordingHal(inner: SimulatedHal): HalRecorder {
  const calls: HalRecorder['calls'] = [];
  const violations: string[] = [];
  const check = (fn: string, connectorId: number, kw?: number) => {
    calls.push({ fn, connectorId, ...(kw !== undefined ? { kw } : {}) });
    const c = DECLARED.find((d) => d.connectorId === connectorId);
    if (!Number.isInteger(connectorId) || !c) {
      violations.push(`${fn}(${connectorId}): unknown connector`);
      return;
    }
    if (fn === 'setPowerLimit' && !(Number.isFinite(kw) && kw! >= 0 && kw! <= c.ratedPowerKw))
      violations.push(`setPowerLimit(${connectorId}, ${kw}): outside 0..${c.ratedPowerKw} kW`);
    if (
      fn === 'startDischarging' &&
      !(c.v2gCapable && Number.isFinite(kw) && kw! > 0 && kw! <= c.ratedPowerKw)
    )
      violations.push(
        `startDischarging(${connectorId}, ${kw}): not V2G or outside (0, ${c.ratedPowerKw}] kW`,
      );
  };
  const hal: Hal = {
    getDeviceInfo: async () => ({
      ...(await inner.getDeviceInfo()),
      connectorCount: DECLARED.length,
      connectors: DECLARED.map((c) => ({ ...c })),
    }),
    readConnector: (id) => {
      check('readConnector', id);
      return inner.readConnector(id);
    },
    readConnectors: () => inner.readConnectors(),
    setPowerLimit: (id, kw) => {
      check('setPowerLimit', id, kw);
      return inner.setPowerLimit(id, kw);
    },
    startCharging: (id) => {
      check('startCharging', id);
      return inner.startCharging(id);
    },
    stopCharging: (id) => {
      check('stopCharging', id);
      return inner.stopCharging(id);
    },
    startDischarging: (id, kw) => {
      check('startDischarging', id, kw);
      return inner.startDischarging(id, kw);
    },
    subscribe: (listener) => inner.subscribe(listener),
    start: () => inner.start(),
    close: () => inner.close(),
  };
  return { hal, calls, violations };
}
