import type { ArtifactKind, CommandStatus, UpdateDeviceState, UpdateStatus } from '../../shared/index.js';
import type { RolloutSettings } from '../domain/update-rollout.js';
import type { CommandRow, NewCommand } from './command-types.js';
import type { Page } from './page.js';

/**
 * Updates (campaigns, DESIGN.md §19): an artifact rolled out to an operator's chargers in batches. The update
 * and each of its chargers are rows; the update gate (services/update-gate.ts) moves them along from what
 * `observeUpdate` reads, every change a compare-and-set, so that a gate run by two instances at once, or cut
 * short by a crash, leaves a consistent state for the next run.
 */
export interface UpdateRow {
  update_id: string;
  operator_id: string;
  client_id: string | null;
  artifact_id: string;
  /** The artifact's kind and version, kept here: the update still reads after the artifact is deleted. */
  artifact_kind: ArtifactKind;
  artifact_version: string;
  target_type: 'device' | 'site' | 'operator' | 'all';
  target_ids: string[];
  install: 'when_idle' | 'immediate';
  window: { start: string; end: string } | null;
  rollout: RolloutSettings;
  status: UpdateStatus;
  reason: string | null;
  /** The batch under way (from 1); 0 before the first starts. */
  current_batch: number;
  /** A batch the operator resumed past despite its failures; 0 for none. */
  waived_batch: number;
  created_ms: number;
  updated_ms: number;
}

export interface UpdateDeviceRow {
  update_id: string;
  device_id: string;
  /** From 1; 0 for a charger skipped at the start (it was on the version already). */
  batch: number;
  state: UpdateDeviceState;
  command_id: string | null;
  version_before: string | null;
  version_after: string | null;
  reason: string | null;
  /** When it entered `state`. */
  state_ms: number;
  updated_ms: number;
}

/** A watched charger's command, latest report about the update, liveness and health signs. */
export interface UpdateDeviceObservation {
  device_id: string;
  command_status: CommandStatus | null;
  command_reason: string | null;
  report_status: string | null;
  report_version: string | null;
  report_message: string | null;
  last_seen_ms: number | null;
  last_heartbeat_ms: number | null;
  reported_status: string | null;
  /** Error or critical events received since the charger entered its state. */
  bad_events: number;
}

/** One charger's move, applied only if it is still in `from` (compare-and-set). */
export interface UpdateDeviceChange {
  device_id: string;
  from: UpdateDeviceState;
  state: UpdateDeviceState;
  reason: string | null;
  version_after?: string | null | undefined;
}

/** A queued `update` command and the charger it is for. */
export interface BatchCommand {
  device_id: string;
  command: NewCommand;
}

/** A charger an update may reach: where it is, what it is, what it runs. */
export interface UpdateCandidate {
  device_id: string;
  site_id: string;
  /** Its site's IANA timezone: an install window is in the site's local time. */
  timezone: string;
  model: string | null;
  firmware_version: string | null;
  agent_version: string | null;
}

export interface UpdateRepository {
  /**
   * The operator's registered chargers among the target, by device id: all of them, those of the sites or of
   * the operator named, or the devices named (those of another operator are left out, like missing ones).
   */
  updateCandidates(
    operatorId: string,
    target: { type: 'device' | 'site' | 'operator' | 'all'; ids: readonly string[] },
  ): Promise<UpdateCandidate[]>;
  /** Stores the update and its chargers (batch 0 = skipped); no command is queued yet. */
  createUpdate(update: UpdateRow, devices: readonly UpdateDeviceRow[]): Promise<void>;
  getUpdate(updateId: string): Promise<UpdateRow | undefined>;
  listUpdateDevices(updateId: string): Promise<UpdateDeviceRow[]>;
  /** The operators' updates, newest first, with their chargers' states counted. */
  listUpdates(
    operatorIds: readonly string[],
    query: { status?: UpdateStatus | undefined; page: number; size: number },
  ): Promise<Page<UpdateRow & { progress: Record<string, number>; device_count: number }>>;
  /** Updates the gate moves along: running and paused ones, and cancelled ones with chargers still at work. */
  updatesInProgress(): Promise<UpdateRow[]>;
  /**
   * Starts batch `batch` of a running update whose current batch is `batch - 1`: queues the commands and moves
   * those chargers from `pending` to `queued`, atomically. Undefined (nothing done) when the update moved on.
   */
  startUpdateBatch(
    updateId: string,
    batch: number,
    commands: readonly BatchCommand[],
    nowMs: number,
  ): Promise<CommandRow[] | undefined>;
  /** Applies the chargers' moves (each only if still in its `from` state); answers those applied. */
  applyUpdateDeviceChanges(
    updateId: string,
    changes: readonly UpdateDeviceChange[],
    nowMs: number,
  ): Promise<UpdateDeviceChange[]>;
  /** Sets the status if it is one of `from`; false when it was not. */
  setUpdateStatus(
    updateId: string,
    from: readonly UpdateStatus[],
    to: { status: UpdateStatus; reason: string | null; waived_batch?: number },
    nowMs: number,
  ): Promise<boolean>;
  /**
   * Cancels a running or paused update: its queued commands cancelled, its pending and queued chargers
   * `cancelled`; chargers already working on it finish and report. Undefined when it was neither.
   */
  cancelUpdate(updateId: string, nowMs: number): Promise<{ cancelled: CommandRow[] } | undefined>;
  /** What the gate needs of the update's chargers in `states`. */
  observeUpdate(updateId: string, states: readonly UpdateDeviceState[]): Promise<UpdateDeviceObservation[]>;
  /** Of these chargers, those not done with an update (whatever its status), with that update. */
  devicesInOpenUpdates(
    deviceIds: readonly string[],
  ): Promise<Array<{ device_id: string; update_id: string }>>;
  /** Whether the charger was sent an update of this artifact (it may download it). */
  deviceHasUpdateFor(deviceId: string, artifactId: string): Promise<boolean>;
  /** Whether a running or paused update uses the artifact (it may not be deleted). */
  artifactInUse(artifactId: string): Promise<boolean>;
}
