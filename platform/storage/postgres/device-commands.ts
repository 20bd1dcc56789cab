import { deviceCommandStatements } from '../command-rows.js';
import { pageOffset } from '../page.js';
import type { CommandHistoryRow, CommandRepository, CommandRow } from '../store.js';
import type { PgDatabase } from './database.js';

const COMMAND_COLUMNS =
  'c.command_id, c.device_id, c.command, c.params, c.status, c.expiry_ms, c.created_ms, c.updated_ms, ' +
  'c.control_id, c.client_id, c.reason, c.result';

/**
 * A device's commands, newest first, for the operator (GET /v1/operator/devices/{device_id}/commands): one range
 * of `commands_by_device_newest` (migration 3), ids compared byte-wise as on SQLite. Each command's history
 * comes in the page's own statement, as a JSON array, so a page of 100 is one query rather than 101.
 */
export function createPgDeviceCommands(db: PgDatabase): Pick<CommandRepository, 'listDeviceCommands'> {
  const where = (withStatus: boolean) => `c.device_id = $1${withStatus ? ' AND c.status = $2' : ''}`;
  const countSql = (withStatus: boolean) => `SELECT COUNT(*) AS n FROM commands c WHERE ${where(withStatus)}`;
  const pageSql = (withStatus: boolean) => {
    const limit = withStatus ? 3 : 2;
    return `SELECT ${COMMAND_COLUMNS}, COALESCE((
         SELECT json_agg(json_build_object('status', h.status, 'at_ms', h.at_ms, 'reason', h.reason)
           ORDER BY h.at_ms, h.id)
         FROM command_history h WHERE h.command_id = c.command_id), '[]'::json) AS history
       FROM commands c WHERE ${where(withStatus)}
       ORDER BY c.created_ms DESC, c.command_id COLLATE "C" DESC LIMIT $${limit} OFFSET $${limit + 1}`;
  };
  const statements = deviceCommandStatements(countSql, pageSql);

  return {
    async listDeviceCommands(deviceId, { status, page, size }) {
      const { count, page: pageOfRows, args } = statements(deviceId, status);
      const [counted] = await db.query<{ n: number }>(count, args);
      const rows = await db.query<CommandRow & { history: CommandHistoryRow[] }>(pageOfRows, [
        ...args,
        size,
        pageOffset(page, size),
      ]);
      const items = rows.map(({ history, ...command }) => ({
        command,
        history: history.map((h) => ({ status: h.status, at_ms: h.at_ms, reason: h.reason })),
      }));
      return { total: counted?.n ?? 0, page, size, items };
    },
  };
}
