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
}
export interface NewCommand {
  device_id: string;
  command: CommandName;
  params: Record<string, unknown>;
  expiry_ms: number;
  control_id?: string;
  client_id?: string;
}
