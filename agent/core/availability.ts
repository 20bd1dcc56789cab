/**
 * A connector taken out of service by the operator (`set_availability`, DESIGN.md §20), decided without touching
 * anything. The charger stores it, so it holds offline and across reboots; the control loop keeps an out-of-service
 * connector idle, and the command executor refuses to start or discharge on it. A connector with energy flowing
 * when the command arrives finishes that vehicle's session first: it goes out of service when the vehicle leaves.
 */
import type { ConnectorReading } from '../hal.js';

export interface OutOfService {
  commandId: string;
  since: string;
  /** Energy was flowing when the command came: the vehicle's session goes on until it leaves. */
  afterVehicleLeaves: boolean;
}

/** Out-of-service connectors by connector id (as stored: JSON object keys are strings). */
export type Availability = Record<string, OutOfService>;

/** The stored availability after a `set_availability`; `reading` is the connector as read when it was accepted. */
export function availabilityAfter(
  current: Availability,
  change: { connectorId: number; available: boolean; commandId: string; at: string },
  reading: ConnectorReading | undefined,
): Availability {
  const next = { ...current };
  const key = String(change.connectorId);
  if (change.available) {
    delete next[key];
    return next;
  }
  // Taking a connector out of service twice keeps the first instant and does not re-arm the wait.
  if (next[key]) return next;
  const flowing = reading?.state === 'charging' || reading?.state === 'discharging';
  next[key] = { commandId: change.commandId, since: change.at, afterVehicleLeaves: flowing };
  return next;
}

/** The vehicle left the connector: a pending out-of-service now holds. Undefined when nothing changes. */
export function availabilityAfterVehicleLeft(
  current: Availability,
  connectorId: number,
): Availability | undefined {
  const entry = current[String(connectorId)];
  if (!entry?.afterVehicleLeaves) return undefined;
  return { ...current, [String(connectorId)]: { ...entry, afterVehicleLeaves: false } };
}

/** Why the connector must stay idle now, or undefined when it is in service (or finishing its last session). */
export function outOfServiceReason(entry: OutOfService | undefined): string | undefined {
  if (!entry || entry.afterVehicleLeaves) return undefined;
  return `out of service (set unavailable by command ${entry.commandId})`;
}

/** Why a start or discharge is refused on this connector, or undefined. */
export function availabilityRefusal(
  connectorId: number,
  entry: OutOfService | undefined,
): string | undefined {
  if (!entry) return undefined;
  return `connector ${connectorId} is out of service (set unavailable by command ${entry.commandId})`;
}

/** How the command reads in its report. */
export function availabilityReport(
  connectorId: number,
  available: boolean,
  entry: OutOfService | undefined,
): string {
  if (available) return `connector ${connectorId} in service`;
  return entry?.afterVehicleLeaves
    ? `connector ${connectorId} goes out of service when the vehicle charging on it leaves`
    : `connector ${connectorId} out of service`;
}
