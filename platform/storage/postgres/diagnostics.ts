import type { DiagnosticsRepository, DiagnosticsRow } from '../diagnostics-repository.js';
import { pageOffset } from '../page.js';
import { insertCommands } from './commands.js';
import type { PgDatabase } from './database.js';

const COLUMNS =
  'diagnostics_id, device_id, client_id, command_id, status, start_ms, end_ms, size, received, sha256, reason, ' +
  'chunk_bytes, created_ms, updated_ms';

/** Diagnostics archives (DESIGN.md §20) on PostgreSQL: a row per request, a BYTEA per chunk. */
export function createPgDiagnostics(db: PgDatabase): DiagnosticsRepository {
  return {
    createDiagnostics(row, command) {
      return db.tx(async (sql) => {
        const [queued] = await insertCommands(sql, [command], row.created_ms);
        if (!queued) throw new Error('createDiagnostics: no command queued');
        await sql.query(
          `INSERT INTO diagnostics (${COLUMNS})
           VALUES ($1, $2, $3, $4, 'requested', $5, $6, NULL, 0, NULL, NULL, $7, $8, $8)`,
          [
            row.diagnostics_id,
            row.device_id,
            row.client_id,
            queued.command_id,
            row.start_ms,
            row.end_ms,
            row.chunk_bytes,
            row.created_ms,
          ],
        );
        return queued;
      });
    },
    async getDiagnostics(diagnosticsId) {
      const rows = await db.query<DiagnosticsRow>(
        `SELECT ${COLUMNS} FROM diagnostics WHERE diagnostics_id = $1`,
        [diagnosticsId],
      );
      return rows[0];
    },
    async listDeviceDiagnostics(deviceId, page, size) {
      const [counted] = await db.query<{ n: number }>(
        'SELECT COUNT(*) AS n FROM diagnostics WHERE device_id = $1',
        [deviceId],
      );
      const items = await db.query<DiagnosticsRow>(
        `SELECT ${COLUMNS} FROM diagnostics WHERE device_id = $1
         ORDER BY created_ms DESC, diagnostics_id COLLATE "C" DESC LIMIT $2 OFFSET $3`,
        [deviceId, size, pageOffset(page, size)],
      );
      return { total: counted?.n ?? 0, page, size, items };
    },
    async beginDiagnosticsUpload(diagnosticsId, expected, nowMs) {
      const rows = await db.query<DiagnosticsRow>(
        `UPDATE diagnostics SET status = 'uploading', size = $1, updated_ms = $2
         WHERE diagnostics_id = $3 AND status IN ('requested', 'uploading') AND received = $4
           AND (size IS NULL OR size = $1)
         RETURNING ${COLUMNS}`,
        [expected.size, nowMs, diagnosticsId, expected.received],
      );
      return rows[0];
    },
    putDiagnosticsChunk(diagnosticsId, index, data, from, nowMs) {
      // The row's lock orders two uploads to one record: the second finds `received` moved and stores nothing.
      return db.tx(async (sql) => {
        const moved = await sql.query(
          `UPDATE diagnostics SET received = chunk_bytes::bigint * $1 + $2, updated_ms = $3
           WHERE diagnostics_id = $4 AND status = 'uploading' AND received = $5 RETURNING 1`,
          [index, data.length, nowMs, diagnosticsId, from],
        );
        if (moved.length !== 1) return false;
        await sql.query(
          `INSERT INTO diagnostics_chunks (diagnostics_id, chunk_index, data) VALUES ($1, $2, $3)
           ON CONFLICT (diagnostics_id, chunk_index) DO UPDATE SET data = excluded.data`,
          [diagnosticsId, index, data],
        );
        return true;
      });
    },
    async readDiagnosticsChunks(diagnosticsId, first, last) {
      const rows = await db.query<{ data: Buffer }>(
        `SELECT data FROM diagnostics_chunks WHERE diagnostics_id = $1 AND chunk_index BETWEEN $2 AND $3
         ORDER BY chunk_index`,
        [diagnosticsId, first, last],
      );
      return rows.map((r) => r.data);
    },
    async finishDiagnostics(diagnosticsId, sha256, nowMs) {
      const rows = await db.query<DiagnosticsRow>(
        `UPDATE diagnostics SET status = 'available', sha256 = $1, updated_ms = $2
         WHERE diagnostics_id = $3 AND status = 'uploading' AND received = size
         RETURNING ${COLUMNS}`,
        [sha256, nowMs, diagnosticsId],
      );
      return rows[0];
    },
    async failDiagnostics(diagnosticsId, reason, nowMs) {
      const rows = await db.query<DiagnosticsRow>(
        `UPDATE diagnostics SET status = 'failed', reason = $1, updated_ms = $2
         WHERE diagnostics_id = $3 AND status IN ('requested', 'uploading')
         RETURNING ${COLUMNS}`,
        [reason, nowMs, diagnosticsId],
      );
      return rows[0];
    },
  };
}
