import { useState } from 'preact/hooks';
import { describeError } from '../api.js';
import { useApp, useFleet } from '../app-context.js';
import { compact, requiredNumber } from '../form-values.js';
import { CommandStatusBadge, ErrorLine } from './bits.js';

interface ControlView {
  control_id: string;
  status: string;
  command: string;
  device_count: number;
  ends_at: string;
  devices: Array<{ device_id: string; command_id: string; status: string }>;
}

/**
 * Load flexibility for one site (`POST /v1/operator/control/flexibility`): a power limit or a pause for a while.
 * The control's per-charger commands then move live on the stream.
 */
export function FlexibilityForm({ siteId }: { siteId: string }) {
  const { api, canWrite } = useApp();
  const heard = useFleet().commands;
  const [command, setCommand] = useState<'set_power_limit' | 'pause_charging'>('set_power_limit');
  const [error, setError] = useState<string | undefined>(undefined);
  const [control, setControl] = useState<ControlView | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  if (!canWrite) return <p class="muted small">Read-only client: no flexibility commands.</p>;

  const submit = async (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const get = (n: string) => String(f.get(n) ?? '');
    const params =
      command === 'set_power_limit'
        ? compact({
            power_limit_percent: requiredNumber(get('power_limit_percent')),
            duration: requiredNumber(get('duration')),
            reason: get('reason'),
          })
        : compact({ duration: requiredNumber(get('duration')), reason: get('reason') });
    setBusy(true);
    setError(undefined);
    try {
      const accepted = await api.post<{ control_id: string }>('/v1/operator/control/flexibility', {
        target_type: 'site',
        target_ids: [siteId],
        command,
        params,
      });
      setControl(
        await api.get<ControlView>(`/v1/operator/control/${encodeURIComponent(accepted.control_id)}`),
      );
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };

  const progress = new Map<string, number>();
  for (const d of control?.devices ?? []) {
    const status = heard.get(d.command_id)?.status ?? d.status;
    progress.set(status, (progress.get(status) ?? 0) + 1);
  }
  return (
    <form class="command-form" onSubmit={submit} aria-label="Site flexibility">
      <div class="form-row">
        <label>
          Command
          <select value={command} onChange={(e) => setCommand(e.currentTarget.value as typeof command)}>
            <option value="set_power_limit">Limit power</option>
            <option value="pause_charging">Pause charging</option>
          </select>
        </label>
        {command === 'set_power_limit' ? (
          <label>
            Power limit, % of rating
            <input name="power_limit_percent" inputMode="numeric" defaultValue="50" />
          </label>
        ) : null}
        <label>
          Duration, seconds
          <input name="duration" inputMode="numeric" defaultValue="900" />
        </label>
        <label>
          Reason (optional)
          <input name="reason" placeholder="grid_peak" />
        </label>
      </div>
      <button type="submit" disabled={busy}>
        {busy ? 'Sending…' : 'Send to every charger of the site'}
      </button>
      <ErrorLine error={error} />
      {control ? (
        <div class="sent" aria-live="polite" data-control-id={control.control_id}>
          <p>
            Control <code>{control.control_id}</code> ({control.command}) to {control.device_count} chargers,
            until {new Date(control.ends_at).toLocaleTimeString()}:
          </p>
          <ul class="progress">
            {[...progress.entries()].map(([status, count]) => (
              <li key={status} data-progress-status={status} data-count={count}>
                <CommandStatusBadge status={status} /> {count}
              </li>
            ))}
          </ul>
        </div>
      ) : null}
    </form>
  );
}
