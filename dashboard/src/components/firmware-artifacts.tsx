import { useEffect, useRef, useState } from 'preact/hooks';
import type { Artifact } from '../../../shared/artifacts.js';
import { describeError } from '../api.js';
import { useApp } from '../app-context.js';
import { bytes, shortSha } from '../firmware-rules.js';
import { dateTime } from '../format.js';
import { ErrorLine } from './bits.js';

/** The operator's artifacts; delete asks first, and a refusal (in use: 409) shows the API's message. */
export function ArtifactsTable({
  artifacts,
  onDeleted,
}: {
  artifacts: readonly Artifact[];
  onDeleted: () => void;
}) {
  if (artifacts.length === 0) return <p class="muted">No artifacts yet: upload one below.</p>;
  return (
    <div class="table-frame">
      <table class="artifacts">
        <thead>
          <tr>
            <th scope="col">Kind</th>
            <th scope="col">Version</th>
            <th scope="col">Target</th>
            <th scope="col" class="num">
              Size
            </th>
            <th scope="col">SHA-256</th>
            <th scope="col">Created</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {artifacts.map((a) => (
            <ArtifactRow key={a.artifact_id} artifact={a} onDeleted={onDeleted} />
          ))}
        </tbody>
      </table>
    </div>
  );
}

function ArtifactRow({ artifact: a, onDeleted }: { artifact: Artifact; onDeleted: () => void }) {
  const { api, canWrite } = useApp();
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | undefined>(undefined);
  const keep = useRef<HTMLButtonElement>(null);
  // The Delete button goes away: focus moves to the safe answer so that the keyboard is not left on nothing.
  useEffect(() => {
    if (confirming) keep.current?.focus();
  }, [confirming]);
  const remove = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await api.del(`/v1/operator/artifacts/${encodeURIComponent(a.artifact_id)}`);
      onDeleted();
    } catch (err) {
      setError(describeError(err));
      setConfirming(false);
    } finally {
      setBusy(false);
    }
  };
  const name = `${a.kind} ${a.version}`;
  return (
    <tr data-artifact-id={a.artifact_id} data-version={a.version}>
      <td>{a.kind}</td>
      <th scope="row">
        <code>{a.version}</code>
      </th>
      <td>{a.target ? <code>{a.target}</code> : <span class="muted">any</span>}</td>
      <td class="num" title={`${a.size} bytes`}>
        {bytes(a.size)}
      </td>
      <td>
        <code title={a.sha256}>{shortSha(a.sha256)}</code>
      </td>
      <td>{dateTime(a.created_at)}</td>
      <td>
        {canWrite && !confirming ? (
          <button
            type="button"
            class="secondary small"
            aria-label={`Delete ${name}`}
            onClick={() => setConfirming(true)}
          >
            Delete
          </button>
        ) : null}
        {confirming ? (
          <fieldset class="confirm plain">
            <legend class="small">Delete {name}?</legend>
            <button type="button" class="small danger" disabled={busy} onClick={remove}>
              {busy ? 'Deleting…' : 'Yes, delete'}
            </button>{' '}
            <button type="button" class="secondary small" ref={keep} onClick={() => setConfirming(false)}>
              Keep
            </button>
          </fieldset>
        ) : null}
        <ErrorLine error={error} />
      </td>
    </tr>
  );
}
