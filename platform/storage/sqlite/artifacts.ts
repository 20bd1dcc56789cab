import type Database from 'better-sqlite3';
import type { ArtifactRepository, ArtifactRow } from '../artifact-repository.js';
import { pageOffset } from '../page.js';
import { placeholders, type StatementCache } from './database.js';
import type { SqlReader } from './reader.js';

const COLUMNS =
  'artifact_id, operator_id, kind, version, target, sha256, size, signature, status, chunk_bytes, created_ms';

export interface SqliteArtifactsDeps {
  db: Database.Database;
  prepared: StatementCache;
  /** Listings are read here: off the thread that serves chargers in the server (reader.ts). */
  reader: SqlReader;
  /** The group commit (write-batcher.ts): chunks are written as they arrive, beside the chargers' writes. */
  write: <T>(run: () => T) => Promise<T>;
}

/** Update artifacts (DESIGN.md §19) on SQLite: a row per artifact, a BLOB per chunk. */
export function createSqliteArtifacts({
  db,
  prepared,
  reader,
  write,
}: SqliteArtifactsDeps): ArtifactRepository {
  const stmt = {
    // The release's unique index: nothing inserted when the operator has it already.
    begin: db.prepare(
      `INSERT INTO artifacts (${COLUMNS}) VALUES (?, ?, ?, ?, ?, '', 0, ?, 'uploading', ?, ?) ON CONFLICT DO NOTHING`,
    ),
    // Only into an upload still under way: one deleted meanwhile takes no more chunks.
    putChunk: db.prepare(
      `INSERT INTO artifact_chunks (artifact_id, chunk_index, data)
       SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM artifacts WHERE artifact_id = ? AND status = 'uploading')`,
    ),
    finish: db.prepare(
      `UPDATE artifacts SET status = 'ready', sha256 = ?, size = ? WHERE artifact_id = ? AND status = 'uploading'
       RETURNING ${COLUMNS}`,
    ),
    deleteChunks: db.prepare('DELETE FROM artifact_chunks WHERE artifact_id = ?'),
    deleteRow: db.prepare('DELETE FROM artifacts WHERE artifact_id = ?'),
    get: db.prepare(`SELECT ${COLUMNS} FROM artifacts WHERE artifact_id = ? AND status = 'ready'`),
    stale: db.prepare(`SELECT artifact_id FROM artifacts WHERE status = 'uploading' AND created_ms < ?`),
    // On this connection, not the reader's worker: a download reads one chunk (256 KiB, by primary key) at a time
    // as its charger takes it, a fraction of a millisecond, where the worker's round trip and the copy of every
    // chunk between threads cost more than the read (bench:updates: 0.2 of the bare server's throughput then).
    chunks: db.prepare(
      `SELECT c.data FROM artifact_chunks c JOIN artifacts a ON a.artifact_id = c.artifact_id
       WHERE c.artifact_id = ? AND a.status = 'ready' AND c.chunk_index BETWEEN ? AND ? ORDER BY c.chunk_index`,
    ),
  };
  return {
    async beginArtifact(row) {
      const { changes } = stmt.begin.run(
        row.artifact_id,
        row.operator_id,
        row.kind,
        row.version,
        row.target,
        row.signature,
        row.chunk_bytes,
        row.created_ms,
      );
      return changes === 1 ? 'ok' : 'duplicate';
    },
    async putArtifactChunk(artifactId, index, data) {
      await write(() => stmt.putChunk.run(artifactId, index, data, artifactId));
    },
    async finishArtifact(artifactId, measured) {
      return stmt.finish.get(measured.sha256, measured.size, artifactId) as ArtifactRow | undefined;
    },
    async deleteArtifact(artifactId) {
      return db
        .transaction(() => {
          stmt.deleteChunks.run(artifactId);
          return stmt.deleteRow.run(artifactId).changes === 1;
        })
        .immediate();
    },
    async getArtifactForOperators(artifactId, operatorIds) {
      const row = stmt.get.get(artifactId) as ArtifactRow | undefined;
      return row && operatorIds.includes(row.operator_id) ? row : undefined;
    },
    async getArtifact(artifactId) {
      return stmt.get.get(artifactId) as ArtifactRow | undefined;
    },
    async listArtifacts(operatorIds, { kind, page, size }) {
      if (operatorIds.length === 0) return { total: 0, page, size, items: [] };
      const where = `operator_id IN (${placeholders(operatorIds.length)}) AND status = 'ready'${kind ? ' AND kind = ?' : ''}`;
      const params = kind ? [...operatorIds, kind] : [...operatorIds];
      const counted = prepared(`SELECT COUNT(*) AS n FROM artifacts WHERE ${where}`).get(...params) as {
        n: number;
      };
      const items = await reader.all<ArtifactRow>(
        `SELECT ${COLUMNS} FROM artifacts WHERE ${where} ORDER BY created_ms DESC, artifact_id DESC LIMIT ? OFFSET ?`,
        [...params, size, pageOffset(page, size)],
      );
      return { total: counted.n, page, size, items };
    },
    async readArtifactChunks(artifactId, first, last) {
      const rows = stmt.chunks.all(artifactId, first, last) as Array<{ data: Buffer }>;
      return rows.map((r) => r.data);
    },
    async staleArtifactUploads(beforeMs) {
      return (stmt.stale.all(beforeMs) as Array<{ artifact_id: string }>).map((r) => r.artifact_id);
    },
  };
}
