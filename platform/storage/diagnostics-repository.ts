import type { DiagnosticsStatus } from '../../shared/index.js';
import type { CommandRow, NewCommand } from './command-types.js';
import type { Page } from './page.js';

/**
 * Diagnostics archives (DESIGN.md §20): a request's record and the archive a charger uploads to it, stored in the
 * database in chunks of the record's `chunk_bytes` (both backends, as update artifacts), so that every instance
 * takes every upload and serves every download. Every chunk but the last is `chunk_bytes`; `received` is the
 * bytes stored, which is where an upload goes on. Each change is one compare-and-set, so that two uploads to
 * one record (a charger retrying while its first request is still being read, on another instance) cannot
 * interleave their bytes.
 */
export interface DiagnosticsRow {
  diagnostics_id: string;
  device_id: string;
  /** The operator client that asked. */
  client_id: string | null;
  /** The `upload_diagnostics` command queued with it. */
  command_id: string;
  status: DiagnosticsStatus;
  /** The log window asked for, epoch ms. */
  start_ms: number;
  end_ms: number;
  /** The archive's size as the charger declared it (Content-Range's total); null before its first upload. */
  size: number | null;
  /** Bytes stored, from the start of the archive. */
  received: number;
  /** Lowercase hex, once available. */
  sha256: string | null;
  /** Why it failed. */
  reason: string | null;
  chunk_bytes: number;
  created_ms: number;
  updated_ms: number;
}

export type NewDiagnostics = Pick<
  DiagnosticsRow,
  'diagnostics_id' | 'device_id' | 'client_id' | 'start_ms' | 'end_ms' | 'chunk_bytes' | 'created_ms'
>;

export interface DiagnosticsRepository {
  /**
   * Stores the request (`requested`) and queues `command` for its charger, in one transaction: the record names
   * the command, the command's params name the record. Answers the queued command.
   */
  createDiagnostics(row: NewDiagnostics, command: NewCommand): Promise<CommandRow>;
  getDiagnostics(diagnosticsId: string): Promise<DiagnosticsRow | undefined>;
  /** A device's records, newest first (created, then id, descending byte-wise). */
  listDeviceDiagnostics(deviceId: string, page: number, size: number): Promise<Page<DiagnosticsRow>>;
  /**
   * An upload begins: `requested` or `uploading` becomes `uploading` with the declared `size`, if the record
   * still holds `received` bytes and no other size. The row after, or undefined when it did not hold.
   */
  beginDiagnosticsUpload(
    diagnosticsId: string,
    expected: { received: number; size: number },
    nowMs: number,
  ): Promise<DiagnosticsRow | undefined>;
  /**
   * Stores chunk `index` (replacing a shorter last chunk: it was the end of an earlier request) and moves
   * `received` from `from` to the end of this chunk, if the record is `uploading` with `from` bytes. False
   * when it was not (another upload moved it, or it failed meanwhile): nothing stored.
   */
  putDiagnosticsChunk(
    diagnosticsId: string,
    index: number,
    data: Buffer,
    from: number,
    nowMs: number,
  ): Promise<boolean>;
  /** Chunks `first` to `last` (inclusive), in order; fewer if the record has fewer. */
  readDiagnosticsChunks(diagnosticsId: string, first: number, last: number): Promise<Buffer[]>;
  /** `uploading` with every byte stored becomes `available` with its sha256; undefined when it was not. */
  finishDiagnostics(
    diagnosticsId: string,
    sha256: string,
    nowMs: number,
  ): Promise<DiagnosticsRow | undefined>;
  /** `requested` or `uploading` becomes `failed` with `reason`; undefined when it was neither (or is gone). */
  failDiagnostics(diagnosticsId: string, reason: string, nowMs: number): Promise<DiagnosticsRow | undefined>;
}
