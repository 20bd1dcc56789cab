import { accessSync, constants, mkdirSync, statSync } from 'node:fs';
import Database from 'better-sqlite3';

/**
 * Storage faults: the data directory's file system is full, read-only, or failing. They are the operator's to
 * fix, not the caller's, and they pass: the API answers them with 503 (see `http-errors.ts`), the admin CLI and
 * `serve` with a message naming the directory (docs/decisions.md, "Storage faults").
 */
export type StorageFaultKind = 'full' | 'read_only' | 'unavailable';

export interface StorageFault {
  kind: StorageFaultKind;
  /** Set when the fault is the PostgreSQL server's, not the data directory's. */
  postgres?: true;
  /** SQLite's (extended) result code, e.g. SQLITE_FULL, SQLITE_IOERR_WRITE; or the errno code, e.g. EROFS. */
  code: string;
}

/**
 * The storage fault a SQLite error stands for, if any: SQLITE_FULL, SQLITE_READONLY*, SQLITE_IOERR* or
 * SQLITE_CANTOPEN* (better-sqlite3's `SqliteError.code` carries the extended code, e.g. SQLITE_IOERR_WRITE).
 */
export function storageFaultOf(err: unknown): StorageFault | undefined {
  if (!(err instanceof Database.SqliteError)) return postgresFaultOf(err);
  const code = err.code;
  if (code === 'SQLITE_FULL') return { kind: 'full', code };
  if (code.startsWith('SQLITE_READONLY')) return { kind: 'read_only', code };
  if (code.startsWith('SQLITE_IOERR') || code.startsWith('SQLITE_CANTOPEN'))
    return { kind: 'unavailable', code };
  return undefined;
}

/**
 * Errors that came out of the PostgreSQL driver (`postgres/database.ts` marks them as they leave it). A socket
 * error code alone says nothing about whose socket it was: a client that cuts its upload raises ECONNRESET too,
 * and must not be logged as "the PostgreSQL server cannot be reached" (issue 33).
 */
const driverErrors = new WeakSet<object>();

/** Marks `err` as the PostgreSQL driver's own (and returns it, for `throw markDriverError(err)`). */
export function markDriverError<T>(err: T): T {
  if (err !== null && typeof err === 'object') driverErrors.add(err);
  return err;
}

/** Network errors of the PostgreSQL connection, as Node reports them. */
const CONNECTION_ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTFOUND',
  'EPIPE',
]);
/** What `pg` and `pg-pool` throw, by message (their own wording), when the server is gone or slow to connect. */
const CONNECTION_MESSAGES =
  /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error)/;

/**
 * The storage fault a PostgreSQL error stands for: the server unreachable or shutting down (SQLSTATE class 08,
 * 57P01–57P03), out of disk (53100) or other resources (53), in read-only mode (25006). A constraint or
 * syntax error is a bug, not a fault. Codes count only on errors the driver raised (`markDriverError`).
 */
function postgresFaultOf(err: unknown): StorageFault | undefined {
  if (!(err instanceof Error)) return undefined;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && driverErrors.has(err)) {
    if (code === '53100') return { kind: 'full', code, postgres: true };
    if (code === '25006') return { kind: 'read_only', code, postgres: true };
    if (code.startsWith('08') || code.startsWith('53') || /^57P0[123]$/.test(code))
      return { kind: 'unavailable', code, postgres: true };
    if (CONNECTION_ERRNOS.has(code)) return { kind: 'unavailable', code, postgres: true };
  }
  if (CONNECTION_MESSAGES.test(err.message))
    return { kind: 'unavailable', code: 'PG_CONNECTION', postgres: true };
  return undefined;
}

/** The same for a file-system error from the data directory itself (creating it, keys, certificates). */
function fileSystemFaultOf(err: unknown): StorageFault | undefined {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  if (code === 'ENOSPC' || code === 'EDQUOT') return { kind: 'full', code };
  if (code === 'EROFS' || code === 'EACCES' || code === 'EPERM') return { kind: 'read_only', code };
  if (code === 'EIO') return { kind: 'unavailable', code };
  return undefined;
}

/** A data directory the platform cannot use; the message names it and says what to do. */
export class DataDirError extends Error {
  readonly fault: StorageFault | undefined;
  constructor(message: string, fault?: StorageFault) {
    super(message);
    this.name = 'DataDirError';
    this.fault = fault;
  }
}

/** What an operator reads when `serve` or an admin command cannot use the data directory. */
export function dataDirFaultMessage(dataDir: string, fault: StorageFault): string {
  switch (fault.kind) {
    case 'full':
      return `no space left for the data directory ${dataDir}: free space on its file system and try again`;
    case 'read_only':
      return fault.code === 'EACCES' || fault.code === 'EPERM'
        ? `the data directory ${dataDir} is not writable by this user`
        : `the data directory ${dataDir} is read-only: make it writable (remount its file system read-write) and try again`;
    default:
      return `cannot read or write the data directory ${dataDir} (${fault.code}): check its disk and file system`;
  }
}

/** Rethrows a storage fault as a DataDirError naming the directory; other errors unchanged. */
export function asDataDirError(dataDir: string, err: unknown): unknown {
  if (err instanceof DataDirError) return err;
  const fault = storageFaultOf(err) ?? fileSystemFaultOf(err);
  return fault ? new DataDirError(dataDirFaultMessage(dataDir, fault), fault) : err;
}

/**
 * Creates the data directory if needed (0700) and fails fast, with a clear message, when it cannot be written
 * (a read-only mount, missing permissions) or is open to other users: before anything else opens it.
 */
export function ensureWritableDataDir(dataDir: string): void {
  let mode: number;
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    accessSync(dataDir, constants.W_OK);
    mode = statSync(dataDir).mode;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTDIR' || code === 'EEXIST')
      throw new DataDirError(`the data directory ${dataDir} is not a directory`);
    const converted = asDataDirError(dataDir, err);
    if (converted instanceof DataDirError) throw converted;
    throw new DataDirError(`cannot use the data directory ${dataDir}: ${(err as Error).message}`);
  }
  const refusal = dataDirModeRefusal(dataDir, mode);
  if (refusal) throw new DataDirError(refusal);
}

/**
 * The data directory holds the database (every charger's sealed secret) and, without `--key-file`, the key:
 * only its owner may enter it (DESIGN.md §18). Any group or other permission is refused, read-only included:
 * a group that may read the directory may copy the database and, with it, the key.
 */
export function dataDirModeRefusal(dataDir: string, mode: number): string | undefined {
  const open = mode & 0o077;
  if (open === 0) return undefined;
  const octal = (mode & 0o777).toString(8).padStart(4, '0');
  return (
    `the data directory ${dataDir} is open to other users (mode ${octal}); only its owner may use it: ` +
    `run \`chmod 700 ${dataDir}\` and try again`
  );
}
