import type { ConnectorState } from '../../shared/index.js';

/**
 * What the operator API shows as a connector's status (DESIGN.md §7, §20), pure:
 * - while its charger is offline, or before any telemetry, `unavailable`;
 * - taken out of service (`available` false) with no session on it (idle), `unavailable`; a session still running
 *   (charging, discharging) shows as it is until it ends, and a fault stays a fault;
 * - otherwise its live state.
 */
export function connectorStatus(state: string | null, online: boolean, available: boolean): ConnectorState {
  if (!online || state === null) return 'unavailable';
  if (!available && state === 'idle') return 'unavailable';
  return state as ConnectorState;
}
