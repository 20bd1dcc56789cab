/**
 * Keeping a diagnostics archive under its size limit (the platform takes at most 20 MiB, DESIGN.md §20). Only the
 * logs can be large, so they give way, oldest lines first. Pure: the archive is built, measured, and this says
 * how much of the newest log to keep for the next try.
 */

/** Aim below the limit: gzip does not shrink a shorter log exactly in proportion. */
export const TRUNCATION_MARGIN = 0.9;

/** The last try keeps no log at all, so building ends after this many. */
export const MAX_ATTEMPTS = 6;

export type LogBudget =
  | { kind: 'fits' }
  /** Build again with the newest `keepLogBytes` of the log (whole lines only, so possibly fewer). */
  | { kind: 'shrink'; keepLogBytes: number }
  /** Too large even without a single log line. */
  | { kind: 'too_large' };

export interface BudgetInput {
  /** The compressed archive just built. */
  archiveBytes: number;
  maxBytes: number;
  /** The (uncompressed) log it held. */
  logBytes: number;
  /** 0 for the first build. */
  attempt: number;
}

export function logBudget({ archiveBytes, maxBytes, logBytes, attempt }: BudgetInput): LogBudget {
  if (archiveBytes <= maxBytes) return { kind: 'fits' };
  if (logBytes <= 0) return { kind: 'too_large' };
  if (attempt + 2 >= MAX_ATTEMPTS) return { kind: 'shrink', keepLogBytes: 0 };
  // The log is nearly all of the archive: shrink it in proportion, and always by at least a byte.
  const scaled = Math.floor(logBytes * (maxBytes / archiveBytes) * TRUNCATION_MARGIN);
  return { kind: 'shrink', keepLogBytes: Math.max(0, Math.min(scaled, logBytes - 1)) };
}

/** Where the newest `keepBytes` of a `size`-byte file begin (the cut then moves forward to a line start). */
export function cutOffset(size: number, keepBytes: number): number {
  return Math.max(0, size - Math.max(0, keepBytes));
}
