import type { UpdateStatus, UpdateSummary } from '../../../shared/updates.js';
import { progressEntries } from '../firmware-rules.js';
import { dateTime } from '../format.js';
import { href } from '../router.js';

const STATUS_BADGE: Record<UpdateStatus, string> = {
  running: 'pending',
  paused: 'warning',
  completed: 'ok',
  cancelled: 'offline',
};
const BAD_STATES = new Set(['failed', 'rolled_back']);

export function UpdateStatusBadge({ status }: { status: UpdateStatus }) {
  return (
    <span class={`badge badge-${STATUS_BADGE[status]}`} data-update-status={status}>
      {status}
    </span>
  );
}

/** `2 pending · 1 failed`: how many chargers are in each state, in the order a charger goes. */
export function ProgressCounts({ progress }: { progress: Record<string, number> }) {
  const entries = progressEntries(progress);
  if (entries.length === 0) return <span class="muted">no chargers</span>;
  return (
    <ul class="progress-counts">
      {entries.map(([state, n]) => (
        <li key={state} data-state={state} data-count={n} class={BAD_STATES.has(state) ? 'error' : undefined}>
          {n} {state.replace(/_/g, ' ')}
        </li>
      ))}
    </ul>
  );
}

/** Updates, newest first (as the API lists them), each a link to its page. */
export function UpdatesTable({ updates }: { updates: readonly UpdateSummary[] }) {
  if (updates.length === 0) return <p class="muted">No updates yet.</p>;
  return (
    <div class="table-frame">
      <table class="updates">
        <thead>
          <tr>
            <th scope="col">Artifact</th>
            <th scope="col">Status</th>
            <th scope="col">Progress</th>
            <th scope="col">Created</th>
          </tr>
        </thead>
        <tbody>
          {updates.map((u) => (
            <tr key={u.update_id} data-update-id={u.update_id}>
              <th scope="row">
                <a href={href.update(u.update_id)}>
                  {u.artifact.kind} {u.artifact.version}
                </a>
              </th>
              <td>
                <UpdateStatusBadge status={u.status} />
              </td>
              <td>
                <ProgressCounts progress={u.progress} />
              </td>
              <td>{dateTime(u.created_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
