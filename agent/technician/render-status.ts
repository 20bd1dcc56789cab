/** The terminal form of `charger-agent status`: a short summary of the report (the JSON is the report itself). */

import { OUTBOX_KINDS } from '../core/outbox-policy.js';
import {
  bytes,
  clip,
  duration,
  fields,
  isoShort,
  kw,
  relative,
  signedSeconds,
  table,
  when,
} from './format.js';
import { describeMode } from './policy.js';
import { releaseFields } from './release-status.js';
import type { CommandSummary, ConnectorStatus, noStoreReport, StatusReport, StatusState } from './status.js';
import { printableLines } from './terminal-text.js';

const STATE_LINE: Record<StatusState, string> = {
  healthy: 'HEALTHY',
  degraded: 'DEGRADED',
  not_registered: 'NOT REGISTERED',
  no_store: 'NO STORE',
};

function heartbeatLine(r: StatusReport, now: number): string {
  const beat = r.connectivity.last_heartbeat;
  if (!beat) return 'none yet';
  if (!beat.ok) return `FAILED ${relative(beat.at, now)}: ${clip(beat.error ?? '?', 100)}`;
  const rtt = beat.round_trip_ms !== null ? `, round trip ${beat.round_trip_ms} ms` : '';
  const offline = beat.status === 'offline' ? ', status offline (sent at shutdown)' : '';
  return `ok ${relative(beat.at, now)}${rtt}${offline}${r.connectivity.stale ? ' (stale)' : ''}`;
}

function agentLine(r: StatusReport, now: number): string {
  const a = r.agent;
  if (a.pid === null) return a.note;
  const version = a.version ? `, v${a.version}` : '';
  if (a.running) {
    const up = a.started_at ? `, up ${duration(now - Date.parse(a.started_at))}` : '';
    return `running (pid ${a.pid}${version}${up})`;
  }
  if (a.stopped_at) return `stopped ${relative(a.stopped_at, now)} (pid was ${a.pid}${version})`;
  return `NOT RUNNING — ${a.note} (pid was ${a.pid})`;
}

function outboxLine(r: StatusReport, now: number): string {
  const o = r.outbox;
  const parts = OUTBOX_KINDS.filter((k) => o.by_kind[k].items > 0).map((k) => `${o.by_kind[k].items} ${k}`);
  const backlog =
    o.items === 0
      ? 'empty'
      : `${o.items} items, ${bytes(o.bytes)} (${parts.join(', ')}; oldest ${o.oldest_at ? relative(o.oldest_at, now) : '?'})`;
  const drops = OUTBOX_KINDS.filter((k) => o.dropped[k] > 0).map((k) => `${o.dropped[k]} ${k}`);
  return `${backlog}; dropped for space: ${drops.length > 0 ? drops.join(', ') : 'none'}`;
}

function connectorLines(c: ConnectorStatus, now: number): string[] {
  const rating = c.rated_power_kw !== null ? ` (${kw(c.rated_power_kw)}${c.v2g_capable ? ', V2G' : ''})` : '';
  const reading =
    c.state === null
      ? 'no reading stored yet'
      : [
          c.state,
          kw(c.power_kw ?? undefined),
          c.soc !== null ? `SOC ${c.soc}%` : 'SOC -',
          c.vehicle_present ? 'vehicle plugged in' : 'no vehicle',
          ...(c.fault_code ? [`FAULT ${c.fault_code}`] : []),
        ].join(', ') + (c.reading_at ? ` (read ${relative(c.reading_at, now)})` : '');
  const inForce = `${describeMode(c.in_force.mode, c.in_force.power_limit_kw)} — ${c.in_force.reason}`;
  const next = c.next_change
    ? `${when(c.next_change.at, now)}: ${describeMode(c.next_change.mode, c.next_change.power_limit_kw)} — ${c.next_change.reason}`
    : 'none within 8 days';
  return [
    `Connector ${c.connector_id}${rating}`,
    ...fields(
      [
        ['now', reading],
        ['in force', inForce],
        ['next change', next],
      ],
      '  ',
    ),
  ];
}

function secretLine(identity: NonNullable<StatusReport['identity']>, now: number): string {
  const rotated = identity.secret_rotated_at
    ? `rotated ${when(identity.secret_rotated_at, now)}`
    : 'never rotated';
  const pending = identity.secret_rotation_pending_since;
  if (pending === null) return rotated;
  const since = pending ? ` (new secret stored ${relative(pending, now)})` : '';
  return `${rotated}; rotation under way${since}: the agent switches once the platform accepts the new secret`;
}

export function renderStatus(r: StatusReport): string {
  const now = Date.parse(r.checked_at);
  const who = r.identity ? `${r.identity.sn} (${r.identity.device_id})` : 'not registered yet';
  const lines: string[] = [`charger-agent status — ${who}`, ''];
  const token = r.token
    ? r.token.expired
      ? `EXPIRED ${relative(r.token.expires_at, now)} (the agent renews it on its next request)`
      : `valid until ${when(r.token.expires_at, now)}`
    : 'none held';
  const skew = r.clock_skew
    ? `${signedSeconds(r.clock_skew.ms)} (platform minus charger, measured ${relative(r.clock_skew.measured_at, now)})`
    : 'not measured yet';
  lines.push(
    ...fields([
      ['State', `${STATE_LINE[r.state]}${r.problems.length > 0 ? ` — ${r.problems.length} problem(s)` : ''}`],
      ['Agent', agentLine(r, now)],
      ['Platform', r.platform_url ?? '-'],
      ...(r.identity
        ? ([
            ['Registered', when(r.identity.registered_at, now)],
            ['Secret', secretLine(r.identity, now)],
          ] as const)
        : []),
      ['Heartbeat', heartbeatLine(r, now)],
      ['Token', token],
      ['Clock skew', skew],
      ['Outbox', outboxLine(r, now)],
      ...(r.releases ? releaseFields(r.releases, now) : []),
      [
        'Last error',
        r.last_error
          ? `${when(r.last_error.at, now)} ${r.last_error.where}: ${clip(r.last_error.message, 160)}`
          : 'none',
      ],
    ]),
  );
  for (const problem of r.problems) lines.push(`  ! ${problem}`);

  lines.push('');
  if (r.connectors.length === 0) lines.push('Connectors: none known yet');
  for (const c of r.connectors) lines.push(...connectorLines(c, now));

  const active = r.limits.filter((l) => l.active);
  const upcoming = r.limits.filter((l) => !l.active && Date.parse(l.starts_at) > now);
  lines.push('');
  if (active.length === 0 && upcoming.length === 0) lines.push('Flexibility limits: none in force or coming');
  else {
    lines.push('Flexibility limits (all connectors):');
    lines.push(
      ...table(
        [...active, ...upcoming].map((l) => [
          l.active ? 'in force' : 'coming',
          l.control_id,
          l.kind === 'pause' ? 'pause' : `${l.power_limit_percent ?? 100}% of rating`,
          `${isoShort(l.starts_at)} → ${isoShort(l.ends_at)}`,
          l.reason ?? '',
        ]),
        '  ',
      ),
    );
  }

  lines.push('');
  if (r.recent_commands.length === 0) lines.push('Recent commands: none');
  else {
    lines.push('Recent commands (newest first):');
    lines.push(...commandTable(r.recent_commands, now, '  '));
  }
  return printableLines(`${lines.join('\n')}\n`);
}

export function commandTable(commands: readonly CommandSummary[], now: number, indent = ''): string[] {
  return table(
    [
      ['RECEIVED', 'COMMAND', 'STATUS', 'ID', 'REASON'],
      ...commands.map((c) => [
        `${isoShort(c.received_at)} (${relative(c.received_at, now)})`,
        c.command,
        c.status,
        c.command_id,
        clip(c.reason ?? '', 80),
      ]),
    ],
    indent,
  );
}

export function renderNoStore(r: ReturnType<typeof noStoreReport>): string {
  return printableLines(
    `charger-agent status — ${STATE_LINE[r.state]}\n\n${r.problems.join('\n')}\n  hint: ${r.hint}\n`,
  );
}
