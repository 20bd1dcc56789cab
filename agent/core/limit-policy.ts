/**
 * Flexibility limits as the agent keeps them, and what a repeat of one does. Pure; the store applies it.
 *
 * A limit is keyed by its `control_id`. The platform sends the same control again to reverse it early (an
 * `ends_at` sooner than before); the original may also arrive late, after its reversal (a redelivery, a
 * command queued while offline). So a repeat may shorten a control but never extend it: whatever order the
 * two arrive in, the charger ends the control at the earlier time.
 */
import type { FlexibilityLimit } from './schedule-engine.js';

export interface StoredLimit extends FlexibilityLimit {
  commandId: string;
  receivedAt: string;
  reason?: string;
}

/** The limit to keep when `incoming` arrives and `existing` (same control_id) is stored: never a later end. */
export function repeatedLimit(
  existing: Pick<FlexibilityLimit, 'ends_at'> | undefined,
  incoming: StoredLimit,
): StoredLimit {
  const kept: StoredLimit = { ...incoming };
  if (existing && Date.parse(existing.ends_at) < Date.parse(incoming.ends_at))
    kept.ends_at = existing.ends_at;
  return kept;
}
