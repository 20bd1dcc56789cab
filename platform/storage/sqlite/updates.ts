import type Database from 'better-sqlite3';
import type { UpdateDeviceState } from '../../../shared/index.js';
import { pageOffset } from '../page.js';
import type { CommandRow } from '../store.js';
import type {
  UpdateCandidate,
  UpdateDeviceChange,
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
  updateDeviceValues,
  updateValues,
} from '../update-rows.js';
import type { SqliteCommands } from './commands.js';
import { placeholders, type StatementCache } from './database.js';

export interface SqliteUpdatesDeps {
  db: Database.Database;
  prepared: StatementCache;
  commands: SqliteCommands['inTransaction'];
}

const quoted = (states: readonly string[]) => states.map((s) => `'${s}'`).join(', ');
const FINAL = quoted(FINAL_UPDATE_STATES);

/** Updates (campaigns, DESIGN.md §19) on SQLite: every change one transaction. */
export function createSqliteUpdates({ db, prepared, commands }: SqliteUpdatesDeps): UpdateRepository {
  const stmt = {
    insertUpdate: db.prepare(`INSERT INTO updates (${UPDATE_COLUMNS}) VALUES (${placeholders(17)})`),
    insertDevice: db.prepare(
      `INSERT INTO update_devices (${UPDATE_DEVICE_COLUMNS}) VALUES (${placeholders(10)})`,
    ),
    getUpdate: db.prepare(`SELECT ${UPDATE_COLUMNS} FROM updates WHERE update_id = ?`),
    devices: db.prepare(
      `SELECT ${UPDATE_DEVICE_COLUMNS} FROM update_devices WHERE update_id = ? ORDER BY batch, device_id`,
    ),
    inProgress: db.prepare(
      `SELECT ${UPDATE_COLUMNS} FROM updates WHERE status IN ('running', 'paused') OR (status = 'cancelled'
         AND EXISTS (SELECT 1 FROM update_devices ud WHERE ud.update_id = updates.update_id
           AND ud.state NOT IN (${FINAL}))) ORDER BY created_ms`,
    ),
    moveBatch: db.prepare(
      `UPDATE updates SET current_batch = ?, updated_ms = ?
       WHERE update_id = ? AND status = 'running' AND current_batch = ?`,
    ),
    queueDevice: db.prepare(
      `UPDATE update_devices SET state = 'queued', command_id = ?, state_ms = ?, updated_ms = ?
       WHERE update_id = ? AND device_id = ? AND state = 'pending'`,
    ),
    moveDevice: db.prepare(
      `UPDATE update_devices SET state = ?, reason = ?, version_after = COALESCE(?, version_after),
         state_ms = ?, updated_ms = ? WHERE update_id = ? AND device_id = ? AND state = ?`,
    ),
    openCommands: db.prepare(
      `SELECT command_id FROM update_devices WHERE update_id = ? AND state = 'queued' AND command_id IS NOT NULL`,
    ),
    cancelDevices: db.prepare(
      `UPDATE update_devices SET state = 'cancelled', reason = ?, state_ms = ?, updated_ms = ?
       WHERE update_id = ? AND (state = 'pending' OR (state = 'queued' AND command_id IN
         (SELECT command_id FROM commands WHERE status = 'cancelled')))`,
    ),
    hasUpdateFor: db.prepare(
      `SELECT 1 FROM update_devices ud JOIN updates u ON u.update_id = ud.update_id
       WHERE ud.device_id = ? AND u.artifact_id = ? AND ud.state NOT IN ('pending', 'skipped', 'cancelled')
       LIMIT 1`,
    ),
    inUse: db.prepare(
      `SELECT 1 FROM updates WHERE artifact_id = ? AND status IN ('running', 'paused') LIMIT 1`,
    ),
  };

  return {
    async updateCandidates(operatorId, target) {
      let sql = `SELECT d.device_id, d.site_id, s.timezone, d.model, d.firmware_version, d.agent_version
                 FROM devices d JOIN sites s ON s.site_id = d.site_id WHERE s.operator_id = ? AND d.registered = 1`;
      const args: string[] = [operatorId];
      if (target.type === 'site' || target.type === 'device') {
        sql += ` AND ${target.type === 'site' ? 's.site_id' : 'd.device_id'} IN (${placeholders(target.ids.length)})`;
        args.push(...target.ids);
      } else if (target.type === 'operator' && !target.ids.includes(operatorId)) {
        return [];
      }
      return prepared(`${sql} ORDER BY d.device_id`).all(...args) as UpdateCandidate[];
    },
    async createUpdate(update, devices) {
      db.transaction(() => {
        stmt.insertUpdate.run(...updateValues(update));
        for (const d of devices) stmt.insertDevice.run(...updateDeviceValues(d));
      }).immediate();
    },
    async getUpdate(updateId) {
      const raw = stmt.getUpdate.get(updateId) as RawUpdate | undefined;
      return raw && toUpdate(raw);
    },
    async listUpdateDevices(updateId) {
      return (stmt.devices.all(updateId) as UpdateDeviceRow[]).map(toUpdateDevice);
    },
    async listUpdates(operatorIds, { status, page, size }) {
      if (operatorIds.length === 0) return { total: 0, page, size, items: [] };
      const where = `operator_id IN (${placeholders(operatorIds.length)})${status ? ' AND status = ?' : ''}`;
      const params = status ? [...operatorIds, status] : [...operatorIds];
      const { n } = prepared(`SELECT COUNT(*) AS n FROM updates WHERE ${where}`).get(...params) as {
        n: number;
      };
      const rows = prepared(
        `SELECT ${UPDATE_COLUMNS} FROM updates WHERE ${where}
         ORDER BY created_ms DESC, update_id DESC LIMIT ? OFFSET ?`,
      ).all(...params, size, pageOffset(page, size)) as RawUpdate[];
      const counts = prepared(
        'SELECT state, COUNT(*) AS n FROM update_devices WHERE update_id = ? GROUP BY state',
      );
      const items = rows.map((raw) => {
        const progress: Record<string, number> = {};
        let device_count = 0;
        for (const c of counts.all(raw.update_id) as Array<{ state: string; n: number }>) {
          progress[c.state] = c.n;
          device_count += c.n;
        }
        return { ...toUpdate(raw), progress, device_count };
      });
      return { total: n, page, size, items };
    },
    async updatesInProgress() {
      return (stmt.inProgress.all() as RawUpdate[]).map(toUpdate);
    },
    async startUpdateBatch(updateId, batch, batchCommands, nowMs) {
      return db
        .transaction((): CommandRow[] | undefined => {
          if (stmt.moveBatch.run(batch, nowMs, updateId, batch - 1).changes !== 1) return undefined;
          const rows = commands.insert(
            batchCommands.map((c) => c.command),
            nowMs,
          );
          rows.forEach((row, i) => {
            stmt.queueDevice.run(row.command_id, nowMs, nowMs, updateId, batchCommands[i]!.device_id);
          });
          return rows;
        })
        .immediate();
    },
    async applyUpdateDeviceChanges(updateId, changes, nowMs) {
      return db
        .transaction(() =>
          changes.filter(
            (c: UpdateDeviceChange) =>
              stmt.moveDevice.run(
                c.state,
                c.reason,
                c.version_after ?? null,
                nowMs,
                nowMs,
                updateId,
                c.device_id,
                c.from,
              ).changes === 1,
          ),
        )
        .immediate();
    },
    async setUpdateStatus(updateId, from, to, nowMs) {
      const waived = to.waived_batch === undefined ? '' : ', waived_batch = ?';
      const args: unknown[] = [to.status, to.reason, nowMs];
      if (to.waived_batch !== undefined) args.push(to.waived_batch);
      const { changes } = prepared(
        `UPDATE updates SET status = ?, reason = ?, updated_ms = ?${waived}
         WHERE update_id = ? AND status IN (${placeholders(from.length)})`,
      ).run(...args, updateId, ...from);
      return changes === 1;
    },
    async cancelUpdate(updateId, nowMs) {
      return db
        .transaction(() => {
          const moved = prepared(
            `UPDATE updates SET status = 'cancelled', reason = ?, updated_ms = ?
             WHERE update_id = ? AND status IN ('running', 'paused')`,
          ).run(UPDATE_CANCELLED_REASON, nowMs, updateId);
          if (moved.changes !== 1) return undefined;
          const ids = (stmt.openCommands.all(updateId) as Array<{ command_id: string }>).map(
            (r) => r.command_id,
          );
          const cancelled = commands.cancelQueued(ids, UPDATE_CANCELLED_REASON, nowMs);
          stmt.cancelDevices.run(UPDATE_CANCELLED_REASON, nowMs, nowMs, updateId);
          return { cancelled };
        })
        .immediate();
    },
    async observeUpdate(updateId, states: readonly UpdateDeviceState[]) {
      if (states.length === 0) return [];
      const sql = observationSql(() => '?', quoted(states), 'rowid');
      return (prepared(sql).all(updateId) as UpdateDeviceObservation[]).map(toObservation);
    },
    async devicesInOpenUpdates(deviceIds) {
      if (deviceIds.length === 0) return [];
      const found: Array<{ device_id: string; update_id: string }> = [];
      // In slices: SQLite's limit on bound parameters.
      for (let i = 0; i < deviceIds.length; i += 500) {
        const slice = deviceIds.slice(i, i + 500);
        found.push(
          ...(prepared(
            `SELECT device_id, update_id FROM update_devices
             WHERE device_id IN (${placeholders(slice.length)}) AND state NOT IN (${FINAL})`,
          ).all(...slice) as Array<{ device_id: string; update_id: string }>),
        );
      }
      return found;
    },
    async deviceHasUpdateFor(deviceId, artifactId) {
      return stmt.hasUpdateFor.get(deviceId, artifactId) !== undefined;
    },
    async artifactInUse(artifactId) {
      return stmt.inUse.get(artifactId) !== undefined;
    },
  };
}
