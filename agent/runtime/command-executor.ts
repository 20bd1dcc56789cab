/**
 * Carries out the platform's commands (DESIGN.md §5): `stop`, `start`, `discharge`, `set_schedule`,
 * `delete_schedule`, `set_power_limit`, `pause_charging`; `update` is handed to the update runner (§19); `reset`,
 * `set_availability`, `unlock_connector` and `set_configuration` to remote maintenance (§20, maintenance.ts).
 *
 * - De-duplicated by `command_id` through the store's journal, which survives restarts: delivery is at least
 *   once (heartbeat and long poll both deliver, and a command is redelivered until its report arrives).
 * - `checkCommand` (core/command-checks.ts, pure) refuses, with a reason a person can act on, what the charger cannot or must not do:
 *   an unknown command, invalid params, an expired command, an unknown connector, discharge without V2G
 *   hardware, a start or discharge with no vehicle.
 * - Reports go into the outbox in the same transaction as the journal entry and the command's effect on the
 *   store, so nothing is reported that is not stored, and nothing stored goes unreported. `accepted`, then
 *   `succeeded` or `failed`; or `rejected`.
 * - Execution runs on the agent's exclusive runner: commands never overlap each other or a control pass.
 * - Store-only commands (schedules, limits) succeed once stored; the control loop applies them. Hardware
 *   commands (stop, start, discharge) store an override and succeed when the control pass that applies it
 *   got the hardware there, or fail with the hardware's reason.
 * - A command accepted before a crash but not finished is finished after the restart (`resumeUnfinished`).
 */
import type { Logger } from 'pino';
import type { CommandParamsOf } from '../../shared/commands.js';
import { REASON_MAX_LENGTH } from '../../shared/limits.js';
import { replaceControlCharacters } from '../../shared/primitives.js';
import type { CommandName } from '../../shared/resources.js';
import { type Clock, iso } from '../clock.js';
import { checkCommand, type ParsedCommand, parsedOf } from '../core/command-checks.js';
import {
  type HardwareCommand,
  hardwareRefusalOf,
  limitOf,
  overrideOf,
  overrideVerdict,
} from '../core/command-effects.js';
import type { CommandReport } from '../core/outbox-payloads.js';
import type { ConnectorInfo, ConnectorReading, Hal } from '../hal.js';
import type { CommandReceiver } from '../link/platform-answers.js';
import type { AgentStore, JournalEntry } from '../store/agent-store.js';
import type { ControlLoop } from './control-loop.js';
import { isMaintenanceCommand, type Maintenance, outOfServiceRefusal } from './maintenance.js';
import type { SerialRunner } from './serial-runner.js';

/** Reasons travel to the platform: keep them within its limit, on one line (it refuses control characters). */
function clip(raw: string): string {
  const reason = replaceControlCharacters(raw);
  return reason.length > REASON_MAX_LENGTH ? `${reason.slice(0, REASON_MAX_LENGTH - 1)}…` : reason;
}

export interface CommandExecutorOptions {
  store: AgentStore;
  hal: Hal;
  controlLoop: ControlLoop;
  runner: SerialRunner;
  clock: Clock;
  logger: Logger;
  connectors: () => readonly ConnectorInfo[];
  /** Platform time minus agent time, ms (from the heartbeat); expiry is judged in platform time. */
  skewMs?: () => number;
  /** Told whenever a report was queued (the uplink wakes up). */
  onReport?: () => void;
  /** Takes `update` commands (updates/update-runner.ts); absent: every update is rejected. */
  updates?: () => UpdateTaker | undefined;
  /** Takes the remote-maintenance commands (maintenance.ts); absent: they are rejected. */
  maintenance?: () => Maintenance | undefined;
}

/** The part of the update runner the executor hands `update` commands to. */
export interface UpdateTaker {
  take(commandId: string, params: CommandParamsOf<'update'>, accepted: boolean): void;
}

export interface CommandExecutor extends CommandReceiver {
  /** Finishes commands a crash interrupted. */
  resumeUnfinished(): void;
  /** Resolves when every queued command has finished. */
  idle(): Promise<void>;
}

type Report = CommandReport;

export function createCommandExecutor(options: CommandExecutorOptions): CommandExecutor {
  const { store, hal, controlLoop, runner, clock, logger } = options;
  const skew = options.skewMs ?? (() => 0);

  function report(entry: JournalEntry, reports: Report[], also?: () => void): void {
    store.recordCommandStatus(
      entry.commandId,
      reports.map((r) => (r.reason !== undefined ? { ...r, reason: clip(r.reason) } : r)),
      iso(clock.now()),
      also,
    );
    const last = reports[reports.length - 1]!;
    logger.info(
      { command_id: entry.commandId, command: entry.command, status: last.status, reason: last.reason },
      'command',
    );
    options.onReport?.();
  }

  async function readingOf(connectorId: number): Promise<ConnectorReading | undefined> {
    try {
      return await hal.readConnector(connectorId);
    } catch {
      return undefined;
    }
  }

  /** Refusals that depend on the hardware's state right now (checked before accepting). */
  async function hardwareRefusal(command: ParsedCommand): Promise<string | undefined> {
    if (isMaintenanceCommand(command)) {
      const maintenance = options.maintenance?.();
      return maintenance ? maintenance.refusal(command) : 'this agent takes no maintenance commands';
    }
    if (command.name !== 'start' && command.name !== 'discharge') return undefined;
    return (
      outOfServiceRefusal(store, command.params.connector_id) ??
      hardwareRefusalOf(command, await readingOf(command.params.connector_id))
    );
  }

  /** Stores the command's override, runs a control pass and reports the connector's outcome. */
  async function applyOverride(
    entry: JournalEntry,
    command: HardwareCommand,
    acceptedAt: string,
  ): Promise<void> {
    const { connectorId, override, wanted } = overrideOf(command, entry.commandId, acceptedAt);
    store.setOverride(connectorId, override);
    const outcome = (await controlLoop.applyNow()).get(connectorId);
    const verdict = overrideVerdict(outcome, connectorId, wanted);
    report(
      entry,
      [verdict.report],
      verdict.dropOverride ? () => store.setOverride(connectorId, undefined) : undefined,
    );
    if (verdict.retrigger) controlLoop.trigger('command failed');
  }

  async function execute(entry: JournalEntry, command: ParsedCommand, accepted: boolean): Promise<void> {
    const acceptedAt = accepted ? entry.updatedAt : iso(clock.now());
    const accept: Report[] = accepted ? [] : [{ status: 'accepted' }];
    switch (command.name) {
      case 'set_schedule': {
        const { connector_id, schedule } = command.params;
        report(
          entry,
          [...accept, { status: 'succeeded', reason: `schedule ${schedule.schedule_id} stored` }],
          () => store.upsertSchedule(connector_id, { ...schedule, received_at: acceptedAt }, entry.commandId),
        );
        await controlLoop.applyNow();
        return;
      }
      case 'delete_schedule': {
        const { connector_id, schedule_id } = command.params;
        let existed = false;
        report(entry, [...accept, { status: 'succeeded' }], () => {
          existed = store.deleteSchedule(connector_id, schedule_id);
        });
        if (!existed) logger.info({ schedule_id }, 'deleted schedule was not stored');
        await controlLoop.applyNow();
        return;
      }
      case 'set_power_limit':
      case 'pause_charging': {
        const p = command.params;
        const lifted = Date.parse(p.ends_at) <= clock.now() + skew();
        const reason = lifted
          ? `control ${p.control_id} lifted`
          : `control ${p.control_id} in force until ${p.ends_at}`;
        report(entry, [...accept, { status: 'succeeded', reason }], () => {
          store.upsertLimit(limitOf(command, entry.commandId, acceptedAt));
        });
        await controlLoop.applyNow();
        return;
      }
      case 'stop':
      case 'start':
      case 'discharge': {
        if (!accepted) report(entry, accept);
        await applyOverride(entry, command, acceptedAt);
        return;
      }
      case 'reset':
      case 'set_availability':
      case 'unlock_connector':
      case 'set_configuration':
      case 'upload_diagnostics': {
        const maintenance = options.maintenance?.();
        if (maintenance)
          await maintenance.execute(entry, command, accepted, (reports, also) =>
            report(entry, reports, also),
          );
        else report(entry, [{ status: 'failed', reason: 'this agent takes no maintenance commands' }]);
        return;
      }
      case 'update': {
        // The runner accepts (or refuses) and carries the update on beside the serial runner.
        const updates = options.updates?.();
        if (updates) updates.take(entry.commandId, command.params, accepted);
        else
          report(entry, [
            { status: accepted ? 'failed' : 'rejected', reason: 'this agent takes no updates' },
          ]);
        return;
      }
    }
  }

  async function handle(commandId: string): Promise<void> {
    const entry = store.journalGet(commandId);
    if (!entry || (entry.status !== 'received' && entry.status !== 'accepted')) return;
    const check = checkCommand(entry, { now: clock.now() + skew(), connectors: options.connectors() });
    if (entry.status === 'accepted') {
      // Accepted before a restart: finish it even if it has expired since (it was accepted in time).
      const parsed = check.ok ? check : parsedOf(entry.command as CommandName, entry.params);
      if (!parsed.ok) {
        report(entry, [{ status: 'failed', reason: parsed.reason }]);
        return;
      }
      await execute(entry, parsed.command, true);
      return;
    }
    if (!check.ok) {
      report(entry, [{ status: 'rejected', reason: check.reason }]);
      return;
    }
    const refusal = await hardwareRefusal(check.command);
    if (refusal) {
      report(entry, [{ status: 'rejected', reason: refusal }]);
      return;
    }
    await execute(entry, check.command, false);
  }

  function enqueue(commandId: string): void {
    runner
      .run(() => handle(commandId))
      .catch((error: unknown) => {
        // The entry stays unfinished in the journal and is retried at the next start.
        logger.error({ command_id: commandId, err: (error as Error).message }, 'command execution failed');
      });
  }

  return {
    receive(commands) {
      let fresh = 0;
      let repeats = 0;
      const at = iso(clock.now());
      for (const c of commands) {
        const isNew = store.journalInsert(
          { commandId: c.command_id, command: c.command, params: c.params, expiry: c.expiry },
          at,
        );
        if (!isNew) {
          repeats += 1;
          continue;
        }
        fresh += 1;
        logger.info({ command_id: c.command_id, command: c.command }, 'command received');
        enqueue(c.command_id);
      }
      return { fresh, repeats };
    },
    resumeUnfinished() {
      for (const entry of store.journalUnfinished()) {
        logger.info({ command_id: entry.commandId, status: entry.status }, 'resuming command after restart');
        enqueue(entry.commandId);
      }
    },
    idle: () => runner.idle(),
  };
}
