import type { ArtifactRepository, ArtifactRow } from '../artifact-repository.js';
import { pageOffset } from '../page.js';
import type { PgDatabase } from './database.js';

const COLUMNS =
  'artifact_id, operator_id, kind, version, target, sha256, size, signature, status, chunk_bytes, created_ms';

/** Update artifacts (DESIGN.md §19) on PostgreSQL: a row per artifact, a BYTEA per chunk. */
export function createPgArtifacts(db: PgDatabase): ArtifactRepository {
  const getReady = async (artifactId: string) =>
    (
      await db.query<ArtifactRow>(
        `SELECT ${COLUMNS} FROM artifacts WHERE artifact_id = $1 AND status = 'ready'`,
        [artifactId],
      )
    )[0];
  return {
    async beginArtifact(row) {
      // The release's unique index: nothing inserted when the operator has it already.
      const inserted = await db.query(
        `INSERT INTO artifacts (${COLUMNS}) VALUES ($1, $2, $3, $4, $5, '', 0, $6, 'uploading', $7, $8)
         ON CONFLICT (operator_id, kind, version, target) DO NOTHING RETURNING 1`,
        [
          row.artifact_id,
          row.operator_id,
          row.kind,
          row.version,
          row.target,
          row.signature,
          row.chunk_bytes,
          row.created_ms,
        ],
      );
      return inserted.length === 1 ? 'ok' : 'duplicate';
    },
    async putArtifactChunk(artifactId, index, data) {
      // Only into an upload still under way: one deleted meanwhile takes no more chunks.
      await db.query(
        `INSERT INTO artifact_chunks (artifact_id, chunk_index, data)
         SELECT $1, $2, $3 WHERE EXISTS (SELECT 1 FROM artifacts WHERE artifact_id = $1 AND status = 'uploading')`,
        [artifactId, index, data],
      );
    },
    async finishArtifact(artifactId, measured) {
      const rows = await db.query<ArtifactRow>(
        `UPDATE artifacts SET status = 'ready', sha256 = $1, size = $2 WHERE artifact_id = $3 AND status = 'uploading'
         RETURNING ${COLUMNS}`,
        [measured.sha256, measured.size, artifactId],
      );
      return rows[0];
    },
    deleteArtifact(artifactId) {
      return db.tx(async (sql) => {
        await sql.query('DELETE FROM artifact_chunks WHERE artifact_id = $1', [artifactId]);
        const rows = await sql.query('DELETE FROM artifacts WHERE artifact_id = $1 RETURNING 1', [
          artifactId,
        ]);
        return rows.length === 1;
      });
    },
    async getArtifactForOperators(artifactId, operatorIds) {
      const row = await getReady(artifactId);
      return row && operatorIds.includes(row.operator_id) ? row : undefined;
    },
    getArtifact: getReady,
    async listArtifacts(operatorIds, { kind, page, size }) {
      if (operatorIds.length === 0) return { total: 0, page, size, items: [] };
      const where = `operator_id = ANY($1) AND status = 'ready'${kind ? ' AND kind = $2' : ''}`;
      const params: unknown[] = kind ? [operatorIds, kind] : [operatorIds];
      const n = params.length;
      const [counted] = await db.query<{ n: number }>(
        `SELECT COUNT(*) AS n FROM artifacts WHERE ${where}`,
        params,
      );
      const items = await db.query<ArtifactRow>(
        `SELECT ${COLUMNS} FROM artifacts WHERE ${where}
         ORDER BY created_ms DESC, artifact_id COLLATE "C" DESC LIMIT $${n + 1} OFFSET $${n + 2}`,
        [...params, size, pageOffset(page, size)],
      );
      return { total: counted?.n ?? 0, page, size, items };
    },
    async readArtifactChunks(artifactId, first, last) {
      const rows = await db.query<{ data: Buffer }>(
        `SELECT c.data FROM artifact_chunks c JOIN artifacts a ON a.artifact_id = c.artifact_id
         WHERE c.artifact_id = $1 AND a.status = 'ready' AND c.chunk_index BETWEEN $2 AND $3
         ORDER BY c.chunk_index`,
        [artifactId, first, last],
      );
      return rows.map((r) => r.data);
    },
    async staleArtifactUploads(beforeMs) {
      const rows = await db.query<{ artifact_id: string }>(
        `SELECT artifact_id FROM artifacts WHERE status = 'uploading' AND created_ms < $1`,
        [beforeMs],
      );
      return rows.map((r) => r.artifact_id);
    },
  };
}
