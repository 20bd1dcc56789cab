import type { CommandName, CommandStatus } from '../../shared/index.js';

/** A command as storage keeps it (DESIGN.md §5), and a new one to queue: shared by every aggregate that queues. */
export interface CommandRow {
  command_id: string;
  device_id: string;
  command: CommandName;
  params: Record<string, unknown>;
  status: CommandStatus;
  expiry_ms: number;
  created_ms: number;
  updated_ms: number;
  control_id: string | null;
  client_id: string | null;
  reason: string | null;
  /** What the charger reported the command produced (DESIGN.md §20), once a report that moved it carried one. */
  result: Record<string, unknown> | null;
}
export interface NewCommand {
  device_id: string;
  command: CommandName;
  params: Record<string, unknown>;
  expiry_ms: number;
  control_id?: string;
  client_id?: string;
}

/** A connector taken out of service or put back (DESIGN.md §20). */
export interface ConnectorAvailability {
  connector_id: number;
  available: boolean;
}
/**
 * What a command that a status report just moved does to its connector's availability, if anything: decided
 * above the backend (domain/maintenance.ts), applied by it in the report's own transaction.
 */
export type AvailabilityOf = (moved: CommandRow) => ConnectorAvailability | undefined;
