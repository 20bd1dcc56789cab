import { useEffect, useRef, useState } from 'preact/hooks';
import { describeError } from '../api.js';
import { useApp, useFleet } from '../app-context.js';
import type { Page } from '../fleet-store.js';
import { dateTime } from '../format.js';
import {
  newBoot,
  RESET_MODES,
  RESET_TARGETS,
  type ResetMode,
  type ResetTarget,
  resetConsequence,
} from '../maintenance-rules.js';
import { ErrorLine, Section } from './bits.js';
import type { Sent } from './command-forms.js';
import { SentCommand, useCommandOutcome } from './sent-command.js';

const TARGET_LABELS: Record<ResetTarget, string> = {
  agent: 'The agent (restart the software)',
  charger: 'The charger (reboot the hardware)',
};
const MODE_LABELS: Record<ResetMode, string> = {
  when_idle: 'When idle (no connector charging or discharging)',
  immediate: 'Now',
};

/** Looking for the boot event of the charger coming back: every 5 s, for up to 5 minutes (a slow reboot). */
const BOOT_POLL_MS = 5_000;
const BOOT_POLL_TRIES = 60;

interface EventItem {
  event_id: string;
  kind: string;
  timestamp: string;
}

/**
 * The charger-wide maintenance actions: a restart of the agent or a reboot of the charger, now or when idle
 * (`POST …/reset`), asked twice since it interrupts the charger, then followed to its status and to the boot
 * event that shows the charger back.
 */
export function MaintenanceActions({
  deviceId,
  name,
  onSent,
  onBack,
}: {
  deviceId: string;
  name: string;
  onSent: (s: Sent) => void;
  /** The charger sent a new boot event: the page's events are worth reading again. */
  onBack: () => void;
}) {
  const { canWrite } = useApp();
  const [open, setOpen] = useState(false);
  if (!canWrite) return null;
  return (
    <Section
      title="Maintenance"
      actions={
        <button type="button" class="secondary" aria-expanded={open} onClick={() => setOpen(!open)}>
          {open ? 'Close' : 'Restart…'}
        </button>
      }
    >
      {open ? (
        <RestartForm deviceId={deviceId} name={name} onSent={onSent} onBack={onBack} />
      ) : (
        <p class="muted small">Restart the charger’s agent or reboot the charger.</p>
      )}
    </Section>
  );
}

function RestartForm({
  deviceId,
  name,
  onSent,
  onBack,
}: {
  deviceId: string;
  name: string;
  onSent: (s: Sent) => void;
  onBack: () => void;
}) {
  const { api } = useApp();
  const [target, setTarget] = useState<ResetTarget>('agent');
  const [mode, setMode] = useState<ResetMode>('when_idle');
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | undefined>(undefined);
  const [sent, setSent] = useState<{ commandId: string; seenBefore: Set<string> } | undefined>(undefined);
  const keep = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (confirming) keep.current?.focus();
  }, [confirming]);
  const base = `/v1/operator/devices/${encodeURIComponent(deviceId)}`;

  const restart = async () => {
    setBusy(true);
    setError(undefined);
    try {
      // The events before: a boot event not among them is the charger coming back.
      const before = await api.get<Page<EventItem>>(`${base}/events`, { size: 20 });
      const answer = await api.post<{ command_id: string }>(`${base}/reset`, { mode, target });
      setSent({ commandId: answer.command_id, seenBefore: new Set(before.items.map((e) => e.event_id)) });
      onSent({ commandId: answer.command_id, command: 'reset', sentAt: new Date().toISOString() });
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
      setConfirming(false);
    }
  };

  return (
    <form
      class="command-form"
      aria-label={`Restart ${name}`}
      onSubmit={(e) => {
        e.preventDefault();
        setConfirming(true);
      }}
    >
      <fieldset class="plain">
        <legend>Restart</legend>
        <div class="days">
          {RESET_TARGETS.map((t) => (
            <label key={t} class="inline">
              <input
                type="radio"
                name="target"
                value={t}
                checked={target === t}
                onChange={() => setTarget(t)}
              />
              {TARGET_LABELS[t]}
            </label>
          ))}
        </div>
      </fieldset>
      <fieldset class="plain">
        <legend>When</legend>
        <div class="days">
          {RESET_MODES.map((m) => (
            <label key={m} class="inline">
              <input type="radio" name="mode" value={m} checked={mode === m} onChange={() => setMode(m)} />
              {MODE_LABELS[m]}
            </label>
          ))}
        </div>
      </fieldset>
      {confirming ? (
        <fieldset class="plain" data-confirm="reset">
          <legend>
            {target === 'charger' ? `Reboot ${name}` : `Restart the agent of ${name}`}
            {mode === 'immediate' ? ' now' : ' when idle'}?
          </legend>
          <p class="notice small">{resetConsequence(target, mode)}</p>
          <div class="days">
            <button type="button" class="danger" disabled={busy} onClick={restart}>
              {busy ? 'Sending…' : 'Yes, restart'}
            </button>
            <button type="button" class="secondary" ref={keep} onClick={() => setConfirming(false)}>
              Cancel
            </button>
          </div>
        </fieldset>
      ) : (
        <button type="submit">Restart</button>
      )}
      <ErrorLine error={error} />
      {sent ? (
        <RestartProgress
          key={sent.commandId}
          deviceId={deviceId}
          commandId={sent.commandId}
          seenBefore={sent.seenBefore}
          onBack={onBack}
        />
      ) : null}
    </form>
  );
}

/** The reset's status, the charger's reason when it refused, and then the boot event of its return. */
function RestartProgress({
  deviceId,
  commandId,
  seenBefore,
  onBack,
}: {
  deviceId: string;
  commandId: string;
  seenBefore: ReadonlySet<string>;
  onBack: () => void;
}) {
  const { api } = useApp();
  const heard = useFleet().commands.get(commandId);
  const outcome = useCommandOutcome(commandId);
  const [boot, setBoot] = useState<EventItem | undefined>(undefined);
  const [gaveUp, setGaveUp] = useState(false);
  const succeeded = outcome?.status === 'succeeded';
  useEffect(() => {
    if (!succeeded) return;
    let tries = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let current = true;
    const look = async () => {
      tries++;
      try {
        const events = await api.get<Page<EventItem>>(
          `/v1/operator/devices/${encodeURIComponent(deviceId)}/events`,
          { size: 20 },
        );
        const found = newBoot(events.items, seenBefore);
        if (!current) return;
        if (found) {
          setBoot(found);
          onBack();
          return;
        }
      } catch {
        // A read refused (rate limit) or cut: the next try may do.
      }
      if (!current) return;
      if (tries >= BOOT_POLL_TRIES) setGaveUp(true);
      else timer = setTimeout(look, BOOT_POLL_MS);
    };
    timer = setTimeout(look, 1_000);
    return () => {
      current = false;
      clearTimeout(timer);
    };
  }, [succeeded]);
  const refused = outcome && outcome.status !== 'succeeded';
  return (
    <>
      <SentCommand commandId={commandId} command="reset" />
      {refused ? (
        <p class="error" role="alert" data-reset-refused>
          Not restarted ({outcome.status}){heard?.reason ? `: ${heard.reason}` : ''}
        </p>
      ) : null}
      {succeeded && !boot && !gaveUp ? (
        <p class="muted" aria-live="polite">
          Waiting for the charger to come back…
        </p>
      ) : null}
      {boot ? (
        <p aria-live="polite" data-back={boot.event_id}>
          Back: the charger started again at {dateTime(boot.timestamp)} (boot event).
        </p>
      ) : null}
      {gaveUp ? (
        <p class="notice" role="status">
          No boot event within 5 minutes: the charger may still be restarting. Check its status and events.
        </p>
      ) : null}
    </>
  );
}
