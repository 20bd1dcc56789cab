/**
 * Remote maintenance (DESIGN.md §20): the commands `reset`, `set_availability`, `unlock_connector` and
 * `set_configuration`, as the command executor hands them over once checked.
 *
 * - `set_availability` is stored (core/availability.ts) and the control loop keeps the connector idle; a
 *   connector with energy flowing goes out of service when its vehicle leaves.
 * - `set_configuration` is stored and applied live (live-configuration.ts); the whole configuration is reported
 *   as an event in the same transaction as the command's `succeeded`, and as the command's `result`.
 * - `unlock_connector` calls the HAL's `unlockConnector`, only while no energy flows.
 * - `upload_diagnostics` builds the diagnostics archive and uploads it, beside the runner (diagnostics-job.ts).
 * - `reset` reports `succeeded` first, then restarts the agent (`restart`: stop, then exit with the launcher's
 *   restart code), or, for the charger, drains the outbox for a few seconds and calls the HAL's `reboot()`. A
 *   `when_idle` reset waits, off the serial runner, until no connector charges or discharges: the hardware's
 *   events and every command report look again.
 */
import type { Logger } from 'pino';
import type { CommandParamsOf } from '../../shared/commands.js';
import { type Clock, iso } from '../clock.js';
import { availabilityAfter, availabilityRefusal, availabilityReport } from '../core/availability.js';
import type { ParsedCommand } from '../core/command-checks.js';
import { newEventId } from '../core/device-events.js';
import type { CommandReport } from '../core/outbox-payloads.js';
import { configurationEvent, describeChange } from '../core/remote-configuration.js';
import type { ConnectorReading, Hal } from '../hal.js';
import type { AgentStore, JournalEntry } from '../store/agent-store.js';
import type { ControlLoop } from './control-loop.js';
import type { DiagnosticsJobs } from './diagnostics-job.js';
import type { ConfigurationTargets, LiveConfiguration } from './live-configuration.js';
import type { SerialRunner } from './serial-runner.js';

export type MaintenanceCommand = Extract<
  ParsedCommand,
  { name: 'reset' | 'set_availability' | 'unlock_connector' | 'set_configuration' | 'upload_diagnostics' }
>;
const MAINTENANCE_COMMANDS: ReadonlySet<string> = new Set([
  'reset',
  'set_availability',
  'unlock_connector',
  'set_configuration',
  'upload_diagnostics',
]);
export const isMaintenanceCommand = (command: ParsedCommand): command is MaintenanceCommand =>
  MAINTENANCE_COMMANDS.has(command.name);

/** Queues the command's reports (and `also`'s writes) in one transaction. */
export type Reporter = (reports: CommandReport[], also?: () => void) => void;

export interface MaintenanceOptions {
  store: AgentStore;
  hal: Hal;
  clock: Clock;
  logger: Logger;
  controlLoop: ControlLoop;
  runner: SerialRunner;
  configuration: LiveConfiguration;
  /** What a configuration change acts on (bound once the heartbeat loop exists). */
  configurationTargets: () => ConfigurationTargets | undefined;
  /** Stops the agent and exits with the restart code; absent: resets are refused. */
  restart?: () => void;
  /** Sends what the outbox holds, for at most `ms` (before a reboot cuts the network). */
  drain: (ms: number) => Promise<unknown>;
  /** Builds and uploads diagnostics archives (diagnostics-job.ts); absent: requests are refused. */
  diagnostics?: DiagnosticsJobs;
}

export interface Maintenance {
  /** Why the charger cannot take this command now (checked before accepting), or undefined. */
  refusal(command: MaintenanceCommand): Promise<string | undefined>;
  execute(
    entry: JournalEntry,
    command: MaintenanceCommand,
    accepted: boolean,
    report: Reporter,
  ): Promise<void>;
  /** Looks again whether a waiting `when_idle` reset may go (a connector's state may have changed). */
  recheck(): void;
}

/** How long a charger reset waits for the outbox to drain before it reboots. */
const DRAIN_BEFORE_REBOOT_MS = 5_000;

const flowing = (r: ConnectorReading | undefined) => r?.state === 'charging' || r?.state === 'discharging';

export function createMaintenance(options: MaintenanceOptions): Maintenance {
  const { store, hal, clock, logger, controlLoop, runner, configuration } = options;
  /** Accepted `when_idle` resets by command id, each with how to report it. */
  const waiting = new Map<string, { params: CommandParamsOf<'reset'>; report: Reporter }>();
  let resetting = false;
  let checking = false;

  async function readingOf(connectorId: number): Promise<ConnectorReading | undefined> {
    try {
      return await hal.readConnector(connectorId);
    } catch {
      return undefined;
    }
  }

  /** Reports every waiting reset (and `report`'s) succeeded, then restarts or reboots once. */
  async function reset(params: CommandParamsOf<'reset'>, report: Reporter): Promise<void> {
    resetting = true;
    const rebootCharger =
      params.target === 'charger' || [...waiting.values()].some((w) => w.params.target === 'charger');
    const reason = rebootCharger ? 'rebooting the charger' : 'restarting the agent';
    store.transaction(() => {
      report([{ status: 'succeeded', reason }]);
      for (const w of waiting.values()) w.report([{ status: 'succeeded', reason }]);
    });
    waiting.clear();
    logger.warn({ target: rebootCharger ? 'charger' : 'agent' }, `reset: ${reason}`);
    if (rebootCharger && hal.reboot) {
      await options.drain(DRAIN_BEFORE_REBOOT_MS).catch(() => undefined);
      try {
        await hal.reboot();
      } catch (error) {
        // Reported already: the agent restarts at least, and says why the charger did not.
        const message = (error as Error).message;
        store.setState('last_error', { at: iso(clock.now()), where: 'reboot', message });
        logger.error({ err: message }, 'the HAL could not reboot the charger; restarting the agent only');
      }
    }
    options.restart?.();
  }

  async function idleNow(): Promise<boolean> {
    try {
      return !(await hal.readConnectors()).some(flowing);
    } catch {
      return false; // unreadable hardware is not known to be idle
    }
  }

  async function setAvailability(
    entry: JournalEntry,
    params: CommandParamsOf<'set_availability'>,
    accept: CommandReport[],
    report: Reporter,
  ): Promise<void> {
    const { connector_id, available } = params;
    const reading = await readingOf(connector_id);
    // On the serial runner: nothing else writes the availability between this read and the report's write.
    const next = availabilityAfter(
      store.getState('availability') ?? {},
      { connectorId: connector_id, available, commandId: entry.commandId, at: iso(clock.now()) },
      reading,
    );
    const held = next[String(connector_id)];
    const succeeded: CommandReport = {
      status: 'succeeded',
      reason: availabilityReport(connector_id, available, held),
      result: {
        connector_id,
        available,
        ...(held?.afterVehicleLeaves ? { effective: 'when_vehicle_leaves' } : {}),
      },
    };
    report([...accept, succeeded], () => store.setState('availability', next));
    await controlLoop.applyNow();
  }

  async function setConfiguration(
    params: CommandParamsOf<'set_configuration'>,
    accept: CommandReport[],
    report: Reporter,
  ): Promise<void> {
    const before = configuration.values();
    const after = configuration.preview(params.values);
    const moved = describeChange(before, after);
    const succeeded: CommandReport = {
      status: 'succeeded',
      reason: moved.length > 0 ? moved.join(', ') : 'no value changed',
      result: { values: { ...after } },
    };
    report([...accept, succeeded], () => {
      configuration.store(params.values);
      const now = clock.now();
      store.enqueueEvents([configurationEvent(after, now, newEventId(now))]);
    });
    const targets = options.configurationTargets();
    if (targets) configuration.apply(targets);
  }

  return {
    async refusal(command) {
      switch (command.name) {
        case 'reset':
          if (!options.restart) return 'this agent was started without a way to restart itself';
          if (command.params.target === 'charger' && !hal.reboot)
            return "this charger's HAL cannot reboot it (no reboot()): reset the agent instead";
          if (resetting) return 'a reset is already under way';
          return undefined;
        case 'unlock_connector': {
          const id = command.params.connector_id;
          if (!hal.unlockConnector)
            return "this charger's HAL cannot unlock connectors (no unlockConnector())";
          const reading = await readingOf(id);
          if (!reading) return `connector ${id} cannot be read`;
          if (flowing(reading)) return `connector ${id} is ${reading.state}: stop it before unlocking`;
          return undefined;
        }
        case 'upload_diagnostics':
          return options.diagnostics ? undefined : 'this agent cannot upload diagnostics';
        case 'set_availability':
        case 'set_configuration':
          return undefined;
      }
    },

    async execute(entry, command, accepted, report) {
      const accept: CommandReport[] = accepted ? [] : [{ status: 'accepted' }];
      switch (command.name) {
        case 'set_availability':
          return setAvailability(entry, command.params, accept, report);
        case 'set_configuration':
          return setConfiguration(command.params, accept, report);
        case 'unlock_connector': {
          if (accept.length > 0) report(accept);
          const id = command.params.connector_id;
          try {
            await hal.unlockConnector!(id);
            report([{ status: 'succeeded', reason: `cable lock of connector ${id} released` }]);
          } catch (error) {
            report([{ status: 'failed', reason: `unlock refused: ${(error as Error).message}` }]);
          }
          return;
        }
        case 'upload_diagnostics': {
          if (accept.length > 0) report(accept);
          options.diagnostics?.start(command.params, report);
          return;
        }
        case 'reset': {
          if (accept.length > 0) report(accept);
          if (command.params.mode === 'immediate' || (await idleNow())) return reset(command.params, report);
          waiting.set(entry.commandId, { params: command.params, report });
          logger.info(
            { command_id: entry.commandId },
            'reset waits until no connector charges or discharges',
          );
          return;
        }
      }
    },

    recheck() {
      if (waiting.size === 0 || resetting || checking) return;
      checking = true;
      idleNow()
        .then((idle) => {
          if (!idle || waiting.size === 0 || resetting) return;
          // The first to have waited goes; reset() reports the others with it.
          const [id, first] = waiting.entries().next().value!;
          waiting.delete(id);
          return runner.run(() => reset(first.params, first.report));
        })
        .catch((error: unknown) => logger.error({ err: (error as Error).message }, 'reset check failed'))
        .finally(() => {
          checking = false;
        });
    },
  };
}

/** Why a start or discharge is refused on a connector the operator took out of service. */
export function outOfServiceRefusal(store: AgentStore, connectorId: number): string | undefined {
  return availabilityRefusal(connectorId, store.getState('availability')?.[String(connectorId)]);
}
