import * as z from 'zod/mini';
import { Identifier, Timestamp } from './primitives.js';

/**
 * Diagnostics (DESIGN.md §20): an operator asks a charger for one gzip'd tar archive (its logs for a window,
 * `status --json`, `diag --json`, the recent command journal, its configuration without secrets); the charger
 * builds it and uploads it, resumably, to `PUT /v1/device/diagnostics/{diagnostics_id}`; the operator reads its
 * status and downloads it. Written with zod/mini: the agent parses the command.
 */

/** Largest archive the platform takes, bytes. */
export const DIAGNOSTICS_MAX_BYTES = 20 * 1024 * 1024;
/** How long the platform keeps an archive (and a request's record), days. */
export const DIAGNOSTICS_RETENTION_DAYS = 30;
/** Default window when the operator gives no start: the last 24 hours. */
export const DIAGNOSTICS_DEFAULT_WINDOW_HOURS = 24;
/** Longest window, days (a charger keeps at most ~20 MiB of logs anyway). */
export const DIAGNOSTICS_MAX_WINDOW_DAYS = 31;

export const DIAGNOSTICS_STATUSES = ['requested', 'uploading', 'available', 'failed'] as const;
export type DiagnosticsStatus = (typeof DIAGNOSTICS_STATUSES)[number];

/**
 * The `upload_diagnostics` command's params: which request, the window of the logs (absolute time), and the
 * largest archive the platform takes. The charger uploads to `PUT /v1/device/diagnostics/{diagnostics_id}`.
 */
export const UploadDiagnosticsParams = z.object({
  diagnostics_id: Identifier,
  start_time: Timestamp,
  end_time: Timestamp,
  max_bytes: z.int().check(z.minimum(1), z.maximum(DIAGNOSTICS_MAX_BYTES)),
});

/**
 * `GET /v1/device/diagnostics/{diagnostics_id}` (and every PUT's answer): how many bytes the platform holds, so
 * that a cut upload goes on from there with `Content-Range: bytes RECEIVED-LAST/SIZE`.
 */
export const DiagnosticsUploadState = z.object({
  diagnostics_id: z.string(),
  status: z.enum(DIAGNOSTICS_STATUSES),
  /** Bytes stored so far, from the start of the archive. */
  received: z.int(),
  /** The archive's size as the charger declared it (Content-Range's total); null before the first PUT. */
  size: z.nullable(z.int()),
});
export type DiagnosticsUploadState = z.infer<typeof DiagnosticsUploadState>;
