import type Database from 'better-sqlite3';
import { newId } from '../../domain/ids.js';
import type { EnrolmentRepository, EnrolmentRow } from '../enrolment-repository.js';

const COLUMNS = 'enrolment_id, operator_id, site_id, name, ca_pem, ca_fingerprint, status, created_ms';

/** Enrolment groups (DESIGN.md §18) on SQLite. */
export function createSqliteEnrolments(db: Database.Database, now: () => number): EnrolmentRepository {
  const stmt = {
    // Another active group with this CA: nothing inserted (the partial unique index).
    insert: db.prepare(
      `INSERT INTO enrolment_groups (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, 'active', ?) ON CONFLICT DO NOTHING`,
    ),
    list: db.prepare(`SELECT ${COLUMNS} FROM enrolment_groups ORDER BY created_ms, enrolment_id`),
    active: db.prepare(
      `SELECT ${COLUMNS} FROM enrolment_groups WHERE status = 'active' ORDER BY created_ms, enrolment_id`,
    ),
    get: db.prepare(`SELECT ${COLUMNS} FROM enrolment_groups WHERE enrolment_id = ?`),
    revoke: db.prepare(`UPDATE enrolment_groups SET status = 'revoked' WHERE enrolment_id = ?`),
  };
  return {
    async createEnrolment(input) {
      const row: EnrolmentRow = { enrolment_id: newId('enr'), ...input, status: 'active', created_ms: now() };
      const { changes } = stmt.insert.run(
        row.enrolment_id,
        row.operator_id,
        row.site_id,
        row.name,
        row.ca_pem,
        row.ca_fingerprint,
        row.created_ms,
      );
      return changes === 1 ? row : 'duplicate_ca';
    },
    async listEnrolments() {
      return stmt.list.all() as EnrolmentRow[];
    },
    async activeEnrolments() {
      return stmt.active.all() as EnrolmentRow[];
    },
    async getEnrolment(enrolmentId) {
      return stmt.get.get(enrolmentId) as EnrolmentRow | undefined;
    },
    async revokeEnrolment(enrolmentId) {
      return stmt.revoke.run(enrolmentId).changes === 1;
    },
  };
}
