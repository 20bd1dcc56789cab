import type { CommandView } from '../../shared/index.js';
import { toTimestamp } from '../../shared/index.js';
import type { CommandHistoryRow, CommandRow } from '../storage/store.js';

/** A command as the operator API shows it, with its history; reason, control and result only when there is one. */
export function commandView(c: CommandRow, history: readonly CommandHistoryRow[]): CommandView {
  const view: CommandView = {
    command_id: c.command_id,
    device_id: c.device_id,
    command: c.command,
    params: c.params,
    status: c.status,
    expiry: toTimestamp(c.expiry_ms),
    created_at: toTimestamp(c.created_ms),
    updated_at: toTimestamp(c.updated_ms),
    history: history.map((h) =>
      h.reason
        ? { status: h.status, at: toTimestamp(h.at_ms), reason: h.reason }
        : { status: h.status, at: toTimestamp(h.at_ms) },
    ),
  };
  if (c.reason) view.reason = c.reason;
  if (c.control_id) view.control_id = c.control_id;
  if (c.result) view.result = c.result;
  return view;
}
