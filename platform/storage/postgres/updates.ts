import type { UpdateDeviceState } from '../../../shared/index.js';
import { pageOffset } from '../page.js';
import type {
  UpdateCandidate,
  UpdateDeviceObservation,
  UpdateDeviceRow,
  UpdateRepository,
} from '../update-repository.js';
import {
  FINAL_UPDATE_STATES,
  observationSql,
  type RawUpdate,
  toObservation,
  toUpdate,
  toUpdateDevice,
  UPDATE_CANCELLED_REASON,
  UPDATE_COLUMNS,
  UPDATE_DEVICE_COLUMNS,
  updateValues,
} from '../update-rows.js';
import { cancelQueuedCommands, insertCommands } from './commands.js';
import type { PgDatabase } from './database.js';

const C = 'COLLATE "C"';
const JSON_CASTS: Record<string, string> = {
  target_ids: '::jsonb',
  install_window: '::jsonb',
  rollout: '::jsonb',
};
const UPDATE_INSERT = `INSERT INTO updates (${UPDATE_COLUMNS}) VALUES (${UPDATE_COLUMNS.split(', ')
  .map((col, i) => `$${i + 1}${JSON_CASTS[col] ?? ''}`)
  .join(', ')})`;
const FINAL = FINAL_UPDATE_STATES.map((s) => `'${s}'`).join(', ');

/** Updates (campaigns, DESIGN.md §19) on PostgreSQL: every change one transaction, each move a compare-and-set. */
export function createPgUpdates(db: PgDatabase): UpdateRepository {
  return {
    async updateCandidates(operatorId, target) {
      let text = `SELECT d.device_id, d.site_id, s.timezone, d.model, d.firmware_version, d.agent_version
                  FROM devices d JOIN sites s ON s.site_id = d.site_id WHERE s.operator_id = $1 AND d.registered`;
      const args: unknown[] = [operatorId];
      if (target.type === 'site' || target.type === 'device') {
        text += ` AND ${target.type === 'site' ? 's.site_id' : 'd.device_id'} = ANY($2::text[])`;
        args.push([...target.ids]);
      } else if (target.type === 'operator' && !target.ids.includes(operatorId)) {
        return [];
      }
      return db.query<UpdateCandidate>(`${text} ORDER BY d.device_id ${C}`, args);
    },
    async createUpdate(update, devices) {
      await db.tx(async (sql) => {
        await sql.query(UPDATE_INSERT, updateValues(update));
        if (devices.length === 0) return;
        await sql.query(
          `INSERT INTO update_devices (${UPDATE_DEVICE_COLUMNS})
           SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(update_id text, device_id text, batch integer,
             state text, command_id text, version_before text, version_after text, reason text, state_ms bigint,
             updated_ms bigint)`,
          [JSON.stringify(devices)],
        );
      });
    },
    async getUpdate(updateId) {
      const [raw] = await db.query<RawUpdate>(`SELECT ${UPDATE_COLUMNS} FROM updates WHERE update_id = $1`, [
        updateId,
      ]);
      return raw && toUpdate(raw);
    },
    async listUpdateDevices(updateId) {
      const rows = await db.query<UpdateDeviceRow>(
        `SELECT ${UPDATE_DEVICE_COLUMNS} FROM update_devices WHERE update_id = $1 ORDER BY batch, device_id ${C}`,
        [updateId],
      );
      return rows.map(toUpdateDevice);
    },
    async listUpdates(operatorIds, { status, page, size }) {
      if (operatorIds.length === 0) return { total: 0, page, size, items: [] };
      const where = `operator_id = ANY($1::text[])${status ? ' AND status = $2' : ''}`;
      const params: unknown[] = status ? [operatorIds, status] : [operatorIds];
      const [count] = await db.query<{ n: string }>(
        `SELECT COUNT(*) AS n FROM updates WHERE ${where}`,
        params,
      );
      const n = params.length;
      const rows = await db.query<RawUpdate & { progress: Record<string, number> | null }>(
        `SELECT ${UPDATE_COLUMNS.split(', ')
          .map((c) => `u.${c}`)
          .join(', ')},
           (SELECT jsonb_object_agg(state, n) FROM (SELECT state, COUNT(*) AS n FROM update_devices
              WHERE update_id = u.update_id GROUP BY state) s) AS progress
         FROM updates u WHERE ${where}
         ORDER BY created_ms DESC, update_id ${C} DESC LIMIT $${n + 1} OFFSET $${n + 2}`,
        [...params, size, pageOffset(page, size)],
      );
      const items = rows.map((raw) => {
        const progress = raw.progress ?? {};
        const device_count = Object.values(progress).reduce((a, b) => a + Number(b), 0);
        return { ...toUpdate(raw), progress, device_count };
      });
      return { total: Number(count?.n ?? 0), page, size, items };
    },
    async updatesInProgress() {
      const rows = await db.query<RawUpdate>(
        `SELECT ${UPDATE_COLUMNS} FROM updates WHERE status IN ('running', 'paused') OR (status = 'cancelled'
           AND EXISTS (SELECT 1 FROM update_devices ud WHERE ud.update_id = updates.update_id
             AND ud.state NOT IN (${FINAL}))) ORDER BY created_ms`,
      );
      return rows.map(toUpdate);
    },
    async startUpdateBatch(updateId, batch, batchCommands, nowMs) {
      return db.tx(async (sql) => {
        const moved = await sql.query(
          `UPDATE updates SET current_batch = $1, updated_ms = $2
           WHERE update_id = $3 AND status = 'running' AND current_batch = $4 RETURNING 1`,
          [batch, nowMs, updateId, batch - 1],
        );
        if (moved.length !== 1) return undefined;
        const rows = await insertCommands(
          sql,
          batchCommands.map((c) => c.command),
          nowMs,
        );
        await sql.query(
          `UPDATE update_devices ud SET state = 'queued', command_id = q.command_id, state_ms = $2, updated_ms = $2
           FROM jsonb_to_recordset($3::jsonb) AS q(device_id text, command_id text)
           WHERE ud.update_id = $1 AND ud.device_id = q.device_id AND ud.state = 'pending'`,
          [
            updateId,
            nowMs,
            JSON.stringify(rows.map((r) => ({ device_id: r.device_id, command_id: r.command_id }))),
          ],
        );
        return rows;
      });
    },
    async applyUpdateDeviceChanges(updateId, changes, nowMs) {
      if (changes.length === 0) return [];
      const applied = await db.query<{ device_id: string }>(
        `UPDATE update_devices ud SET state = c.state, reason = c.reason,
           version_after = COALESCE(c.version_after, ud.version_after), state_ms = $2, updated_ms = $2
         FROM jsonb_to_recordset($3::jsonb) AS c(device_id text, "from" text, state text, reason text,
           version_after text)
         WHERE ud.update_id = $1 AND ud.device_id = c.device_id AND ud.state = c."from"
         RETURNING ud.device_id`,
        [updateId, nowMs, JSON.stringify(changes)],
      );
      const moved = new Set(applied.map((r) => r.device_id));
      return changes.filter((c) => moved.has(c.device_id));
    },
    async setUpdateStatus(updateId, from, to, nowMs) {
      const rows = await db.query(
        `UPDATE updates SET status = $1, reason = $2, updated_ms = $3,
           waived_batch = COALESCE($4::integer, waived_batch)
         WHERE update_id = $5 AND status = ANY($6::text[]) RETURNING 1`,
        [to.status, to.reason, nowMs, to.waived_batch ?? null, updateId, from],
      );
      return rows.length === 1;
    },
    async cancelUpdate(updateId, nowMs) {
      return db.tx(async (sql) => {
        const won = await sql.query(
          `UPDATE updates SET status = 'cancelled', reason = $1, updated_ms = $2
           WHERE update_id = $3 AND status IN ('running', 'paused') RETURNING 1`,
          [UPDATE_CANCELLED_REASON, nowMs, updateId],
        );
        if (won.length !== 1) return undefined;
        const open = await sql.query<{ command_id: string }>(
          `SELECT command_id FROM update_devices WHERE update_id = $1 AND state = 'queued' AND command_id IS NOT NULL`,
          [updateId],
        );
        const cancelled = await cancelQueuedCommands(
          sql,
          open.map((r) => r.command_id),
          UPDATE_CANCELLED_REASON,
          nowMs,
        );
        await sql.query(
          `UPDATE update_devices SET state = 'cancelled', reason = $1, state_ms = $2, updated_ms = $2
           WHERE update_id = $3 AND (state = 'pending' OR (state = 'queued' AND command_id = ANY($4::text[])))`,
          [UPDATE_CANCELLED_REASON, nowMs, updateId, cancelled.map((c) => c.command_id)],
        );
        return { cancelled };
      });
    },
    async observeUpdate(updateId, states: readonly UpdateDeviceState[]) {
      if (states.length === 0) return [];
      const sql = observationSql((i) => `$${i}`, states.map((s) => `'${s}'`).join(', '), 'id');
      return (await db.query<UpdateDeviceObservation>(sql, [updateId])).map(toObservation);
    },
    async devicesInOpenUpdates(deviceIds) {
      if (deviceIds.length === 0) return [];
      return db.query<{ device_id: string; update_id: string }>(
        `SELECT device_id, update_id FROM update_devices
         WHERE device_id = ANY($1::text[]) AND state NOT IN (${FINAL})`,
        [deviceIds],
      );
    },
    async deviceHasUpdateFor(deviceId, artifactId) {
      const rows = await db.query(
        `SELECT 1 FROM update_devices ud JOIN updates u ON u.update_id = ud.update_id
         WHERE ud.device_id = $1 AND u.artifact_id = $2 AND ud.state NOT IN ('pending', 'skipped', 'cancelled')
         LIMIT 1`,
        [deviceId, artifactId],
      );
      return rows.length > 0;
    },
    async artifactInUse(artifactId) {
      const rows = await db.query(
        `SELECT 1 FROM updates WHERE artifact_id = $1 AND status IN ('running', 'paused') LIMIT 1`,
        [artifactId],
      );
      return rows.length > 0;
    },
  };
}
