import { pendingSecretState, rotationAnswer } from '../domain/secret-rotation.js';
import type { StoredRotationOutcome } from './device-secret-repository.js';

/** What both backends read of a device before answering a rotation request. */
export interface StoredRotation {
  pending_secret_sealed: string | null;
  pending_since_ms: number | null;
}

/**
 * The answer a rotation request gets from what is stored (domain/secret-rotation.ts), or `create` when the
 * backend must store a new pending secret: one decision for SQLite and PostgreSQL, each inside its own
 * transaction.
 */
export function storedRotationAnswer(
  row: StoredRotation,
  nowMs: number,
  graceMs: number,
): StoredRotationOutcome | 'create' {
  const answer = rotationAnswer(pendingSecretState(row.pending_since_ms, nowMs, graceMs));
  if (answer === 'revoked') return { kind: 'expired' };
  if (answer === 'repeat' && row.pending_secret_sealed !== null && row.pending_since_ms !== null) {
    return {
      kind: 'pending',
      secret_sealed: row.pending_secret_sealed,
      pending_since_ms: row.pending_since_ms,
      created: false,
    };
  }
  return 'create';
}
