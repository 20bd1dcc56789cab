import type { CommandStatus } from '../../shared/index.js';

/**
 * The command lifecycle (DESIGN.md §5): `queued → delivered → accepted → succeeded | failed | rejected`, or
 * `expired` / `cancelled` on the platform's side. Pure rules; storage applies them inside its own atomic step.
 */

/** What a charger may report about a command. */
export type ReportedStatus = 'accepted' | 'rejected' | 'succeeded' | 'failed';

/** Order of statuses for reports: a report never moves a command backwards. */
const STATUS_RANK: Record<CommandStatus, number> = {
  queued: 0,
  delivered: 1,
  accepted: 2,
  succeeded: 3,
  failed: 3,
  rejected: 3,
  expired: 3,
  cancelled: 3,
};

export type ReportDecision =
  /** The platform already ended the command (expired, cancelled): the charger is told so (409). */
  | { kind: 'conflict'; status: CommandStatus }
  /** A repeat, or a late report behind the current status: acknowledged, nothing changes. */
  | { kind: 'unchanged' }
  /** The command moves forward to the reported status. */
  | { kind: 'advance'; status: ReportedStatus };

export function decideStatusReport(current: CommandStatus, reported: ReportedStatus): ReportDecision {
  if (current === 'cancelled' || current === 'expired') return { kind: 'conflict', status: current };
  if (STATUS_RANK[reported] <= STATUS_RANK[current]) return { kind: 'unchanged' };
  return { kind: 'advance', status: reported };
}

/** An operator may cancel a command only while no charger has seen it. */
export function mayCancel(current: CommandStatus): boolean {
  return current === 'queued';
}

/** The reasons the platform records with the transitions it makes itself. */
export const REASON = {
  expired: 'no report before expiry',
  cancelledByOperator: 'cancelled by operator',
  controlCancelled: 'control cancelled',
} as const;
