/**
 * Two-phase device secret rotation (DESIGN.md §17), as pure rules.
 *
 * `POST /v1/device/secret/rotate` creates a pending secret beside the current one. The current secret and the
 * tokens issued with it (the current generation) keep working until the charger exchanges the pending secret
 * for a token, or until the grace below has passed; then the pending secret is the device's only secret and
 * tokens of the next generation are the only live ones. Storage records the switch when a token is issued
 * for the pending secret or when the sweep finds the grace over; until the sweep has run, these rules already
 * treat an expired pending secret as switched, so that no instance accepts the old secret a moment too long.
 */

/** How long the old secret and its tokens keep working beside a pending secret nobody has used. */
export const SECRET_ROTATION_GRACE_MS = 24 * 3_600_000;

/** `none`: no rotation under way; `grace`: the old secret still works; `expired`: only the new one does. */
export type PendingSecretState = 'none' | 'grace' | 'expired';

export function pendingSecretState(
  pendingSinceMs: number | null,
  nowMs: number,
  graceMs: number = SECRET_ROTATION_GRACE_MS,
): PendingSecretState {
  if (pendingSinceMs === null) return 'none';
  return nowMs - pendingSinceMs >= graceMs ? 'expired' : 'grace';
}

/**
 * The secret generation whose tokens are live now. Promoting a pending secret moves the device to the next
 * generation, so once the grace is over the current generation is revoked even before storage says so.
 */
export function liveGeneration(
  device: { secret_gen: number; pending_since_ms: number | null },
  nowMs: number,
  graceMs: number = SECRET_ROTATION_GRACE_MS,
): number {
  return pendingSecretState(device.pending_since_ms, nowMs, graceMs) === 'expired'
    ? device.secret_gen + 1
    : device.secret_gen;
}

/**
 * What a rotation request gets: a new pending secret, the one already pending (an answer lost on the way is
 * recovered by asking again), or nothing — a request that raced the end of the grace carries a token of the
 * generation that just ended.
 */
export type RotationAnswer = 'create' | 'repeat' | 'revoked';

export function rotationAnswer(state: PendingSecretState): RotationAnswer {
  if (state === 'none') return 'create';
  return state === 'grace' ? 'repeat' : 'revoked';
}

/**
 * Which stored secret a presented one stands for at the token endpoint. The pending secret is accepted in
 * every state (using it is what promotes it); the current one only while no pending secret has outlived its
 * grace.
 */
export type SecretMatch = 'current' | 'pending' | 'none';

export function secretMatch(
  state: PendingSecretState,
  equals: { current: boolean; pending: boolean },
): SecretMatch {
  if (equals.pending && state !== 'none') return 'pending';
  if (equals.current && state !== 'expired') return 'current';
  return 'none';
}
