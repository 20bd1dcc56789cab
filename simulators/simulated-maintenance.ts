/**
 * The simulated HAL's remote-maintenance members (agent/hal.ts `reboot`, `unlockConnector`, DESIGN.md §20): what a
 * test or the fleet sees of them, and the faults that make the agent reject the commands.
 */
import { type Hal, HalError } from '../agent/hal.js';
import { connectorOf, refresh, type SimulatedCharger } from './simulated-charger.js';

/**
 * `no_reboot` / `no_unlock`: the HAL lacks the method (the agent rejects the command, saying so);
 * `unlock_stuck`: `unlockConnector` rejects as a jammed lock would.
 */
export const MAINTENANCE_FAULTS = ['no_reboot', 'no_unlock', 'unlock_stuck'] as const;
export type MaintenanceFault = (typeof MAINTENANCE_FAULTS)[number];
export const isMaintenanceFault = (value: unknown): value is MaintenanceFault =>
  (MAINTENANCE_FAULTS as readonly unknown[]).includes(value);

/** What the simulated hardware went through, for tests. */
export interface MaintenanceLog {
  reboots: number;
  /** Unlocks per connector id. */
  unlocks: Map<number, number>;
}

export function createMaintenanceLog(): MaintenanceLog {
  return { reboots: 0, unlocks: new Map() };
}

/** `reboot` ends every session (the power electronics restart); the agent then restarts itself. */
export function maintenanceMembers(
  charger: SimulatedCharger,
  log: MaintenanceLog,
  faults: readonly MaintenanceFault[],
  catchUp: () => void,
): Pick<Hal, 'reboot' | 'unlockConnector'> {
  const members: Pick<Hal, 'reboot' | 'unlockConnector'> = {};
  if (!faults.includes('no_reboot')) {
    members.reboot = async () => {
      catchUp();
      log.reboots += 1;
      for (const c of charger.connectors) {
        c.session = 'none';
        refresh(charger, c);
      }
    };
  }
  if (!faults.includes('no_unlock')) {
    members.unlockConnector = async (connectorId) => {
      catchUp();
      const c = connectorOf(charger, connectorId);
      if (faults.includes('unlock_stuck'))
        throw new HalError('fault', `the cable lock of connector ${connectorId} did not open`);
      if (c.session !== 'none')
        throw new HalError('fault', `connector ${connectorId} has a session running: stop it first`);
      log.unlocks.set(connectorId, (log.unlocks.get(connectorId) ?? 0) + 1);
    };
  }
  return members;
}
