import { useEffect, useState } from 'preact/hooks';
import type { ConfigurationKey } from '../../../shared/configuration.js';
import { ApiError, describeError } from '../api.js';
import { useApp, useLoad, useNow } from '../app-context.js';
import { ago, dateTime } from '../format.js';
import {
  boundsText,
  CONFIGURATION_KEY_ORDER,
  CONFIGURATION_TABLE,
  type ConfigurationEdit,
  configurationEdit,
  configurationFieldOf,
  type ReportedValue,
  reportedHolds,
  unknownReportedKeys,
  valueText,
} from '../maintenance-rules.js';
import { ErrorLine, Loading, Section } from './bits.js';
import type { Sent } from './command-forms.js';
import { SentCommand, useCommandOutcome } from './sent-command.js';

interface ConfigurationView {
  values: Record<string, ReportedValue>;
  reported_at: string | null;
}

type Texts = Partial<Record<ConfigurationKey, string>>;

/** After a change succeeded, the configuration is read again until it holds the values sent (1 s apart). */
const REREAD_MS = 1_000;
const REREAD_TRIES = 10;

/**
 * The charger's configuration as it last reported it, every key of the table (`shared/configuration.ts`) with its
 * bounds, default and meaning, and an edit that checks the values against the table before it sends only the
 * changed keys (`PATCH …/configuration`); the command is followed, and the configuration read again once the
 * charger applied it.
 */
export function ConfigurationTable({
  deviceId,
  onSent,
  refreshKey = 0,
}: {
  deviceId: string;
  onSent: (s: Sent) => void;
  /** Changes when the configuration is worth reading again (the charger restarted: it reports at every start). */
  refreshKey?: number;
}) {
  const { api, canWrite } = useApp();
  const now = useNow(5_000);
  const path = `/v1/operator/devices/${encodeURIComponent(deviceId)}/configuration`;
  const config = useLoad(() => api.get<ConfigurationView>(path), [deviceId, refreshKey]);
  const [editing, setEditing] = useState<Texts | undefined>(undefined);
  const [errors, setErrors] = useState<ConfigurationEdit['errors']>({});
  const [formError, setFormError] = useState<string | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const [sent, setSent] = useState<{ commandId: string; values: ConfigurationEdit['values'] } | undefined>(
    undefined,
  );
  const values = config.data?.values ?? {};
  // An edit starts from the reported value, or from the default before any report.
  const startFrom = (): Texts =>
    Object.fromEntries(
      CONFIGURATION_KEY_ORDER.map((k) => [k, valueText(values[k] ?? CONFIGURATION_TABLE[k].default)]),
    );

  const submit = async (e: Event) => {
    e.preventDefault();
    if (!editing) return;
    const data = new FormData(e.currentTarget as HTMLFormElement);
    const typed: Texts = Object.fromEntries(
      CONFIGURATION_KEY_ORDER.map((k) => [k, String(data.get(k) ?? '')]),
    );
    const edit = configurationEdit(typed, editing);
    setErrors(edit.errors);
    setFormError(undefined);
    if (Object.keys(edit.errors).length > 0) return;
    if (Object.keys(edit.values).length === 0) return setFormError('Nothing changed: no value differs.');
    setBusy(true);
    try {
      const answer = await api.patch<{ command_id: string }>(path, { values: edit.values });
      setSent({ commandId: answer.command_id, values: edit.values });
      onSent({
        commandId: answer.command_id,
        command: 'set_configuration',
        sentAt: new Date().toISOString(),
      });
      setEditing(undefined);
    } catch (err) {
      const key = err instanceof ApiError ? configurationFieldOf(err.details) : undefined;
      if (key && err instanceof ApiError) setErrors({ [key]: err.describe() });
      else setFormError(describeError(err));
    } finally {
      setBusy(false);
    }
  };

  const unknown = unknownReportedKeys(values);
  return (
    <Section
      title="Configuration"
      actions={
        <>
          {canWrite && !editing ? (
            <button
              type="button"
              class="secondary"
              disabled={!config.data}
              onClick={() => {
                setErrors({});
                setFormError(undefined);
                setEditing(startFrom());
              }}
            >
              Edit
            </button>
          ) : null}
          <button type="button" class="secondary" onClick={config.reload}>
            Refresh
          </button>
        </>
      }
    >
      <ErrorLine error={config.error} />
      {config.loading && !config.data ? <Loading what="the configuration" /> : null}
      {config.data ? (
        <p class="small" data-reported-at={config.data.reported_at ?? ''}>
          {config.data.reported_at ? (
            <>
              Reported by the charger{' '}
              <span title={dateTime(config.data.reported_at)}>{ago(config.data.reported_at, now)}</span> (
              {dateTime(config.data.reported_at)}).
            </>
          ) : (
            <span class="muted">Not reported yet: the charger reports its configuration when it starts.</span>
          )}
        </p>
      ) : null}
      {config.data ? (
        <form class="configuration-form" aria-label="Configuration" noValidate onSubmit={submit}>
          <div class="table-frame">
            <table class="configuration">
              <thead>
                <tr>
                  <th scope="col">Key</th>
                  <th scope="col">Value</th>
                  <th scope="col">Bounds</th>
                  <th scope="col">Default</th>
                  <th scope="col">Meaning</th>
                </tr>
              </thead>
              <tbody>
                {CONFIGURATION_KEY_ORDER.map((key) => (
                  <tr key={key} data-key={key} data-value={valueText(values[key])}>
                    <th scope="row">
                      <code id={`config-${key}`}>{key}</code>
                    </th>
                    <td>
                      {editing ? (
                        <ValueInput name={key} initial={editing[key] ?? ''} error={errors[key]} />
                      ) : values[key] === undefined ? (
                        <span class="muted">
                          {config.data?.reported_at ? 'not reported' : 'not reported yet'}
                        </span>
                      ) : (
                        <strong>{valueText(values[key])}</strong>
                      )}
                    </td>
                    <td class="small">{boundsText(key)}</td>
                    <td>{String(CONFIGURATION_TABLE[key].default)}</td>
                    <td class="small">{CONFIGURATION_TABLE[key].description}</td>
                  </tr>
                ))}
                {unknown.map((key) => (
                  <tr key={key} data-key={key} data-value={valueText(values[key])}>
                    <th scope="row">
                      <code>{key}</code>
                    </th>
                    <td>
                      <strong>{valueText(values[key])}</strong>
                    </td>
                    <td colSpan={3} class="small muted">
                      Reported by the charger, unknown to this dashboard: not editable here.
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {editing ? (
            <div class="days">
              <button type="submit" disabled={busy}>
                {busy ? 'Sending…' : 'Send changes'}
              </button>
              <button type="button" class="secondary" onClick={() => setEditing(undefined)}>
                Cancel
              </button>
            </div>
          ) : null}
          <ErrorLine error={formError} />
        </form>
      ) : null}
      {sent ? (
        <ConfigurationSent key={sent.commandId} sent={sent} path={path} onReported={config.reload} />
      ) : null}
    </Section>
  );
}

/** A value's input, bounded by the table: a number with min and max, or a select of the choices. */
function ValueInput({ name, initial, error }: { name: ConfigurationKey; initial: string; error?: string }) {
  const spec = CONFIGURATION_TABLE[name];
  const errorId = `config-${name}-error`;
  const common = {
    name,
    'aria-labelledby': `config-${name}`,
    'aria-invalid': error ? true : undefined,
    'aria-describedby': error ? errorId : undefined,
  } as const;
  return (
    <span class={error ? 'field invalid' : 'field'}>
      {spec.type === 'choice' ? (
        <select {...common}>
          {spec.choices.map((c) => (
            <option key={c} value={c} selected={c === initial}>
              {c}
            </option>
          ))}
        </select>
      ) : (
        <span class="with-unit">
          <input
            {...common}
            type="number"
            inputMode="numeric"
            min={spec.min}
            max={spec.max}
            step={1}
            defaultValue={initial}
          />{' '}
          {spec.unit}
        </span>
      )}
      {error ? (
        <span class="error small" role="alert" id={errorId}>
          {error}
        </span>
      ) : null}
    </span>
  );
}

/** The change followed; once it succeeded, the configuration read again until the charger's report holds it. */
function ConfigurationSent({
  sent,
  path,
  onReported,
}: {
  sent: { commandId: string; values: ConfigurationEdit['values'] };
  path: string;
  onReported: () => void;
}) {
  const { api } = useApp();
  const outcome = useCommandOutcome(sent.commandId);
  const [state, setState] = useState<'waiting' | 'reported' | 'late'>('waiting');
  const succeeded = outcome?.status === 'succeeded';
  useEffect(() => {
    if (!succeeded) return;
    let current = true;
    let tries = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const look = async () => {
      tries++;
      try {
        const view = await api.get<ConfigurationView>(path);
        if (!current) return;
        if (reportedHolds(view.values, sent.values)) {
          setState('reported');
          onReported();
          return;
        }
      } catch {
        // The next try may do.
      }
      if (!current) return;
      if (tries >= REREAD_TRIES) {
        setState('late');
        onReported();
      } else timer = setTimeout(look, REREAD_MS);
    };
    void look();
    return () => {
      current = false;
      clearTimeout(timer);
    };
  }, [succeeded]);
  return (
    <>
      <SentCommand commandId={sent.commandId} command="set_configuration" />
      {succeeded && state === 'reported' ? (
        <p aria-live="polite" data-configuration-applied>
          Applied: the charger reported the new values.
        </p>
      ) : null}
      {succeeded && state === 'late' ? (
        <p class="notice" role="status">
          Applied, but the charger has not reported its configuration yet: Refresh in a moment.
        </p>
      ) : null}
    </>
  );
}
