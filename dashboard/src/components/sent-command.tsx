import { useFleet } from '../app-context.js';
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
