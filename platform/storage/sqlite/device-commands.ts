import { deviceCommandStatements } from '../command-rows.js';
import { pageOffset } from '../page.js';
import type { CommandHistoryRow, CommandRepository } from '../store.js';
import type { SqlReader } from './reader.js';
import { type RawCommand, toCommand } from './rows.js';

/**
 * A device's commands, newest first, for the operator (GET /v1/operator/devices/{device_id}/commands). Reads go
 * through `reader` (a worker thread's connection in the server), off the charger path, and walk one range of
 * `commands_by_device_newest` (migration 6). Each command's history comes in the page's own statement, as a
 * JSON array, so a page of 100 is one read rather than 101, and commands and histories share one snapshot.
 */
export function createSqliteDeviceCommands(reader: SqlReader): Pick<CommandRepository, 'listDeviceCommands'> {
  const where = (withStatus: boolean) => `device_id = ?${withStatus ? ' AND status = ?' : ''}`;
  const countSql = (withStatus: boolean) => `SELECT COUNT(*) AS n FROM commands WHERE ${where(withStatus)}`;
  const pageSql = (withStatus: boolean) =>
    `SELECT c.*, (
       SELECT json_group_array(json_object('status', h.status, 'at_ms', h.at_ms, 'reason', h.reason)
         ORDER BY h.at_ms, h.rowid)
       FROM command_history h WHERE h.command_id = c.command_id) AS history
     FROM commands c WHERE ${where(withStatus)}
     ORDER BY c.created_ms DESC, c.command_id DESC LIMIT ? OFFSET ?`;
  const statements = deviceCommandStatements(countSql, pageSql);

  return {
    async listDeviceCommands(deviceId, { status, page, size }) {
      const { count, page: pageOfRows, args } = statements(deviceId, status);
      const total = (await reader.get<{ n: number }>(count, args))?.n ?? 0;
      const rows = await reader.all<RawCommand & { history: string }>(pageOfRows, [
        ...args,
        size,
        pageOffset(page, size),
      ]);
      const items = rows.map(({ history, ...raw }) => ({
        command: toCommand(raw),
        history: JSON.parse(history) as CommandHistoryRow[],
      }));
      return { total, page, size, items };
    },
  };
}
