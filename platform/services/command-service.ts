import type { DeviceCommandsQuery } from '../../shared/index.js';
import { availabilityAfter } from '../domain/maintenance.js';
import type {
  BatchCommand,
  CommandRow,
  CommandWithHistory,
  ControlRow,
  NewCommand,
  NewDiagnostics,
  Page,
  ScheduleRow,
  StatusReport,
  StatusReportOutcome,
  Store,
} from '../storage/store.js';
import type { CommandNotifier } from './command-notifier.js';
import type { PlatformEvents } from './platform-events.js';

/**
 * Commands (DESIGN.md §5, §12): every change of a command goes through here, and this is the one place that
 * wakes chargers' long polls and publishes `command_status` events, after storage has committed the change.
 * Routes and sweeps call it; they never notify or publish themselves, so no path can forget to.
 */
export interface CommandServiceDeps {
  store: Store;
  notifier: CommandNotifier;
  events: PlatformEvents;
  /** Told of each control the sweep completed (webhooks). */
  controlChanged?: (control: ControlRow, atMs: number) => void;
  /**
   * Told of each command a change moved, and of a command a charger's report repeats (its first telling may have
   * been lost), after storage committed; awaited, so that what it does is done before the change is answered
   * (diagnostics fail with their `upload_diagnostics` command).
   */
  commandChanged?: (command: CommandRow, atMs: number) => Promise<void>;
}

export function createCommandService(deps: CommandServiceDeps) {
  const { store, notifier } = deps;
  /** New commands: their chargers are woken, and each is streamed as `queued`. */
  const queued = (rows: readonly CommandRow[]) => {
    const { events } = deps;
    for (const c of rows) {
      notifier.notify(c.device_id);
      events.commandStatus(c, c.created_ms);
    }
  };
  const told = async (rows: readonly CommandRow[], atMs: number) => {
    if (deps.commandChanged) for (const c of rows) await deps.commandChanged(c, atMs);
  };
  const changed = async (rows: readonly CommandRow[], atMs: number) => {
    const { events } = deps;
    for (const c of rows) events.commandStatus(c, atMs);
    await told(rows, atMs);
  };

  return {
    async queue(commands: readonly NewCommand[], nowMs: number): Promise<CommandRow[]> {
      const rows = await store.enqueueCommands(commands, nowMs);
      queued(rows);
      return rows;
    },
    /** Stores a diagnostics request and queues its `upload_diagnostics` command, in one transaction. */
    async requestDiagnostics(row: NewDiagnostics, command: NewCommand): Promise<CommandRow> {
      const cmd = await store.createDiagnostics(row, command);
      queued([cmd]);
      return cmd;
    },
    async saveSchedule(row: ScheduleRow, command: NewCommand): Promise<CommandRow> {
      const cmd = await store.saveSchedule(row, command);
      queued([cmd]);
      return cmd;
    },
    async deleteSchedule(
      deviceId: string,
      connectorId: number,
      scheduleId: string,
      command: NewCommand,
      nowMs: number,
    ): Promise<CommandRow | undefined> {
      const cmd = await store.deleteSchedule(deviceId, connectorId, scheduleId, command, nowMs);
      if (cmd) queued([cmd]);
      return cmd;
    },
    async createControl(control: ControlRow, commands: readonly NewCommand[]): Promise<CommandRow[]> {
      const rows = await store.createControl(control, commands);
      queued(rows);
      return rows;
    },
    async cancel(commandId: string, nowMs: number): Promise<CommandRow | 'not_found' | 'conflict'> {
      const outcome = await store.cancelCommand(commandId, nowMs);
      if (typeof outcome !== 'string') await changed([outcome], nowMs);
      return outcome;
    },
    /** Cancels a control's queued commands and queues `reversals` for the chargers that already had it. */
    async cancelControl(controlId: string, reversals: readonly NewCommand[], nowMs: number): Promise<void> {
      const { cancelled, queued: reversed } = await store.cancelControl(controlId, reversals, nowMs);
      await changed(cancelled, nowMs);
      queued(reversed);
    },
    /** Starts an update's batch: its `update` commands queued and its chargers moved, in one transaction. */
    async startUpdateBatch(
      updateId: string,
      batch: number,
      commands: readonly BatchCommand[],
      nowMs: number,
    ): Promise<CommandRow[] | undefined> {
      const rows = await store.startUpdateBatch(updateId, batch, commands, nowMs);
      if (rows) queued(rows);
      return rows;
    },
    /** Cancels an update and its still-queued commands; undefined when it was not running or paused. */
    async cancelUpdate(updateId: string, nowMs: number): Promise<boolean> {
      const outcome = await store.cancelUpdate(updateId, nowMs);
      if (outcome) await changed(outcome.cancelled, nowMs);
      return outcome !== undefined;
    },
    /**
     * A charger's report: it moves the command forward (keeping its `result`), and a `set_availability` that
     * succeeded sets its connector's availability in the same step (domain/maintenance.ts). A report that moved
     * nothing is told to `commandChanged` too: a charger repeats a report whose answer it lost, maybe because
     * the first telling failed.
     */
    async reportStatus(
      deviceId: string,
      commandId: string,
      report: StatusReport,
      nowMs: number,
    ): Promise<StatusReportOutcome> {
      const result = await store.reportCommandStatus(deviceId, commandId, report, nowMs, availabilityAfter);
      if (result.outcome === 'ok' && result.changed) await changed([result.command], nowMs);
      else if (result.outcome === 'ok') await told([result.command], nowMs);
      return result;
    },
    /** A charger's pending commands; those it gets for the first time are streamed as `delivered`. */
    takePending(deviceId: string, nowMs: number) {
      const { events } = deps;
      return store.takePendingCommands(deviceId, nowMs, (c) => events.commandStatus(c, c.updated_ms));
    },
    /**
     * A page of a device's commands, whoever queued them (flexibility controls included), newest first, each
     * with its history. A read: nothing to wake or publish. The caller has checked the device is visible.
     */
    listOfDevice(deviceId: string, query: DeviceCommandsQuery): Promise<Page<CommandWithHistory>> {
      return store.listDeviceCommands(deviceId, query);
    },
    /** The sweep: commands past their expiry, and controls whose window has ended. */
    async sweep(nowMs: number): Promise<void> {
      await changed(await store.expireCommands(nowMs), nowMs);
      const completed = await store.completeControls(nowMs);
      for (const c of completed) deps.controlChanged?.(c, nowMs);
    },
  };
}
export type CommandService = ReturnType<typeof createCommandService>;
