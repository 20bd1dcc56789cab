/**
 * `charger-agent schedules --data-dir DIR [--json]`: the stored schedules, overrides and flexibility limits
 * per connector, with what is in force now and the next change.
 * `charger-agent commands --data-dir DIR [--limit N] [--json]`: the command journal, newest first.
 * Both read the store only (read-only, also while the agent runs).
 */

import type { ConnectorOverride } from '../core/connector-policy.js';
import { effectiveWindowOf, type StoredSchedule } from '../core/schedule-engine.js';
import type { AgentStore } from '../store/agent-store.js';
import { clip, isoShort, kw, relative, table, when } from './format.js';
import { type LimitReport, limitReport } from './limit-report.js';
import { type ConnectorPolicyView, connectorPolicy, describeMode } from './policy.js';
import { printableLines } from './terminal-text.js';

export interface ScheduleView {
  schedule: StoredSchedule;
  /** Enabled and within its effective window now. */
  in_effect: boolean;
  /** When the schedule is in effect; null when never (a spent `once`, an empty window). */
  effective: { from: string | null; until: string | null } | null;
}

export interface ConnectorSchedules extends ConnectorPolicyView {
  connector_id: number;
  rated_power_kw: number | null;
  v2g_capable: boolean | null;
  override: ConnectorOverride | null;
  schedules: ScheduleView[];
}

export interface SchedulesReport {
  checked_at: string;
  connectors: ConnectorSchedules[];
  /** Flexibility limits apply to every connector of the charger. */
  limits: Array<LimitReport & { command_id: string }>;
}

const isoOrNull = (ms: number) => (Number.isFinite(ms) ? new Date(ms).toISOString() : null);

export function collectSchedules(store: AgentStore, now = Date.now()): SchedulesReport {
  const infos = new Map(store.listConnectors().map((c) => [c.connectorId, c]));
  const snapshots = new Map(store.listSnapshots().map((s) => [s.connectorId, s]));
  const overrides = store.listOverrides();
  const byConnector = new Map<number, StoredSchedule[]>();
  for (const { connectorId, schedule } of store.listSchedules()) {
    const list = byConnector.get(connectorId) ?? [];
    list.push(schedule);
    byConnector.set(connectorId, list);
  }
  const limits = store.listLimits();
  const ids = [...new Set([...infos.keys(), ...byConnector.keys(), ...overrides.keys()])].sort(
    (a, b) => a - b,
  );
  return {
    checked_at: new Date(now).toISOString(),
    connectors: ids.map((id) => {
      const info = infos.get(id);
      const schedules = byConnector.get(id) ?? [];
      const override = overrides.get(id);
      const snapshot = snapshots.get(id);
      return {
        connector_id: id,
        rated_power_kw: info?.ratedPowerKw ?? null,
        v2g_capable: info?.v2gCapable ?? null,
        override: override ?? null,
        schedules: schedules.map((schedule) => {
          const window = effectiveWindowOf(schedule);
          return {
            schedule,
            in_effect: schedule.enabled && window !== undefined && window.from <= now && now < window.until,
            effective: window ? { from: isoOrNull(window.from), until: isoOrNull(window.until) } : null,
          };
        }),
        ...connectorPolicy({
          connector: info ?? { connectorId: id, ratedPowerKw: Number.POSITIVE_INFINITY, v2gCapable: false },
          schedules,
          limits,
          ...(override ? { override } : {}),
          ...(snapshot ? { snapshot } : {}),
          now,
        }),
      };
    }),
    limits: limits.map((l) => ({ ...limitReport(l, now), command_id: l.commandId })),
  };
}

function slotsOf(schedule: StoredSchedule): string {
  return schedule.time_slots
    .map((slot) => {
      const days = slot.day_of_week
        ? slot.day_of_week.join(',')
        : schedule.type === 'once'
          ? 'once'
          : 'every day';
      const power = slot.power_limit !== undefined ? ` ≤${slot.power_limit} kW` : '';
      return `${days} ${slot.start}-${slot.end} ${slot.action ?? 'charge'}${power}`;
    })
    .join('; ');
}

function overrideOf(o: ConnectorOverride, now: number): string {
  switch (o.kind) {
    case 'stop':
      return `stopped by command ${o.commandId} since ${isoShort(o.since)} (until the vehicle leaves)`;
    case 'start':
      return `started by command ${o.commandId} since ${isoShort(o.since)}${o.powerLimitKw !== undefined ? `, ≤${o.powerLimitKw} kW` : ''}${o.targetSoc !== undefined ? `, to ${o.targetSoc}% SOC` : ''} (until the vehicle leaves)`;
    case 'discharge':
      return `discharging ${o.powerKw} kW by command ${o.commandId} until ${when(o.until, now)}, down to ${o.minSoc}% SOC`;
  }
}

export function renderSchedules(r: SchedulesReport): string {
  const now = Date.parse(r.checked_at);
  const lines: string[] = [];
  if (r.connectors.length === 0) lines.push('No connectors known yet (the agent has not started here).');
  for (const c of r.connectors) {
    const rating =
      c.rated_power_kw !== null ? ` (${kw(c.rated_power_kw)}${c.v2g_capable ? ', V2G' : ''})` : '';
    lines.push(`Connector ${c.connector_id}${rating}`);
    const next = c.next_change
      ? `${when(c.next_change.at, now)}: ${describeMode(c.next_change.mode, c.next_change.power_limit_kw)} — ${c.next_change.reason}`
      : 'none within 8 days';
    lines.push(
      `  in force     ${describeMode(c.in_force.mode, c.in_force.power_limit_kw)} — ${c.in_force.reason}`,
    );
    lines.push(`  next change  ${next}`);
    if (c.override) lines.push(`  override     ${overrideOf(c.override, now)}`);
    if (c.schedules.length === 0) {
      lines.push('  schedules    none (charging is not restricted by a schedule)');
    } else {
      lines.push(
        ...table(
          [
            ['SCHEDULE', 'TYPE', 'TIMEZONE', 'STATE', 'EFFECTIVE', 'TARGET', 'SLOTS'],
            ...c.schedules.map((s) => [
              s.schedule.schedule_id,
              s.schedule.type,
              s.schedule.timezone,
              !s.schedule.enabled
                ? 'disabled'
                : s.in_effect
                  ? 'in effect'
                  : s.effective
                    ? 'not now'
                    : 'spent',
              !s.effective
                ? '-'
                : !s.effective.from && !s.effective.until
                  ? 'always'
                  : `${s.effective.from ? isoShort(s.effective.from) : '…'} → ${s.effective.until ? isoShort(s.effective.until) : '…'}`,
              s.schedule.target_soc !== undefined ? `${s.schedule.target_soc}%` : '-',
              slotsOf(s.schedule),
            ]),
          ],
          '  ',
        ),
      );
    }
    lines.push('');
  }
  if (r.limits.length === 0) lines.push('Flexibility limits: none stored');
  else {
    lines.push('Flexibility limits (all connectors):');
    lines.push(
      ...table(
        [
          ['CONTROL', 'KIND', 'LIMIT', 'FROM', 'UNTIL', 'STATE', 'REASON'],
          ...r.limits.map((l) => [
            l.control_id,
            l.kind,
            l.kind === 'pause' ? '0' : `${l.power_limit_percent ?? 100}%`,
            isoShort(l.starts_at),
            isoShort(l.ends_at),
            l.active ? 'in force' : Date.parse(l.starts_at) > now ? 'coming' : 'ended',
            l.reason ?? '',
          ]),
        ],
        '  ',
      ),
    );
  }
  return printableLines(`${lines.join('\n')}\n`);
}

export interface CommandsReport {
  /** Entries in the journal (final ones are pruned 30 days after their expiry). */
  total: number;
  commands: Array<{
    command_id: string;
    command: string;
    status: string;
    reason: string | null;
    params: unknown;
    expiry: string;
    received_at: string;
    updated_at: string;
  }>;
}

export function collectCommands(store: AgentStore, limit: number): CommandsReport {
  const total = (store.db.prepare('SELECT count(*) AS n FROM commands').get() as { n: number }).n;
  return {
    total,
    commands: store.journalRecent(limit).map((e) => ({
      command_id: e.commandId,
      command: e.command,
      status: e.status,
      reason: e.reason ?? null,
      params: e.params,
      expiry: e.expiry,
      received_at: e.receivedAt,
      updated_at: e.updatedAt,
    })),
  };
}

export function renderCommands(r: CommandsReport, now = Date.now()): string {
  if (r.commands.length === 0) return 'The command journal is empty.\n';
  const lines = table([
    ['RECEIVED', 'COMMAND', 'STATUS', 'UPDATED', 'ID', 'PARAMS', 'REASON'],
    ...r.commands.map((c) => [
      `${isoShort(c.received_at)} (${relative(c.received_at, now)})`,
      c.command,
      c.status,
      isoShort(c.updated_at),
      c.command_id,
      clip(JSON.stringify(c.params ?? null), 48),
      clip(c.reason ?? '', 80),
    ]),
  ]);
  lines.push('', `${r.commands.length} of ${r.total} journaled command(s), newest first.`);
  return printableLines(`${lines.join('\n')}\n`);
}
