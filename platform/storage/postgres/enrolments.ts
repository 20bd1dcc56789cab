import { newId } from '../../domain/ids.js';
import type { EnrolmentRepository, EnrolmentRow } from '../enrolment-repository.js';
import type { PgDatabase } from './database.js';

const COLUMNS = 'enrolment_id, operator_id, site_id, name, ca_pem, ca_fingerprint, status, created_ms';

/** Enrolment groups (DESIGN.md §18) on PostgreSQL. */
export function createPgEnrolments(db: PgDatabase, now: () => number): EnrolmentRepository {
  return {
    async createEnrolment(input) {
      const row: EnrolmentRow = { enrolment_id: newId('enr'), ...input, status: 'active', created_ms: now() };
      // Another active group with this CA: nothing inserted (the partial unique index).
      const inserted = await db.query(
        `INSERT INTO enrolment_groups (${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, 'active', $7)
         ON CONFLICT (ca_fingerprint) WHERE status = 'active' DO NOTHING RETURNING 1`,
        [
          row.enrolment_id,
          row.operator_id,
          row.site_id,
          row.name,
          row.ca_pem,
          row.ca_fingerprint,
          row.created_ms,
        ],
      );
      return inserted.length === 1 ? row : 'duplicate_ca';
    },
    listEnrolments() {
      return db.query<EnrolmentRow>(
        `SELECT ${COLUMNS} FROM enrolment_groups ORDER BY created_ms, enrolment_id`,
      );
    },
    activeEnrolments() {
      return db.query<EnrolmentRow>(
        `SELECT ${COLUMNS} FROM enrolment_groups WHERE status = 'active' ORDER BY created_ms, enrolment_id`,
      );
    },
    async getEnrolment(enrolmentId) {
      const rows = await db.query<EnrolmentRow>(
        `SELECT ${COLUMNS} FROM enrolment_groups WHERE enrolment_id = $1`,
        [enrolmentId],
      );
      return rows[0];
    },
    async revokeEnrolment(enrolmentId) {
      const rows = await db.query(
        `UPDATE enrolment_groups SET status = 'revoked' WHERE enrolment_id = $1 RETURNING 1`,
        [enrolmentId],
      );
      return rows.length === 1;
    },
  };
}
