import { useState } from 'preact/hooks';
import type { Artifact } from '../../../shared/artifacts.js';
import { describeError, withQuery } from '../api.js';
import { useApp } from '../app-context.js';
import {
  bytes,
  parseSigFile,
  releaseFromSig,
  type SignedFile,
  type UploadRelease,
  uploadMismatches,
} from '../firmware-rules.js';
import { uploadFile } from '../upload.js';
import { ErrorLine } from './bits.js';

const EMPTY: UploadRelease = { kind: 'firmware', version: '', target: '', signature: '' };

/**
 * Upload an artifact: the file, and its release and signature typed by hand or filled from the `.sig` file beside
 * it. The platform measures size and sha256 itself; when the signature came from a `.sig` file the page compares
 * them with what was signed, since a charger would refuse a file that differs.
 */
export function UploadForm({ onUploaded }: { onUploaded: () => void }) {
  const { session } = useApp();
  const [release, setRelease] = useState<UploadRelease>(EMPTY);
  // A new key after an upload clears the signature file's note with the form.
  const [formKey, setFormKey] = useState(0);
  const [signed, setSigned] = useState<SignedFile | undefined>(undefined);
  const [progress, setProgress] = useState<{ sent: number; total: number } | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const [done, setDone] = useState<{ artifact: Artifact; mismatches: string[] | undefined } | undefined>(
    undefined,
  );
  const onSigned = (s: SignedFile | undefined) => {
    setSigned(s);
    if (s) setRelease(releaseFromSig(s, release));
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const file = (form.elements.namedItem('file') as HTMLInputElement).files?.[0];
    setError(undefined);
    setDone(undefined);
    if (!file) return setError('Choose the file to upload');
    setProgress({ sent: 0, total: file.size });
    try {
      const path = withQuery('/v1/operator/artifacts', {
        kind: release.kind,
        version: release.version.trim(),
        target: release.target.trim() || undefined,
      });
      const signature = release.signature.trim();
      const artifact = await uploadFile<Artifact>(
        path,
        session.token,
        file,
        { 'x-artifact-signature': signature },
        (sent) => setProgress({ sent, total: file.size }),
      );
      // Compared only when the signature sent is the `.sig` file's: else nothing says what was signed.
      const fromSig =
        signed && signed.signature === signature ? uploadMismatches(signed, artifact) : undefined;
      setDone({ artifact, mismatches: fromSig });
      form.reset();
      setRelease(EMPTY);
      setSigned(undefined);
      setFormKey((k) => k + 1);
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
        <SigFileField key={formKey} onSigned={onSigned} />
      </div>
      <ReleaseFields release={release} onChange={setRelease} />
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
      {done ? <Uploaded artifact={done.artifact} mismatches={done.mismatches} /> : null}
    </form>
  );
}

/** The `.sig` file: read at once, and what it says (or why it cannot be read) shown under it. */
function SigFileField({ onSigned }: { onSigned: (s: SignedFile | undefined) => void }) {
  const [note, setNote] = useState<{ error?: string; text?: string }>({});
  const read = async (input: HTMLInputElement) => {
    onSigned(undefined);
    setNote({});
    const file = input.files?.[0];
    if (!file) return;
    const parsed = parseSigFile(await file.text());
    if (!parsed.ok) return setNote({ error: parsed.error });
    onSigned(parsed.signed);
    const named = parsed.signed.version !== undefined;
    setNote({
      text: `Signed for ${bytes(parsed.signed.size)}${named ? '' : '; type the kind, version and target it was signed for'}.`,
    });
  };
  return (
    <label>
      Signature file (.sig, optional)
      <input
        name="sig"
        type="file"
        accept=".sig,.json,application/json"
        onChange={(e) => void read(e.currentTarget)}
      />
      {note.text ? (
        <span class="small" data-sig-note="">
          {note.text}
        </span>
      ) : null}
      {note.error ? (
        <span class="error small" role="alert">
          {note.error}
        </span>
      ) : null}
    </label>
  );
}

/** Kind, version, target and signature: typed, or filled from a `.sig` file and still editable. */
function ReleaseFields({
  release,
  onChange,
}: {
  release: UploadRelease;
  onChange: (r: UploadRelease) => void;
}) {
  const set = (field: keyof UploadRelease) => (e: Event) =>
    onChange({ ...release, [field]: (e.currentTarget as HTMLInputElement).value });
  return (
    <div class="form-row">
      <label>
        Kind
        <select name="kind" value={release.kind} onChange={set('kind')}>
          <option value="firmware">firmware</option>
          <option value="agent">agent</option>
        </select>
      </label>
      <label>
        Version
        <input name="version" autoComplete="off" value={release.version} onInput={set('version')} />
      </label>
      <label>
        Target (optional)
        <input
          name="target"
          autoComplete="off"
          placeholder="any"
          value={release.target}
          onInput={set('target')}
        />
      </label>
      <label>
        Signature (base64)
        <input
          name="signature"
          autoComplete="off"
          spellcheck={false}
          value={release.signature}
          onInput={set('signature')}
        />
      </label>
    </div>
  );
}

function Uploaded({ artifact: a, mismatches }: { artifact: Artifact; mismatches: string[] | undefined }) {
  const bad = mismatches !== undefined && mismatches.length > 0;
  return (
    <p class={bad ? 'error' : 'sent'} role="status" data-uploaded={a.artifact_id}>
      Uploaded {a.kind} {a.version}: {bytes(a.size)}, sha256{' '}
      <code title={a.sha256}>{a.sha256.slice(0, 12)}…</code>
      {bad
        ? ` — differs from the signature file (${mismatches.join('; ')}): chargers will refuse it; delete it and upload the signed file.`
        : mismatches
          ? ' — matches the signature file.'
          : ''}
    </p>
  );
}
