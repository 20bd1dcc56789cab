import { useState } from 'preact/hooks';
import type { ArtifactManifest } from '../../../shared/artifact-manifest.js';
import type { Artifact } from '../../../shared/artifacts.js';
import { describeError, withQuery } from '../api.js';
import { useApp } from '../app-context.js';
import { bytes, parseSigFile, uploadMismatches } from '../firmware-rules.js';
import { uploadFile } from '../upload.js';
import { ErrorLine } from './bits.js';

type Signed = ArtifactManifest & { signature: string };

interface Progress {
  sent: number;
  total: number;
}

/**
 * Upload an artifact: the file, and its signature either as the `.sig` JSON beside it (kind, version, target and
 * signature read from it) or typed by hand. The platform measures size and sha256 itself; with a `.sig` file the
 * page compares them with what was signed, since a charger would refuse a file that differs.
 */
export function UploadForm({ onUploaded }: { onUploaded: () => void }) {
  const { session } = useApp();
  const [mode, setMode] = useState<'sig' | 'typed'>('sig');
  const [signed, setSigned] = useState<Signed | undefined>(undefined);
  const [sigError, setSigError] = useState<string | undefined>(undefined);
  const [progress, setProgress] = useState<Progress | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const [done, setDone] = useState<{ artifact: Artifact; mismatches: string[] } | undefined>(undefined);

  const readSig = async (input: HTMLInputElement) => {
    setSigned(undefined);
    setSigError(undefined);
    const file = input.files?.[0];
    if (!file) return;
    const parsed = parseSigFile(await file.text());
    if (parsed.ok) setSigned(parsed.manifest);
    else setSigError(parsed.error);
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    const file = (form.elements.namedItem('file') as HTMLInputElement).files?.[0];
    setError(undefined);
    setDone(undefined);
    if (!file) return setError('Choose the file to upload');
    const manifest =
      mode === 'sig'
        ? signed
        : {
            kind: String(data.get('kind') ?? ''),
            version: String(data.get('version') ?? '').trim(),
            target: String(data.get('target') ?? '').trim(),
            signature: String(data.get('signature') ?? '').trim(),
          };
    if (!manifest) return setError(sigError ?? 'Choose the signature file (.sig)');
    setProgress({ sent: 0, total: file.size });
    try {
      const path = withQuery('/v1/operator/artifacts', {
        kind: manifest.kind,
        version: manifest.version,
        target: manifest.target || undefined,
      });
      const artifact = await uploadFile<Artifact>(
        path,
        session.token,
        file,
        { 'x-artifact-signature': manifest.signature },
        (sent) => setProgress({ sent, total: file.size }),
      );
      const mismatches = mode === 'sig' && signed ? uploadMismatches(signed, artifact) : [];
      setDone({ artifact, mismatches });
      form.reset();
      setSigned(undefined);
      onUploaded();
    } catch (err) {
      setError(describeError(err));
    } finally {
      setProgress(undefined);
    }
  };

  return (
    <form class="upload-form" onSubmit={submit} aria-label="Upload an artifact">
      <div class="form-row">
        <label>
          File
          <input name="file" type="file" required />
        </label>
      </div>
      <fieldset class="plain days" aria-label="Signature">
        <label class="inline">
          <input type="radio" name="mode" checked={mode === 'sig'} onChange={() => setMode('sig')} />
          Signature file (.sig)
        </label>
        <label class="inline">
          <input type="radio" name="mode" checked={mode === 'typed'} onChange={() => setMode('typed')} />
          Typed by hand
        </label>
      </fieldset>
      {mode === 'sig' ? (
        <div class="form-row">
          <label>
            Signature file
            <input
              name="sig"
              type="file"
              accept=".sig,.json,application/json"
              onChange={(e) => void readSig(e.currentTarget)}
            />
          </label>
          {signed ? (
            <p class="small" data-signed-manifest="">
              {signed.kind} <code>{signed.version}</code> for{' '}
              {signed.target ? <code>{signed.target}</code> : 'any target'}, {bytes(signed.size)}
            </p>
          ) : null}
          <ErrorLine error={sigError} />
        </div>
      ) : (
        <div class="form-row">
          <label>
            Kind
            <select name="kind">
              <option value="firmware">firmware</option>
              <option value="agent">agent</option>
            </select>
          </label>
          <label>
            Version
            <input name="version" autoComplete="off" />
          </label>
          <label>
            Target (optional)
            <input name="target" autoComplete="off" placeholder="any" />
          </label>
          <label>
            Signature (base64)
            <input name="signature" autoComplete="off" spellcheck={false} />
          </label>
        </div>
      )}
      <div class="action-buttons">
        <button type="submit" disabled={progress !== undefined}>
          {progress ? 'Uploading…' : 'Upload'}
        </button>
        {progress ? (
          <label class="inline small">
            <progress value={progress.sent} max={progress.total || 1} />
            {bytes(progress.sent)} of {bytes(progress.total)}
          </label>
        ) : null}
      </div>
      <ErrorLine error={error} />
      {done ? (
        <p
          class={done.mismatches.length > 0 ? 'error' : 'sent'}
          role="status"
          data-uploaded={done.artifact.artifact_id}
        >
          Uploaded {done.artifact.kind} {done.artifact.version}: {bytes(done.artifact.size)}, sha256{' '}
          <code title={done.artifact.sha256}>{done.artifact.sha256.slice(0, 12)}…</code>
          {done.mismatches.length > 0
            ? ` — differs from the signature file (${done.mismatches.join('; ')}): chargers will refuse it; delete it and upload the signed file.`
            : mode === 'sig'
              ? ' — matches the signature file.'
              : ''}
        </p>
      ) : null}
    </form>
  );
}
