import { useEffect, useState } from 'preact/hooks';
import { useApp, useFleet } from '../app-context.js';
import { CommandStatusBadge } from './bits.js';

/** A command this page sent, following it live: `queued → delivered → accepted → succeeded`. */
export function SentCommand({ commandId, command }: { commandId: string; command: string }) {
  const heard = useFleet().commands.get(commandId);
  const trail = heard ? (heard.trail[0] === 'queued' ? heard.trail : ['queued', ...heard.trail]) : ['queued'];
  const status = heard?.status ?? 'queued';
  return (
    <p class="sent" aria-live="polite" data-command-id={commandId}>
      {command} <code>{commandId}</code>: <span class="trail">{trail.join(' → ')}</span>{' '}
      <CommandStatusBadge status={status} />
      {heard?.reason ? <span class="muted"> ({heard.reason})</span> : null}
    </p>
  );
}

const FINAL = new Set(['succeeded', 'failed', 'rejected', 'expired', 'cancelled']);

export interface CommandOutcome {
  status: string;
  /** What the charger reported the command produced (`result`), read once the command is final. */
  result?: Record<string, unknown>;
}

/**
 * The final status of a command followed on the stream, and then its `result` (the stream does not carry it):
 * `GET /v1/operator/commands/{id}` once. Undefined while the command is still moving.
 */
export function useCommandOutcome(commandId: string | undefined): CommandOutcome | undefined {
  const { api } = useApp();
  const heard = useFleet().commands.get(commandId ?? '');
  const final = heard && FINAL.has(heard.status) ? heard.status : undefined;
  const [outcome, setOutcome] = useState<CommandOutcome | undefined>(undefined);
  useEffect(() => {
    setOutcome(undefined);
    if (!commandId || !final) return;
    let current = true;
    api
      .get<{ status: string; result?: Record<string, unknown> }>(
        `/v1/operator/commands/${encodeURIComponent(commandId)}`,
      )
      .then(
        (c) => current && setOutcome({ status: c.status, result: c.result }),
        // The status heard is enough to go on with; the result is what is missing.
        () => current && setOutcome({ status: final }),
      );
    return () => {
      current = false;
    };
  }, [commandId, final]);
  return outcome;
}
