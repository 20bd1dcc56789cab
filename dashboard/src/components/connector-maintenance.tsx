import { useEffect, useState } from 'preact/hooks';
import { describeError } from '../api.js';
import { useApp } from '../app-context.js';
import { availabilityNote } from '../maintenance-rules.js';
import { ErrorLine } from './bits.js';
import type { Sent } from './command-forms.js';
import { SentCommand, useCommandOutcome } from './sent-command.js';

interface Followed {
  commandId: string;
  command: 'set_availability' | 'unlock_connector';
  /** set_availability: what was asked. */
  available?: boolean;
}

/**
 * One connector's maintenance: take it out of service or put it back (`PUT …/availability`) and release its
 * cable lock (`POST …/unlock`), each followed to its status. Once an availability change succeeded the charger is
 * read again, since the stream does not carry a connector's `available`.
 */
export function ConnectorMaintenance({
  deviceId,
  connectorId,
  available,
  onSent,
}: {
  deviceId: string;
  connectorId: number;
  /** As the API last showed it; undefined from a platform that does not say (in service). */
  available: boolean | undefined;
  onSent: (s: Sent) => void;
}) {
  const { api, canWrite } = useApp();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | undefined>(undefined);
  const [followed, setFollowed] = useState<Followed | undefined>(undefined);
  if (!canWrite) return null;
  const inService = available !== false;
  const base = `/v1/operator/devices/${encodeURIComponent(deviceId)}/connectors/${connectorId}`;
  const send = async (command: Followed['command'], call: () => Promise<{ command_id: string }>) => {
    setBusy(true);
    setError(undefined);
    try {
      const answer = await call();
      setFollowed({
        commandId: answer.command_id,
        command,
        available: command === 'set_availability' ? !inService : undefined,
      });
      onSent({ commandId: answer.command_id, command, sentAt: new Date().toISOString() });
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="actions" data-maintenance-connector={connectorId}>
      <fieldset class="action-buttons plain" aria-label={`Maintenance of connector ${connectorId}`}>
        <button
          type="button"
          class="secondary"
          disabled={busy}
          onClick={() =>
            send('set_availability', () => api.put(`${base}/availability`, { available: !inService }))
          }
        >
          {inService ? 'Take out of service' : 'Put back in service'}
        </button>
        <button
          type="button"
          class="secondary"
          disabled={busy}
          onClick={() => send('unlock_connector', () => api.post(`${base}/unlock`))}
        >
          Unlock cable
        </button>
      </fieldset>
      <ErrorLine error={error} />
      {followed ? <FollowedCommand key={followed.commandId} deviceId={deviceId} followed={followed} /> : null}
    </div>
  );
}

function FollowedCommand({ deviceId, followed }: { deviceId: string; followed: Followed }) {
  const { fleet } = useApp();
  const outcome = useCommandOutcome(followed.commandId);
  const [refreshError, setRefreshError] = useState<string | undefined>(undefined);
  const availabilitySet = followed.command === 'set_availability' && outcome?.status === 'succeeded';
  useEffect(() => {
    if (!availabilitySet) return;
    fleet.refreshDevice(deviceId).catch((err: unknown) => setRefreshError(describeError(err)));
  }, [availabilitySet]);
  return (
    <>
      <SentCommand commandId={followed.commandId} command={followed.command} />
      {availabilitySet ? (
        <p aria-live="polite" data-availability-note>
          {availabilityNote(followed.available === true, outcome.result)}
        </p>
      ) : null}
      {followed.command === 'unlock_connector' && outcome?.status === 'succeeded' ? (
        <p aria-live="polite">Cable lock released.</p>
      ) : null}
      <ErrorLine error={refreshError} />
    </>
  );
}
