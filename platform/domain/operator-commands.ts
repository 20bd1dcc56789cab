import { COMMAND_EXPIRY_SECONDS, type SlotAction } from '../../shared/index.js';

/**
 * Rules of the commands an operator sends to one connector (spec: stop, start, discharge, schedules), pure.
 * A refusal is its message; the service answers it as a conflict (409).
 */

export type OperatorCommandKind = keyof typeof COMMAND_EXPIRY_SECONDS;

/** A command's expiry counts from the same instant as its creation. */
export function commandExpiryMs(kind: OperatorCommandKind, createdMs: number): number {
  return createdMs + COMMAND_EXPIRY_SECONDS[kind] * 1000;
}

/** A stop without a reason is the user's. */
export function stopReason(given: string | undefined): string {
  return given ?? 'user_request';
}

/** Discharging needs a V2G-capable connector. */
export function dischargeRefusal(v2gCapable: boolean): string | undefined {
  return v2gCapable ? undefined : 'Connector is not V2G-capable';
}

/** A schedule may discharge only on a V2G-capable connector. */
export function scheduleRefusal(
  v2gCapable: boolean,
  slots: ReadonlyArray<{ action: SlotAction }>,
): string | undefined {
  if (v2gCapable || !slots.some((s) => s.action === 'discharge')) return undefined;
  return 'Connector is not V2G-capable; discharge slots are not allowed';
}
