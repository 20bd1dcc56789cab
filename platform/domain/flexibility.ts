import type { CommandStatus } from '../../shared/index.js';
import { toTimestamp } from '../../shared/index.js';

/**
 * Load-flexibility controls (spec: `/v1/operator/control/flexibility`), pure: the window a control's commands
 * carry, its status as an operator sees it, its progress, and how a cancellation lifts it from the chargers.
 */

/**
 * The parameters every command of a control carries: the request's, plus the control id and the window in
 * absolute time, so that a late delivery cannot stretch the control beyond what the operator asked for.
 */
export function controlCommandParams<P extends { duration: number }>(
  requested: P,
  controlId: string,
  startMs: number,
): { params: P & { control_id: string; starts_at: string; ends_at: string }; endMs: number } {
  const endMs = startMs + requested.duration * 1000;
  return {
    params: {
      ...requested,
      control_id: controlId,
      starts_at: toTimestamp(startMs),
      ends_at: toTimestamp(endMs),
    },
    endMs,
  };
}

export type ControlStatus = 'executing' | 'completed' | 'cancelled';

/** A control whose window has ended is completed, even before the background sweep has written it so. */
export function effectiveControlStatus(stored: ControlStatus, endsMs: number, nowMs: number): ControlStatus {
  return stored === 'executing' && endsMs <= nowMs ? 'completed' : stored;
}

/** How many of a control's commands are in each status. */
export function controlProgress(commands: ReadonlyArray<{ status: CommandStatus }>): Record<string, number> {
  const progress: Record<string, number> = {};
  for (const c of commands) progress[c.status] = (progress[c.status] ?? 0) + 1;
  return progress;
}

export type CancellationPlan =
  | { kind: 'conflict'; message: string }
  | {
      kind: 'cancel';
      /** Chargers that may hold the control: each gets the same command with the window ended now. */
      reversalDeviceIds: string[];
      reversalParams: Record<string, unknown>;
      /** Reversals matter until the control would have ended anyway. */
      reversalExpiryMs: number;
    };

/**
 * Cancelling a control: its still-queued commands are cancelled by storage; every charger that may already hold
 * it (the command went beyond `queued` and was not cancelled or expired) gets a reversal.
 */
export function planCancellation(
  control: { status: ControlStatus; ends_ms: number; params: Record<string, unknown> },
  commands: ReadonlyArray<{ device_id: string; status: CommandStatus }>,
  nowMs: number,
): CancellationPlan {
  const status = effectiveControlStatus(control.status, control.ends_ms, nowMs);
  if (status !== 'executing') return { kind: 'conflict', message: `Control is already ${status}` };
  return {
    kind: 'cancel',
    reversalDeviceIds: commands
      .filter((c) => c.status !== 'queued' && c.status !== 'cancelled' && c.status !== 'expired')
      .map((c) => c.device_id),
    reversalParams: { ...control.params, ends_at: toTimestamp(nowMs) },
    reversalExpiryMs: control.ends_ms,
  };
}

/**
 * The operators a control belongs to (DESIGN.md §18): those whose chargers it reaches, and those whose sites or
 * operator ids it names, never simply every operator of the client that sent it (an aggregator's control on one
 * tenant's site belongs to that tenant alone). A control that reaches nothing and names nothing (`all` over an
 * empty fleet) belongs to every operator of its sender, so that only a client holding all of them follows it.
 */
export function controlOperatorIds(
  reached: ReadonlyArray<{ operator_id: string }>,
  namedOperatorIds: readonly string[],
  senderOperatorIds: readonly string[],
): string[] {
  const owners = new Set([...reached.map((d) => d.operator_id), ...namedOperatorIds]);
  return [...(owners.size > 0 ? owners : new Set(senderOperatorIds))].sort();
}

/**
 * Whether a client may follow, cancel or be told of a control: only when it may see every operator the control
 * belongs to. Sharing one of them is not enough, or a client of one tenant would read and cancel another's.
 */
export function mayFollowControl(
  controlOperators: readonly string[],
  clientOperators: readonly string[],
): boolean {
  return controlOperators.length > 0 && controlOperators.every((o) => clientOperators.includes(o));
}

/** The ids a control request targets, without repeats, in the order given. */
export function distinctTargetIds(ids: readonly string[] | undefined): string[] {
  return [...new Set(ids ?? [])];
}

/**
 * The first operator a control names that its sender does not act for; the request answers it like a missing
 * operator (404), so nobody learns which operators exist.
 */
export function foreignOperatorId(
  named: readonly string[],
  senderOperatorIds: readonly string[],
): string | undefined {
  return named.find((id) => !senderOperatorIds.includes(id));
}
