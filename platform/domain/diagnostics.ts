/**
 * Diagnostics (DESIGN.md §20), pure: the log window a request asks for, the part of the archive an upload's
 * `Content-Range` carries, whether an upload may go on, and which command outcomes fail a request.
 */
import {
  DIAGNOSTICS_DEFAULT_WINDOW_HOURS,
  DIAGNOSTICS_MAX_BYTES,
  DIAGNOSTICS_MAX_WINDOW_DAYS,
  type DiagnosticsStatus,
  type ValidationFailure,
} from '../../shared/index.js';
import { REASON } from './command-lifecycle.js';

const HOUR_MS = 3_600_000;
/** A window may end this far past the platform's clock (an operator's clock a little ahead), not more. */
export const DIAGNOSTICS_FUTURE_TOLERANCE_MS = 5 * 60_000;

/**
 * The window of logs asked for: `end_time` defaults to now, `start_time` to DIAGNOSTICS_DEFAULT_WINDOW_HOURS
 * before the end. A window longer than DIAGNOSTICS_MAX_WINDOW_DAYS, one ending more than a few minutes in the
 * future, or one that ends before it starts is refused, naming the field to change.
 */
export function diagnosticsWindow(
  asked: { start_time?: string | undefined; end_time?: string | undefined },
  nowMs: number,
): { startMs: number; endMs: number } | { refusal: ValidationFailure } {
  const endMs = asked.end_time === undefined ? nowMs : Date.parse(asked.end_time);
  const startMs =
    asked.start_time === undefined
      ? endMs - DIAGNOSTICS_DEFAULT_WINDOW_HOURS * HOUR_MS
      : Date.parse(asked.start_time);
  if (endMs > nowMs + DIAGNOSTICS_FUTURE_TOLERANCE_MS) {
    return {
      refusal: { field: 'end_time', value: asked.end_time, message: 'must not be in the future' },
    };
  }
  if (endMs <= startMs) {
    return {
      refusal: {
        field: 'start_time',
        value: asked.start_time,
        message: `must be earlier than end_time${asked.end_time === undefined ? ' (default: now)' : ''}`,
      },
    };
  }
  if (endMs - startMs > DIAGNOSTICS_MAX_WINDOW_DAYS * 24 * HOUR_MS) {
    return {
      refusal: {
        field: 'start_time',
        value: asked.start_time,
        message: `the window may span at most ${DIAGNOSTICS_MAX_WINDOW_DAYS} days`,
      },
    };
  }
  return { startMs, endMs };
}

/** The bytes `first`..`last` (inclusive) of an archive of `size` bytes. */
export interface ContentRange {
  first: number;
  last: number;
  size: number;
}

const CONTENT_RANGE = /^bytes (\d{1,16})-(\d{1,16})\/(\d{1,16})$/;

/** `Content-Range: bytes FIRST-LAST/SIZE` with FIRST ≤ LAST < SIZE; undefined when it is not one. */
export function parseContentRange(header: string | undefined): ContentRange | undefined {
  const match = header === undefined ? null : CONTENT_RANGE.exec(header.trim());
  if (!match) return undefined;
  const [first, last, size] = [Number(match[1]), Number(match[2]), Number(match[3])];
  if (first > last || last >= size) return undefined;
  return { first, last, size };
}

/** An archive the platform does not take: larger than DIAGNOSTICS_MAX_BYTES. */
export function tooLargeArchive(size: number): boolean {
  return size > DIAGNOSTICS_MAX_BYTES;
}

/**
 * Why an upload of `range` to a record in its current state cannot go on (answered 409 with the state, for the
 * charger to resume from `received`); undefined when it may. The record must still be open, have the same
 * declared size, and hold exactly the bytes before `first`.
 */
export function uploadConflict(
  record: { status: DiagnosticsStatus; size: number | null; received: number },
  range: ContentRange,
): string | undefined {
  if (record.status === 'available') return 'The archive is uploaded already';
  if (record.status === 'failed') return 'This diagnostics request has failed; the operator may ask again';
  if (record.size !== null && record.size !== range.size)
    return `The archive was declared as ${record.size} bytes; send the same archive`;
  if (range.first !== record.received)
    return `The platform holds ${record.received} bytes: send the archive from there`;
  return undefined;
}

/**
 * The command outcomes that fail the request they carry (unless its archive is available already), with the
 * reason when the command has none of its own: the platform's for those it ends itself (storage hands over an
 * expired or cancelled command with the reason it had before).
 */
const FAILING_OUTCOMES: Record<string, string | undefined> = {
  failed: undefined,
  rejected: undefined,
  expired: REASON.expired,
  cancelled: REASON.cancelledByOperator,
};

/**
 * The request an `upload_diagnostics` command that just reached its status fails, and why; undefined when it
 * fails none. The reason is the command's: the charger's, or the platform's for an expired or cancelled one.
 */
export function diagnosticsFailedBy(command: {
  command: string;
  status: string;
  reason: string | null;
  params: Record<string, unknown>;
}): { diagnosticsId: string; reason: string } | undefined {
  if (command.command !== 'upload_diagnostics' || !(command.status in FAILING_OUTCOMES)) return undefined;
  const id = command.params.diagnostics_id;
  if (typeof id !== 'string') return undefined;
  const reason =
    FAILING_OUTCOMES[command.status] ??
    command.reason ??
    `the charger reported the command ${command.status}`;
  return { diagnosticsId: id, reason };
}
