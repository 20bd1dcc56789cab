import type Database from 'better-sqlite3';
import type { DiagnosticsRepository, DiagnosticsRow } from '../diagnostics-repository.js';
import { pageOffset } from '../page.js';
import type { SqliteCommands } from './commands.js';

const DIAGNOSTICS_COLUMNS =
  'diagnostics_id, device_id, client_id, command_id, status, start_ms, end_ms, size, received, sha256, reason, ' +
  'chunk_bytes, created_ms, updated_ms';

export interface SqliteDiagnosticsDeps {
  db: Database.Database;
  /** The group commit (write-batcher.ts): chunks are written as they arrive, beside the chargers' writes. */
  write: <T>(run: () => T) => Promise<T>;
  commands: SqliteCommands['inTransaction'];
}

/** Diagnostics archives (DESIGN.md §20) on SQLite: a row per request, a BLOB per chunk. */
export function createSqliteDiagnostics({
  db,
  write,
  commands,
}: SqliteDiagnosticsDeps): DiagnosticsRepository {
  const stmt = {
    insert: db.prepare(
      `INSERT INTO diagnostics (${DIAGNOSTICS_COLUMNS})
       VALUES (?, ?, ?, ?, 'requested', ?, ?, NULL, 0, NULL, NULL, ?, ?, ?)`,
    ),
    get: db.prepare(`SELECT ${DIAGNOSTICS_COLUMNS} FROM diagnostics WHERE diagnostics_id = ?`),
    count: db.prepare('SELECT COUNT(*) AS n FROM diagnostics WHERE device_id = ?').pluck(),
    page: db.prepare(
      `SELECT ${DIAGNOSTICS_COLUMNS} FROM diagnostics WHERE device_id = ?
       ORDER BY created_ms DESC, diagnostics_id DESC LIMIT ? OFFSET ?`,
    ),
    begin: db.prepare(
      `UPDATE diagnostics SET status = 'uploading', size = ?, updated_ms = ?
       WHERE diagnostics_id = ? AND status IN ('requested', 'uploading') AND received = ?
         AND (size IS NULL OR size = ?)
       RETURNING ${DIAGNOSTICS_COLUMNS}`,
    ),
    advance: db.prepare(
      `UPDATE diagnostics SET received = chunk_bytes * ? + ?, updated_ms = ?
       WHERE diagnostics_id = ? AND status = 'uploading' AND received = ?`,
    ),
    putChunk: db.prepare(
      `INSERT INTO diagnostics_chunks (diagnostics_id, chunk_index, data) VALUES (?, ?, ?)
       ON CONFLICT (diagnostics_id, chunk_index) DO UPDATE SET data = excluded.data`,
    ),
    // On this connection: a download reads one chunk at a time as its client takes it (artifact-downloads.ts).
    chunks: db.prepare(
      `SELECT data FROM diagnostics_chunks WHERE diagnostics_id = ? AND chunk_index BETWEEN ? AND ?
       ORDER BY chunk_index`,
    ),
    finish: db.prepare(
      `UPDATE diagnostics SET status = 'available', sha256 = ?, updated_ms = ?
       WHERE diagnostics_id = ? AND status = 'uploading' AND received = size
       RETURNING ${DIAGNOSTICS_COLUMNS}`,
    ),
    fail: db.prepare(
      `UPDATE diagnostics SET status = 'failed', reason = ?, updated_ms = ?
       WHERE diagnostics_id = ? AND status IN ('requested', 'uploading')
       RETURNING ${DIAGNOSTICS_COLUMNS}`,
    ),
  };
  return {
    async createDiagnostics(row, command) {
      return db
        .transaction(() => {
          const [queued] = commands.insert([command], row.created_ms);
          if (!queued) throw new Error('createDiagnostics: no command queued');
          stmt.insert.run(
            row.diagnostics_id,
            row.device_id,
            row.client_id,
            queued.command_id,
            row.start_ms,
            row.end_ms,
            row.chunk_bytes,
            row.created_ms,
            row.created_ms,
          );
          return queued;
        })
        .immediate();
    },
    async getDiagnostics(diagnosticsId) {
      return stmt.get.get(diagnosticsId) as DiagnosticsRow | undefined;
    },
    async listDeviceDiagnostics(deviceId, page, size) {
      const total = stmt.count.get(deviceId) as number;
      const items = stmt.page.all(deviceId, size, pageOffset(page, size)) as DiagnosticsRow[];
      return { total, page, size, items };
    },
    async beginDiagnosticsUpload(diagnosticsId, expected, nowMs) {
      return stmt.begin.get(expected.size, nowMs, diagnosticsId, expected.received, expected.size) as
        | DiagnosticsRow
        | undefined;
    },
    putDiagnosticsChunk(diagnosticsId, index, data, from, nowMs) {
      return write(() => {
        if (stmt.advance.run(index, data.length, nowMs, diagnosticsId, from).changes !== 1) return false;
        stmt.putChunk.run(diagnosticsId, index, data);
        return true;
      });
    },
    async readDiagnosticsChunks(diagnosticsId, first, last) {
      return (stmt.chunks.all(diagnosticsId, first, last) as Array<{ data: Buffer }>).map((r) => r.data);
    },
    async finishDiagnostics(diagnosticsId, sha256, nowMs) {
      return stmt.finish.get(sha256, nowMs, diagnosticsId) as DiagnosticsRow | undefined;
    },
    async failDiagnostics(diagnosticsId, reason, nowMs) {
      return stmt.fail.get(reason, nowMs, diagnosticsId) as DiagnosticsRow | undefined;
    },
  };
}
