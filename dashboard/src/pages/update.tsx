import { useEffect, useState } from 'preact/hooks';
import type { UpdateDevice, UpdateView } from '../../../shared/updates.js';
import { describeError } from '../api.js';
import { useApp, useFleet, useLoad } from '../app-context.js';
import { Badge, ErrorLine, Loading, Section } from '../components/bits.js';
import { ProgressCounts, UpdateStatusBadge } from '../components/update-list.js';
import { isUpdateLive, updateActions } from '../firmware-rules.js';
import type { FleetSnapshot } from '../fleet-store.js';
import { dateTime } from '../format.js';
import { href } from '../router.js';

/** Rows drawn at most, every poll: an update may reach 100,000 chargers. */
const MAX_ROWS = 1000;
/** Read again this often while the update can still move; stops when the page is left or the update ends. */
const POLL_MS = 2000;

/** One update: where it stands, its batches and chargers, and pause / resume / cancel as its status allows. */
export function UpdatePage({ updateId }: { updateId: string }) {
  const { api } = useApp();
  const path = `/v1/operator/updates/${encodeURIComponent(updateId)}`;
  const update = useLoad(() => api.get<UpdateView>(path), [updateId]);
  const [shown, setShown] = useState<UpdateView | undefined>(undefined);
  // A failed poll keeps the last answer on the page, with the error above it.
  useEffect(() => {
    if (update.data) setShown(update.data);
  }, [update.data]);
  const live = shown ? isUpdateLive(shown.status, shown.progress) : false;
  useEffect(() => {
    if (!live) return;
    const timer = setInterval(update.reload, POLL_MS);
    return () => clearInterval(timer);
  }, [live, updateId]);

  if (!shown) {
    return (
      <>
        <h1>Update</h1>
        <ErrorLine error={update.error} />
        {update.loading ? <Loading what="the update" /> : <a href={href.firmware()}>Back to Firmware</a>}
      </>
    );
  }
  return (
    <>
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href={href.firmware()}>Firmware</a>
      </nav>
      <h1>
        Update to {shown.artifact.kind} {shown.artifact.version} <UpdateStatusBadge status={shown.status} />
      </h1>
      <ErrorLine error={update.error} />
      <UpdateSummaryPanel update={shown} onChanged={setShown} />
      <Section title="Batches">
        <BatchesTable update={shown} />
      </Section>
      <Section title={`Chargers (${shown.devices.length})`}>
        <DevicesTable devices={shown.devices} kind={shown.artifact.kind} />
      </Section>
    </>
  );
}

function UpdateSummaryPanel({
  update: u,
  onChanged,
}: {
  update: UpdateView;
  onChanged: (u: UpdateView) => void;
}) {
  const fleet = useFleet();
  const r = u.rollout;
  return (
    <Section title="Status">
      <p role="status" aria-live="polite" data-update-reason={u.reason ?? ''}>
        <UpdateStatusBadge status={u.status} /> {u.reason ?? ''}
      </p>
      <dl class="facts">
        <dt>Progress</dt>
        <dd data-progress="">
          <ProgressCounts progress={u.progress} />
        </dd>
        <dt>Artifact</dt>
        <dd>
          {u.artifact.kind} <code>{u.artifact.version}</code> (<code>{u.artifact.artifact_id}</code>)
        </dd>
        <dt>Chargers</dt>
        <dd>
          {u.device_count} ({u.target_type}
          {u.target_ids.length > 0
            ? `: ${u.target_ids.map((id) => targetName(fleet, u.target_type, id)).join(', ')}`
            : ''}
          )
        </dd>
        <dt>Install</dt>
        <dd>
          {u.install === 'immediate' ? 'immediately' : 'when idle'}
          {u.window ? `, between ${u.window.start} and ${u.window.end} site time` : ''}
        </dd>
        <dt>Rollout</dt>
        <dd>
          batches of {r.batch_size}, pause over {r.max_failure_percent} % failures, {r.health_seconds} s
          health check, at most {r.max_site_percent} % of a site per batch
        </dd>
        <dt>Created</dt>
        <dd>{dateTime(u.created_at)}</dd>
        <dt>Changed</dt>
        <dd>{dateTime(u.updated_at)}</dd>
      </dl>
      <UpdateActions update={u} onChanged={onChanged} />
    </Section>
  );
}

/** Pause, resume and cancel, as the update's status allows; each answers the update as it now stands. */
function UpdateActions({ update: u, onChanged }: { update: UpdateView; onChanged: (u: UpdateView) => void }) {
  const { api, canWrite } = useApp();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | undefined>(undefined);
  const act = async (action: 'pause' | 'resume' | 'cancel') => {
    setBusy(true);
    setError(undefined);
    const path = `/v1/operator/updates/${encodeURIComponent(u.update_id)}`;
    try {
      onChanged(
        action === 'cancel'
          ? await api.del<UpdateView>(path)
          : await api.post<UpdateView>(`${path}/${action}`),
      );
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };
  const can = updateActions(u.status);
  return (
    <>
      {canWrite && (can.pause || can.resume || can.cancel) ? (
        <div class="action-buttons">
          {can.pause ? (
            <button type="button" class="secondary" disabled={busy} onClick={() => act('pause')}>
              Pause
            </button>
          ) : null}
          {can.resume ? (
            <button type="button" disabled={busy} onClick={() => act('resume')}>
              Resume
            </button>
          ) : null}
          {can.cancel ? (
            <button type="button" class="secondary" disabled={busy} onClick={() => act('cancel')}>
              Cancel update
            </button>
          ) : null}
        </div>
      ) : null}
      <ErrorLine error={error} />
    </>
  );
}

/** A site or charger by the name the fleet knows it by, else its id. */
function targetName(fleet: FleetSnapshot, type: UpdateView['target_type'], id: string): string {
  if (type === 'site') return fleet.sites.find((s) => s.site_id === id)?.name ?? id;
  if (type === 'device') return fleet.devices.get(id)?.sn ?? id;
  return id;
}

const BATCH_BADGE: Record<string, string> = {
  pending: 'offline',
  running: 'pending',
  completed: 'ok',
  failed: 'bad',
};

function BatchesTable({ update }: { update: UpdateView }) {
  if (update.batches.length === 0)
    return <p class="muted">No batches: every charger was already on the version.</p>;
  return (
    <div class="table-frame">
      <table class="batches">
        <thead>
          <tr>
            <th scope="col">Batch</th>
            <th scope="col">Status</th>
            <th scope="col" class="num">
              Chargers
            </th>
          </tr>
        </thead>
        <tbody>
          {update.batches.map((b) => (
            <tr key={b.index} data-batch={b.index} data-status={b.status}>
              <th scope="row">{b.index}</th>
              <td>
                <Badge kind={BATCH_BADGE[b.status] ?? 'pending'}>{b.status}</Badge>
              </td>
              <td class="num">{b.device_count}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

const STATE_BADGE: Record<string, string> = {
  succeeded: 'ok',
  installed: 'ok',
  skipped: 'offline',
  cancelled: 'offline',
  failed: 'bad',
  rolled_back: 'bad',
};

function DevicesTable({ devices, kind }: { devices: readonly UpdateDevice[]; kind: string }) {
  const fleet = useFleet();
  if (devices.length === 0) return <p class="muted">No chargers.</p>;
  return (
    <div class="table-frame">
      <table class="update-devices">
        <thead>
          <tr>
            <th scope="col">Charger</th>
            <th scope="col">Batch</th>
            <th scope="col">State</th>
            <th scope="col">{kind === 'agent' ? 'Agent' : 'Firmware'} before → after</th>
            <th scope="col">Reason</th>
            <th scope="col">Changed</th>
          </tr>
        </thead>
        <tbody>
          {devices.slice(0, MAX_ROWS).map((d) => (
            <tr key={d.device_id} data-device-id={d.device_id} data-state={d.state} data-batch={d.batch}>
              <th scope="row">
                <a href={href.device(d.device_id)}>{fleet.devices.get(d.device_id)?.sn ?? d.device_id}</a>
              </th>
              <td>{d.batch === 0 ? '—' : d.batch}</td>
              <td>
                <Badge kind={STATE_BADGE[d.state] ?? 'pending'}>{d.state.replace(/_/g, ' ')}</Badge>
              </td>
              <td>
                {d.version_before ?? '—'} → {d.version_after ?? '—'}
              </td>
              <td>{d.reason ?? ''}</td>
              <td>{dateTime(d.updated_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {devices.length > MAX_ROWS ? (
        <p class="muted small">
          The first {MAX_ROWS} of {devices.length} chargers; the progress above counts them all.
        </p>
      ) : null}
      {devices.length > MAX_ROWS ? (
        <p class="muted small">
          The first {MAX_ROWS} of {devices.length} chargers; the progress above counts them all.
        </p>
      ) : null}
    </div>
  );
}
