import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import type { Artifact } from '../../../shared/artifacts.js';
import { ApiError, describeError } from '../api.js';
import { useApp } from '../app-context.js';
import { type UpdateFormFields, updateFormFieldOf, updateRequestBody } from '../firmware-rules.js';
import type { SiteView } from '../fleet-store.js';
import { href } from '../router.js';
import { ErrorLine } from './bits.js';

type FieldErrors = Partial<Record<keyof UpdateFormFields, string>>;

/**
 * Start an update: an artifact to some chargers, in batches. Empty fields leave the API's defaults (every
 * charger in one batch, 20 % failures, 600 s of health); its validation message shows beside the field it names.
 */
export function StartUpdateForm({
  artifacts,
  sites,
  onStarted,
}: {
  artifacts: readonly Artifact[];
  sites: readonly SiteView[];
  onStarted: () => void;
}) {
  const { api } = useApp();
  const [target, setTarget] = useState<'all' | 'site'>('site');
  const [busy, setBusy] = useState(false);
  const [errors, setErrors] = useState<FieldErrors>({});
  const [error, setError] = useState<string | undefined>(undefined);
  const [started, setStarted] = useState<{ update_id: string; device_count: number } | undefined>(undefined);

  const submit = async (e: Event) => {
    e.preventDefault();
    const fields = readFields(e.currentTarget as HTMLFormElement, target);
    setBusy(true);
    setErrors({});
    setError(undefined);
    setStarted(undefined);
    try {
      const answer = await api.post<{ update_id: string; device_count: number }>(
        '/v1/operator/updates',
        updateRequestBody(fields),
      );
      setStarted(answer);
      onStarted();
    } catch (err) {
      const field = err instanceof ApiError ? updateFormFieldOf(err.details) : undefined;
      if (field) setErrors({ [field]: describeError(err) });
      else setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };

  if (artifacts.length === 0) return <p class="muted">Upload an artifact first.</p>;
  return (
    <form class="update-form" onSubmit={submit} aria-label="Start an update" noValidate>
      <div class="form-row">
        <Field label="Artifact" error={errors.artifact_id}>
          <select name="artifact_id">
            {artifacts.map((a) => (
              <option key={a.artifact_id} value={a.artifact_id}>
                {a.kind} {a.version}
                {a.target ? ` (${a.target})` : ''}
              </option>
            ))}
          </select>
        </Field>
        <Field label="Install" error={errors.install}>
          <select name="install">
            <option value="when_idle">when idle</option>
            <option value="immediate">immediately</option>
          </select>
        </Field>
      </div>
      <TargetFields target={target} onTarget={setTarget} sites={sites} error={errors.target} />
      <WhenFields errors={errors} />
      <button type="submit" disabled={busy}>
        {busy ? 'Starting…' : 'Start update'}
      </button>
      <ErrorLine error={error} />
      {started ? (
        <p class="sent" role="status">
          Started for {started.device_count} chargers:{' '}
          <a href={href.update(started.update_id)}>follow the update</a>
        </p>
      ) : null}
    </form>
  );
}

function readFields(form: HTMLFormElement, target: 'all' | 'site'): UpdateFormFields {
  const f = new FormData(form);
  const get = (n: string) => String(f.get(n) ?? '').trim();
  return {
    artifact_id: get('artifact_id'),
    target,
    site_ids: f.getAll('site_ids').map(String),
    install: get('install'),
    window_start: get('window_start'),
    window_end: get('window_end'),
    batch_size: get('batch_size'),
    max_failure_percent: get('max_failure_percent'),
    health_seconds: get('health_seconds'),
  };
}

/** When chargers install (a daily window in each site's time) and how the rollout goes; empty: the defaults. */
function WhenFields({ errors }: { errors: FieldErrors }) {
  return (
    <>
      <div class="form-row">
        <Field label="Window start (site time, optional)" error={errors.window_start}>
          <input name="window_start" type="time" />
        </Field>
        <Field label="Window end" error={errors.window_end}>
          <input name="window_end" type="time" />
        </Field>
      </div>
      <div class="form-row">
        <Field label="Batch size (default: all at once)" error={errors.batch_size}>
          <input name="batch_size" inputMode="numeric" />
        </Field>
        <Field label="Max failures, % (default 20)" error={errors.max_failure_percent}>
          <input name="max_failure_percent" inputMode="numeric" />
        </Field>
        <Field label="Health check, seconds (default 600)" error={errors.health_seconds}>
          <input name="health_seconds" inputMode="numeric" />
        </Field>
      </div>
    </>
  );
}

/** All chargers, or the sites ticked. */
function TargetFields({
  target,
  onTarget,
  sites,
  error,
}: {
  target: 'all' | 'site';
  onTarget: (t: 'all' | 'site') => void;
  sites: readonly SiteView[];
  error: string | undefined;
}) {
  return (
    <fieldset class="slot" aria-describedby={error ? 'update-target-error' : undefined}>
      <legend>Chargers</legend>
      <div class="days">
        <label class="inline">
          <input type="radio" name="target" checked={target === 'site'} onChange={() => onTarget('site')} />
          Sites
        </label>
        <label class="inline">
          <input type="radio" name="target" checked={target === 'all'} onChange={() => onTarget('all')} />
          All chargers
        </label>
      </div>
      {target === 'site' ? (
        <div class="days">
          {sites.map((s) => (
            <label key={s.site_id} class="inline">
              <input type="checkbox" name="site_ids" value={s.site_id} />
              {s.name}
            </label>
          ))}
        </div>
      ) : null}
      {error ? (
        <p class="error" role="alert" id="update-target-error">
          {error}
        </p>
      ) : null}
    </fieldset>
  );
}

/** A labelled field with the API's message about it inside the label, so screen readers read it with the field. */
function Field({
  label,
  error,
  children,
}: {
  label: string;
  error: string | undefined;
  children: ComponentChildren;
}) {
  return (
    // biome-ignore lint/a11y/noLabelWithoutControl: the control is the child passed in
    <label class={error ? 'invalid' : undefined}>
      {label}
      {children}
      {error ? (
        <span class="error small" role="alert">
          {error}
        </span>
      ) : null}
    </label>
  );
}
