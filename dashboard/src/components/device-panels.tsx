import { useState } from 'preact/hooks';
import { describeError } from '../api.js';
import { useApp, useFleet, useLoad } from '../app-context.js';
import type { Page } from '../fleet-store.js';
import { dateTime } from '../format.js';
import { Badge, CommandStatusBadge, ErrorLine, Loading, Section } from './bits.js';
import type { Sent } from './command-forms.js';

interface CommandItem {
  command_id: string;
  command: string;
  status: string;
  reason?: string;
  created_at: string;
  updated_at: string;
  control_id?: string;
  params: Record<string, unknown>;
}

/**
 * The commands sent to a charger, newest first: the API's list, plus those sent from this page, each with its
 * status as the stream last reported it.
 */
export function CommandsPanel({ deviceId, sent }: { deviceId: string; sent: readonly Sent[] }) {
  const { api } = useApp();
  const heard = useFleet().commands;
  const list = useLoad(
    () =>
      api.get<Page<CommandItem>>(`/v1/operator/devices/${encodeURIComponent(deviceId)}/commands`, {
        size: 20,
      }),
    [deviceId],
  );
  const known = new Set((list.data?.items ?? []).map((c) => c.command_id));
  const extra: CommandItem[] = [];
  // Sent from this page, or heard on the stream for this charger, since the list was read.
  for (const s of [...sent].reverse()) {
    if (known.has(s.commandId)) continue;
    known.add(s.commandId);
    // Known only by its id until the list is read again: the stream's statuses always win over this one.
    extra.push({
      command_id: s.commandId,
      command: s.command,
      status: 'queued',
      created_at: s.sentAt,
      updated_at: new Date(0).toISOString(),
      params: {},
    });
  }
  for (const h of [...heard.values()].reverse()) {
    if (h.device_id !== deviceId || known.has(h.command_id)) continue;
    known.add(h.command_id);
    extra.push({
      command_id: h.command_id,
      command: h.command,
      status: h.status,
      created_at: h.at,
      updated_at: h.at,
      params: {},
    });
  }
  const items = [...extra, ...(list.data?.items ?? [])];
  return (
    <Section
      title="Commands"
      actions={
        <button type="button" class="secondary" onClick={list.reload}>
          Refresh
        </button>
      }
    >
      <ErrorLine error={list.error} />
      {list.loading && !list.data ? <Loading what="commands" /> : null}
      {items.length === 0 && !list.loading ? (
        <p class="muted">No commands sent to this charger yet.</p>
      ) : null}
      {items.length > 0 ? (
        <div class="table-frame">
          <table class="commands">
            <thead>
              <tr>
                <th scope="col">Command</th>
                <th scope="col">Status</th>
                <th scope="col">Parameters</th>
                <th scope="col">Sent</th>
                <th scope="col">ID</th>
              </tr>
            </thead>
            <tbody>
              {items.map((c) => {
                const live = heard.get(c.command_id);
                const status =
                  live && Date.parse(live.at) >= Date.parse(c.updated_at) ? live.status : c.status;
                return (
                  <tr key={c.command_id} data-command-id={c.command_id}>
                    <td>
                      {c.command}
                      {c.control_id ? <span class="muted small"> (flexibility {c.control_id})</span> : null}
                    </td>
                    <td>
                      <CommandStatusBadge status={status} />
                      {c.reason ? <span class="muted small"> {c.reason}</span> : null}
                    </td>
                    <td class="small">{paramsText(c.params)}</td>
                    <td>{dateTime(c.created_at)}</td>
                    <td>
                      <code>{c.command_id}</code>
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      ) : null}
    </Section>
  );
}

function paramsText(params: Record<string, unknown>): string {
  const entries = Object.entries(params).filter(([, v]) => typeof v !== 'object');
  return entries.length === 0 ? '—' : entries.map(([k, v]) => `${k}=${String(v)}`).join(', ');
}

interface EventItem {
  event_id: string;
  kind: string;
  severity: string;
  timestamp: string;
  connector_id?: number;
  message?: string;
}

export function EventsPanel({ deviceId, refreshKey = 0 }: { deviceId: string; refreshKey?: number }) {
  const { api } = useApp();
  const [page, setPage] = useState(1);
  const events = useLoad(
    () =>
      api.get<Page<EventItem>>(`/v1/operator/devices/${encodeURIComponent(deviceId)}/events`, {
        page,
        size: 20,
      }),
    [deviceId, page, refreshKey],
  );
  const pages = events.data ? Math.max(1, Math.ceil(events.data.total / events.data.size)) : 1;
  return (
    <Section
      title="Events"
      actions={
        <button type="button" class="secondary" onClick={events.reload}>
          Refresh
        </button>
      }
    >
      <ErrorLine error={events.error} />
      {events.loading && !events.data ? <Loading what="events" /> : null}
      {events.data && events.data.items.length === 0 ? <p class="muted">No events.</p> : null}
      {events.data && events.data.items.length > 0 ? (
        <div class="table-frame">
          <table>
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Event</th>
                <th scope="col">Severity</th>
                <th scope="col">Connector</th>
                <th scope="col">Message</th>
              </tr>
            </thead>
            <tbody>
              {events.data.items.map((e) => (
                <tr key={e.event_id}>
                  <td>{dateTime(e.timestamp)}</td>
                  <td>{e.kind}</td>
                  <td>
                    <Badge kind={e.severity}>{e.severity}</Badge>
                  </td>
                  <td>{e.connector_id ?? '—'}</td>
                  <td>{e.message ?? ''}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
      <Pager page={page} pages={pages} onPage={setPage} />
    </Section>
  );
}

interface ScheduleItem {
  schedule_id: string;
  type: string;
  enabled: boolean;
  timezone: string;
  target_soc?: number;
  time_slots: Array<{
    start: string;
    end: string;
    power_limit?: number;
    action: string;
    day_of_week?: string[];
  }>;
}

/** Each connector's stored schedules, with a delete that queues `delete_schedule`. */
export function SchedulesPanel({
  deviceId,
  connectors,
  onSent,
  refreshKey,
}: {
  deviceId: string;
  connectors: readonly number[];
  onSent: (s: Sent) => void;
  refreshKey: number;
}) {
  const { api, canWrite } = useApp();
  const [error, setError] = useState<string | undefined>(undefined);
  const schedules = useLoad(async () => {
    const out: Array<ScheduleItem & { connector_id: number }> = [];
    for (const c of connectors) {
      const p = await api.get<Page<ScheduleItem>>(
        `/v1/operator/devices/${encodeURIComponent(deviceId)}/connectors/${c}/schedules`,
        { size: 100 },
      );
      for (const s of p.items) out.push({ ...s, connector_id: c });
    }
    return out;
  }, [deviceId, connectors.join(','), refreshKey]);
  const remove = async (connectorId: number, scheduleId: string) => {
    setError(undefined);
    try {
      const answer = await api.del<{ command_id: string }>(
        `/v1/operator/devices/${encodeURIComponent(deviceId)}/connectors/${connectorId}/schedules/${encodeURIComponent(scheduleId)}`,
      );
      onSent({ commandId: answer.command_id, command: 'delete_schedule', sentAt: new Date().toISOString() });
      schedules.reload();
    } catch (err) {
      setError(describeError(err));
    }
  };
  return (
    <Section title="Schedules">
      <ErrorLine error={schedules.error ?? error} />
      {schedules.loading && !schedules.data ? <Loading what="schedules" /> : null}
      {schedules.data && schedules.data.length === 0 ? <p class="muted">No schedules stored.</p> : null}
      {schedules.data && schedules.data.length > 0 ? (
        <ul class="schedules">
          {schedules.data.map((s) => (
            <li key={`${s.connector_id}/${s.schedule_id}`}>
              <strong>{s.schedule_id}</strong> · connector {s.connector_id} · {s.type}
              {s.enabled ? '' : ' (disabled)'} · {s.timezone}
              {s.target_soc !== undefined ? ` · until ${s.target_soc} %` : ''}
              <ul>
                {s.time_slots.map((t) => (
                  <li key={`${t.start}-${t.end}-${(t.day_of_week ?? []).join()}`}>
                    {t.day_of_week ? `${t.day_of_week.join(', ')} ` : ''}
                    {t.start}–{t.end} {t.action}
                    {t.power_limit !== undefined ? ` at most ${t.power_limit} kW` : ''}
                  </li>
                ))}
              </ul>
              {canWrite ? (
                <button
                  type="button"
                  class="secondary small"
                  onClick={() => remove(s.connector_id, s.schedule_id)}
                >
                  Delete {s.schedule_id}
                </button>
              ) : null}
            </li>
          ))}
        </ul>
      ) : null}
    </Section>
  );
}

export function Pager({ page, pages, onPage }: { page: number; pages: number; onPage: (p: number) => void }) {
  if (pages <= 1) return null;
  return (
    <nav class="pager" aria-label="Pages">
      <button type="button" class="secondary" disabled={page <= 1} onClick={() => onPage(page - 1)}>
        Previous
      </button>
      <span aria-current="page">
        Page {page} of {pages}
      </span>
      <button type="button" class="secondary" disabled={page >= pages} onClick={() => onPage(page + 1)}>
        Next
      </button>
    </nav>
  );
}
