import { SIGNATURE_WINDOW_SECONDS } from '../../shared/index.js';

/**
 * Remembers the signatures used inside the replay window. The in-memory one serves one platform instance and
 * answers at once; a shared one (Redis, several instances) answers later.
 */
export interface ReplayCache {
  /** False when this signature was already used inside the window. */
  remember(signature: string, nowMs: number): boolean | Promise<boolean>;
  /** Signatures held (the in-memory cache only). */
  size?(): number;
}

/** Signatures seen inside the replay window; each is refused a second time. */
export function createReplayCache(windowMs = SIGNATURE_WINDOW_SECONDS * 2 * 1000) {
  const seen = new Map<string, number>();
  let lastSweep = 0;
  return {
    /** False when this signature was already used. */
    remember(signature: string, nowMs: number): boolean {
      if (nowMs - lastSweep > 10_000) {
        for (const [sig, expires] of seen) if (expires <= nowMs) seen.delete(sig);
        lastSweep = nowMs;
      }
      const expires = seen.get(signature);
      if (expires !== undefined && expires > nowMs) return false;
      seen.set(signature, nowMs + windowMs);
      return true;
    },
    size: () => seen.size,
  } satisfies ReplayCache;
}
