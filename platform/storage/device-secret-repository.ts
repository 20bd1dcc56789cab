/** What a rotation request found or stored (`DeviceSecretRepository.rotateSecret`). */
export type StoredRotationOutcome =
  /** The pending secret, sealed: the one given (`created`), or the one already pending, answered again. */
  | { kind: 'pending'; secret_sealed: string; pending_since_ms: number; created: boolean }
  /** A pending secret outlived its grace: the generation the request's token belongs to has ended. */
  | { kind: 'expired' };

/**
 * Two-phase rotation of device secrets (DESIGN.md §17, rules in domain/secret-rotation.ts): each call is one
 * transaction, so that instances racing on one device agree on a single pending secret and a single promotion.
 */
export interface DeviceSecretRepository {
  /**
   * Stores `freshSealed` as a registered device's pending secret, or answers the one already pending while its
   * grace lasts; the current secret is untouched. Undefined for a device that is unknown or not registered.
   */
  rotateSecret(
    deviceId: string,
    nowMs: number,
    graceMs: number,
    freshSealed: string,
  ): Promise<StoredRotationOutcome | undefined>;
  /**
   * Makes the pending secret sealed as `pendingSealed` the device's only secret, in the next generation (the
   * old secret and every token of the old generation are revoked), and answers that generation. Also answers
   * it when another request promoted the same secret first; undefined when `pendingSealed` is neither the
   * device's pending nor its current secret any more (a reset came between).
   */
  promotePendingSecret(deviceId: string, pendingSealed: string): Promise<number | undefined>;
  /** Promotes every pending secret created at or before `pendingSinceMs` (grace over); answers their devices. */
  promoteExpiredSecrets(pendingSinceMs: number): Promise<string[]>;
}
