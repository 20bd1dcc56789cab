import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { describeError } from '../api.js';
import { useApp } from '../app-context.js';
import { compact, optionalNumber, requiredNumber } from '../form-values.js';
import { SentCommand } from './sent-command.js';

type Action = 'stop' | 'start' | 'discharge';

export interface Sent {
  commandId: string;
  command: string;
  sentAt: string;
}

/**
 * Stop, start and (on V2G connectors) discharge for one connector. Each form posts to the operator API and then
 * follows its command live on the stream; an error is shown as the API worded it.
 */
export function ConnectorActions({
  deviceId,
  connectorId,
  v2g,
  onSent,
}: {
  deviceId: string;
  connectorId: number;
  v2g: boolean;
  onSent: (s: Sent) => void;
}) {
  const { canWrite } = useApp();
  const [open, setOpen] = useState<Action | undefined>(undefined);
  if (!canWrite) return <p class="muted small">Read-only client: no commands.</p>;
  const actions: Action[] = v2g ? ['stop', 'start', 'discharge'] : ['stop', 'start'];
  const base = `/v1/operator/devices/${encodeURIComponent(deviceId)}/connectors/${connectorId}`;
  return (
    <div class="actions">
      <fieldset class="action-buttons plain" aria-label={`Commands for connector ${connectorId}`}>
        {actions.map((a) => (
          <button
            key={a}
            type="button"
            class={open === a ? '' : 'secondary'}
            aria-expanded={open === a}
            onClick={() => setOpen(open === a ? undefined : a)}
          >
            {a[0]?.toUpperCase()}
            {a.slice(1)}
          </button>
        ))}
      </fieldset>
      {open === 'stop' ? (
        <CommandForm
          label={`Stop connector ${connectorId}`}
          command="stop"
          path={`${base}/stop`}
          onSent={onSent}
          body={(f) => compact({ reason: f.get('reason') })}
        >
          <label>
            Reason (optional)
            <input name="reason" placeholder="user_request" />
          </label>
        </CommandForm>
      ) : null}
      {open === 'start' ? (
        <CommandForm
          label={`Start connector ${connectorId}`}
          command="start"
          path={`${base}/start`}
          onSent={onSent}
          body={(f) =>
            compact({
              target_soc: optionalNumber(f.get('target_soc')),
              power_limit: optionalNumber(f.get('power_limit')),
            })
          }
        >
          <label>
            Target SOC, % (optional)
            <input name="target_soc" inputMode="decimal" />
          </label>
          <label>
            Power limit, kW (optional)
            <input name="power_limit" inputMode="decimal" />
          </label>
        </CommandForm>
      ) : null}
      {open === 'discharge' ? (
        <CommandForm
          label={`Discharge connector ${connectorId}`}
          command="discharge"
          path={`${base}/discharge`}
          onSent={onSent}
          body={(f) =>
            compact({
              discharge_power: requiredNumber(f.get('discharge_power')),
              duration: requiredNumber(f.get('duration')),
              min_soc: optionalNumber(f.get('min_soc')),
            })
          }
        >
          <label>
            Discharge power, kW
            <input name="discharge_power" inputMode="decimal" defaultValue="7" />
          </label>
          <label>
            Duration, seconds
            <input name="duration" inputMode="numeric" defaultValue="900" />
          </label>
          <label>
            Stop at SOC, % (default 20)
            <input name="min_soc" inputMode="decimal" />
          </label>
        </CommandForm>
      ) : null}
    </div>
  );
}

export interface Fields {
  get(name: string): string;
  getAll(name: string): string[];
}

/** A form that posts one command and then shows it moving; the API's answer decides what is valid. */
export function CommandForm({
  label,
  command,
  path,
  body,
  onSent,
  children,
  submitText = 'Send',
}: {
  label: string;
  command: string;
  path: string;
  body: (f: Fields) => unknown;
  onSent: (s: Sent) => void;
  children: ComponentChildren;
  submitText?: string;
}) {
  const { api } = useApp();
  const [error, setError] = useState<string | undefined>(undefined);
  const [sent, setSent] = useState<Sent | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const data = new FormData(e.currentTarget as HTMLFormElement);
    const fields: Fields = {
      get: (n) => String(data.get(n) ?? ''),
      getAll: (n) => data.getAll(n).map(String),
    };
    setBusy(true);
    setError(undefined);
    try {
      const answer = await api.post<{ command_id: string }>(path, body(fields));
      const s = { commandId: answer.command_id, command, sentAt: new Date().toISOString() };
      setSent(s);
      onSent(s);
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="command-form" onSubmit={submit} aria-label={label}>
      {children}
      <button type="submit" disabled={busy}>
        {busy ? 'Sending…' : submitText}
      </button>
      {error ? (
        <p class="error" role="alert">
          {error}
        </p>
      ) : null}
      {sent ? <SentCommand commandId={sent.commandId} command={sent.command} /> : null}
    </form>
  );
}
