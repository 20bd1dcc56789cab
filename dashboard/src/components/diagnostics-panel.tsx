import { useEffect, useState } from 'preact/hooks';
import type { DiagnosticsView } from '../../../shared/operator-api.js';
import { ApiError, describeError } from '../api.js';
import { useApp, useLoad } from '../app-context.js';
import { bytes } from '../firmware-rules.js';
import type { Page } from '../fleet-store.js';
import { dateTime } from '../format.js';
import {
  DEFAULT_DIAGNOSTICS_WINDOW,
  DIAGNOSTICS_POLL_MS,
  DIAGNOSTICS_WINDOWS,
  type DiagnosticsWindow,
  diagnosticsFileName,
  diagnosticsPending,
  diagnosticsRequest,
} from '../maintenance-rules.js';
import { saveFile } from '../save-file.js';
import { Badge, ErrorLine, Loading, Section } from './bits.js';
import type { Sent } from './command-forms.js';

const STATUS_KIND: Record<DiagnosticsView['status'], string> = {
  requested: 'pending',
  uploading: 'pending',
  available: 'ok',
  failed: 'bad',
};

/**
 * Diagnostics archives of one charger (DESIGN.md §20): ask for one over a window (`POST …/diagnostics`), follow
 * it while the charger builds and uploads it (its status read every 2 s), download it once available, and the
 * charger's earlier archives, newest first. The archive is served to the bearer token alone, so a download reads
 * it with the token and saves it through a Blob URL.
 */
export function DiagnosticsPanel({ deviceId, onSent }: { deviceId: string; onSent: (s: Sent) => void }) {
  const { api, canWrite } = useApp();
  const list = useLoad(
    () =>
      api.get<Page<DiagnosticsView>>(`/v1/operator/devices/${encodeURIComponent(deviceId)}/diagnostics`, {
        size: 20,
      }),
    [deviceId],
  );
  const [requested, setRequested] = useState<string | undefined>(undefined);
  return (
    <Section
      title="Diagnostics"
      actions={
        <button type="button" class="secondary" onClick={list.reload}>
          Refresh
        </button>
      }
    >
      {canWrite ? (
        <CollectForm
          deviceId={deviceId}
          onRequested={(id, commandId) => {
            setRequested(id);
            onSent({ commandId, command: 'upload_diagnostics', sentAt: new Date().toISOString() });
            list.reload();
          }}
        />
      ) : null}
      {requested ? (
        <RequestedArchive key={requested} diagnosticsId={requested} onSettled={list.reload} />
      ) : null}
      <h3>Archives of this charger</h3>
      <ErrorLine error={list.error} />
      {list.loading && !list.data ? <Loading what="diagnostics" /> : null}
      {list.data && list.data.items.length === 0 ? (
        <p class="muted">No diagnostics collected from this charger yet.</p>
      ) : null}
      {list.data && list.data.items.length > 0 ? <ArchiveTable items={list.data.items} /> : null}
    </Section>
  );
}

function CollectForm({
  deviceId,
  onRequested,
}: {
  deviceId: string;
  onRequested: (diagnosticsId: string, commandId: string) => void;
}) {
  const { api } = useApp();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | undefined>(undefined);
  const submit = async (e: Event) => {
    e.preventDefault();
    const window = String(
      new FormData(e.currentTarget as HTMLFormElement).get('window'),
    ) as DiagnosticsWindow;
    setBusy(true);
    setError(undefined);
    try {
      const answer = await api.post<{ diagnostics_id: string; command_id: string }>(
        `/v1/operator/devices/${encodeURIComponent(deviceId)}/diagnostics`,
        diagnosticsRequest(window, Date.now()),
      );
      onRequested(answer.diagnostics_id, answer.command_id);
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="form-row diagnostics-form" aria-label="Collect diagnostics" onSubmit={submit}>
      <label>
        Logs of
        <select name="window">
          {DIAGNOSTICS_WINDOWS.map((w) => (
            <option key={w.value} value={w.value} selected={w.value === DEFAULT_DIAGNOSTICS_WINDOW}>
              {w.label}
            </option>
          ))}
        </select>
      </label>
      <button type="submit" disabled={busy}>
        {busy ? 'Sending…' : 'Collect diagnostics'}
      </button>
      <ErrorLine error={error} />
    </form>
  );
}

/** The archive just asked for, read every 2 s while requested or uploading. */
function RequestedArchive({ diagnosticsId, onSettled }: { diagnosticsId: string; onSettled: () => void }) {
  const { api } = useApp();
  const [view, setView] = useState<DiagnosticsView | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  useEffect(() => {
    let current = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const read = async () => {
      try {
        const v = await api.get<DiagnosticsView>(
          `/v1/operator/diagnostics/${encodeURIComponent(diagnosticsId)}`,
        );
        if (!current) return;
        setView(v);
        setError(undefined);
        if (!diagnosticsPending(v.status)) return onSettled();
      } catch (err) {
        if (!current) return;
        setError(describeError(err));
        // Refused for good (gone, not this client's): reading again will not change that; a 429 will pass.
        if (err instanceof ApiError && err.status >= 400 && err.status < 500 && err.status !== 429) return;
      }
      timer = setTimeout(read, DIAGNOSTICS_POLL_MS);
    };
    void read();
    return () => {
      current = false;
      clearTimeout(timer);
    };
  }, [diagnosticsId]);
  return (
    <div class="sent" aria-live="polite" data-diagnostics-id={diagnosticsId} data-status={view?.status ?? ''}>
      <p>
        Diagnostics <code>{diagnosticsId}</code>:{' '}
        {view ? <Badge kind={STATUS_KIND[view.status]}>{view.status}</Badge> : 'reading…'}
        {view && view.size > 0 ? ` ${bytes(view.size)}` : ''}
        {view?.reason ? <span class="muted"> ({view.reason})</span> : null}
      </p>
      {view?.status === 'available' ? <DownloadButton diagnosticsId={diagnosticsId} /> : null}
      <ErrorLine error={error} />
    </div>
  );
}

function ArchiveTable({ items }: { items: readonly DiagnosticsView[] }) {
  return (
    <div class="table-frame">
      <table class="diagnostics">
        <thead>
          <tr>
            <th scope="col">Requested</th>
            <th scope="col">Logs from</th>
            <th scope="col">Status</th>
            <th scope="col" class="num">
              Size
            </th>
            <th scope="col">Archive</th>
          </tr>
        </thead>
        <tbody>
          {items.map((d) => (
            <tr key={d.diagnostics_id} data-diagnostics-id={d.diagnostics_id} data-status={d.status}>
              <td>{dateTime(d.created_at)}</td>
              <td class="small">
                {dateTime(d.start_time)} – {dateTime(d.end_time)}
              </td>
              <td>
                <Badge kind={STATUS_KIND[d.status]}>{d.status}</Badge>
                {d.reason ? <span class="muted small"> {d.reason}</span> : null}
              </td>
              <td class="num" title={`${d.size} bytes`}>
                {d.size > 0 ? bytes(d.size) : '—'}
              </td>
              <td>{d.status === 'available' ? <DownloadButton diagnosticsId={d.diagnostics_id} /> : '—'}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Reads the archive with the token and saves it as `<diagnostics_id>.tar.gz`. */
function DownloadButton({ diagnosticsId }: { diagnosticsId: string }) {
  const { api } = useApp();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | undefined>(undefined);
  const name = diagnosticsFileName(diagnosticsId);
  const download = async () => {
    setBusy(true);
    setError(undefined);
    try {
      saveFile(name, await api.blob(`/v1/operator/diagnostics/${encodeURIComponent(diagnosticsId)}/content`));
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button type="button" class="secondary small" disabled={busy} onClick={download}>
        {busy ? 'Downloading…' : `Download ${name}`}
      </button>
      <ErrorLine error={error} />
    </>
  );
}
