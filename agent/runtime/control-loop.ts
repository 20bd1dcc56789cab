/**
 * Keeps every connector doing what its stored schedules, limits and command overrides say (DESIGN.md §6).
 *
 * A pass reads the store and the hardware, asks the pure policy (`core/connector-policy.ts`, on top of the
 * schedule engine) what each connector should do at this instant, and makes the HAL calls that get it there.
 * Passes run on every change (a command, a HAL event, a new SOC) and at the earliest `nextChangeAt` — and at
 * least every `safetyIntervalMs`, so a wall-clock jump (NTP fixing a wrong clock) is caught within that time.
 * Timers only trigger passes: they carry no state, so a reboot, a clock jump or a missed timer cannot leave a
 * connector in the wrong state; the next pass computes it afresh. Nothing here needs the platform.
 *
 * Passes run on the agent's single exclusive runner, so a pass and a command never interleave their HAL calls.
 *
 * node-cron (named in DESIGN.md for timezone-aware triggers) is not used: the schedule engine already computes
 * the exact next instant at which its answer changes, DST included, and one timer to that instant is simpler
 * and more precise than cron expressions rebuilt from every schedule.
 */
import type { Logger } from 'pino';
import type { Clock, TimerHandle } from '../clock.js';
import { type Availability, availabilityAfterVehicleLeft } from '../core/availability.js';
import {
  type AppliedState,
  type ConnectorTarget,
  decideConnector,
  type HalAction,
  overrideExpired,
  planActions,
  sameTarget,
} from '../core/connector-policy.js';
import type { StoredSchedule } from '../core/schedule-engine.js';
import type { ConnectorInfo, ConnectorReading, Hal } from '../hal.js';
import type { AgentStore } from '../store/agent-store.js';
import type { SerialRunner } from './serial-runner.js';

export const DEFAULT_SAFETY_INTERVAL_MS = 60_000;

export interface ConnectorOutcome {
  target: ConnectorTarget;
  reading?: ConnectorReading;
  actions: HalAction[];
  /** The first HAL call the hardware refused in this pass. */
  error?: Error;
}

export interface ControlLoopOptions {
  store: AgentStore;
  hal: Hal;
  runner: SerialRunner;
  clock: Clock;
  logger: Logger;
  connectors: () => readonly ConnectorInfo[];
  safetyIntervalMs?: number;
  /** Told whenever a connector's target changes (the sampler records it for the technician). */
  onTargetChange?: (connectorId: number, target: ConnectorTarget) => void;
}

export interface ControlLoop {
  /** One pass over every connector. Call only from inside the runner (commands do); otherwise `trigger`. */
  applyNow(): Promise<Map<number, ConnectorOutcome>>;
  /** Asks for a pass on the runner; several triggers before it starts share one pass. */
  trigger(why: string): void;
  /**
   * The hardware reported the vehicle gone: the connector's command override (stop, start, discharge) belonged
   * to that vehicle and ends, even if the next vehicle is already plugged in by the time the pass runs.
   */
  vehicleLeft(connectorId: number): void;
  /** Fresh readings (from the sampler): a pass is triggered when something the policy depends on moved. */
  observe(readings: readonly ConnectorReading[]): void;
  targets(): ReadonlyMap<number, ConnectorTarget>;
  start(): void;
  stop(): void;
}

async function perform(hal: Hal, connectorId: number, action: HalAction): Promise<void> {
  switch (action.type) {
    case 'setPowerLimit':
      return hal.setPowerLimit(connectorId, action.kw);
    case 'startCharging':
      return hal.startCharging(connectorId);
    case 'stopCharging':
      return hal.stopCharging(connectorId);
    case 'startDischarging':
      return hal.startDischarging(connectorId, action.kw);
  }
}

export function createControlLoop(options: ControlLoopOptions): ControlLoop {
  const { store, hal, runner, clock, logger } = options;
  const safetyIntervalMs = options.safetyIntervalMs ?? DEFAULT_SAFETY_INTERVAL_MS;
  const applied = new Map<number, AppliedState>();
  const targets = new Map<number, ConnectorTarget>();
  const seen = new Map<number, ConnectorReading>();
  let timer: TimerHandle | undefined;
  let queued = false;
  let running = false;
  let readFailureLogged = false;

  /** A connector waiting for its vehicle to leave before going out of service: it has left. */
  function settleOutOfService(availability: Availability, connectorId: number): Availability {
    const next = availabilityAfterVehicleLeft(availability, connectorId);
    if (!next) return availability;
    store.setState('availability', next);
    logger.info({ connector_id: connectorId }, 'vehicle left: connector now out of service');
    return next;
  }

  function schedule(now: number): void {
    if (timer !== undefined) clock.clearTimeout(timer);
    timer = undefined;
    if (!running) return;
    let next = now + safetyIntervalMs;
    for (const t of targets.values())
      if (t.nextChangeAt !== undefined && t.nextChangeAt < next) next = t.nextChangeAt;
    timer = clock.setTimeout(
      () => {
        timer = undefined;
        trigger('timer');
      },
      Math.max(0, next - now),
    );
  }

  async function readAll(): Promise<Map<number, ConnectorReading>> {
    const readings = new Map<number, ConnectorReading>();
    try {
      for (const r of await hal.readConnectors()) readings.set(r.connectorId, r);
      readFailureLogged = false;
    } catch (error) {
      // Without readings the loop still sets the power caps; starts and stops wait for the hardware.
      if (!readFailureLogged) logger.warn({ err: (error as Error).message }, 'reading the hardware failed');
      readFailureLogged = true;
    }
    return readings;
  }

  async function applyNow(): Promise<Map<number, ConnectorOutcome>> {
    const now = clock.now();
    const schedulesByConnector = new Map<number, StoredSchedule[]>();
    for (const { connectorId, schedule } of store.listSchedules()) {
      const list = schedulesByConnector.get(connectorId) ?? [];
      list.push(schedule);
      schedulesByConnector.set(connectorId, list);
    }
    const limits = store.listLimits();
    const overrides = store.listOverrides();
    const readings = await readAll();
    const outcomes = new Map<number, ConnectorOutcome>();
    let availability = store.getState('availability') ?? {};

    for (const connector of options.connectors()) {
      const id = connector.connectorId;
      const reading = readings.get(id);
      let override = overrides.get(id);
      if (override && ((reading && !reading.vehiclePresent) || overrideExpired(override, now))) {
        // A command's hold lasts while its vehicle is there (or until its window ends).
        store.setOverride(id, undefined);
        logger.info(
          { connector_id: id, command_id: override.commandId, kind: override.kind },
          'command override ended',
        );
        override = undefined;
      }
      if (reading && !reading.vehiclePresent) availability = settleOutOfService(availability, id);
      const outOfService = availability[String(id)];
      const target = decideConnector({
        connector,
        schedules: schedulesByConnector.get(id) ?? [],
        limits,
        ...(override ? { override } : {}),
        ...(outOfService ? { outOfService } : {}),
        ...(reading ? { reading } : {}),
        now,
      });
      const state = applied.get(id) ?? {};
      const actions = planActions(target, reading, state);
      const outcome: ConnectorOutcome = { target, actions, ...(reading ? { reading } : {}) };
      for (const action of actions) {
        try {
          await perform(hal, id, action);
          if (action.type === 'setPowerLimit') state.powerLimitKw = action.kw;
          if (action.type === 'startDischarging') state.dischargeKw = action.kw;
          if (action.type === 'stopCharging' || action.type === 'startCharging')
            state.dischargeKw = undefined;
        } catch (error) {
          // Retried on the next pass; a command waiting on this pass reports the hardware's reason.
          if (action.type === 'setPowerLimit') state.powerLimitKw = undefined;
          outcome.error ??= error as Error;
          logger.warn(
            { connector_id: id, action: action.type, err: (error as Error).message },
            'hardware refused',
          );
        }
      }
      applied.set(id, state);
      if (!sameTarget(targets.get(id), target)) {
        logger.info(
          { connector_id: id, mode: target.mode, max_power_kw: target.powerLimitKw, reason: target.reason },
          'connector target',
        );
        options.onTargetChange?.(id, target);
      }
      targets.set(id, target);
      if (reading) seen.set(id, reading);
      outcomes.set(id, outcome);
    }
    schedule(clock.now());
    return outcomes;
  }

  function trigger(why: string): void {
    if (!running || queued) return;
    queued = true;
    runner
      .run(async () => {
        queued = false;
        if (running) await applyNow();
      })
      .catch((error: unknown) => {
        logger.error({ err: (error as Error).message, why }, 'control pass failed');
      });
  }

  return {
    applyNow,
    trigger,
    observe(readings) {
      for (const r of readings) {
        const before = seen.get(r.connectorId);
        if (
          !before ||
          before.soc !== r.soc ||
          before.vehiclePresent !== r.vehiclePresent ||
          before.state !== r.state ||
          before.faultCode !== r.faultCode
        ) {
          trigger('reading');
          return;
        }
      }
    },
    targets: () => targets,
    vehicleLeft(connectorId) {
      // Queued now, in event order: a command queued before the unplug ran first and its hold ends here; one
      // that arrives later (for the next vehicle) runs after and keeps its hold.
      runner
        .run(async () => {
          const override = store.listOverrides().get(connectorId);
          if (override) {
            store.setOverride(connectorId, undefined);
            logger.info(
              { connector_id: connectorId, command_id: override.commandId, kind: override.kind },
              'vehicle left: command override ended',
            );
          }
          settleOutOfService(store.getState('availability') ?? {}, connectorId);
          if (running) await applyNow();
        })
        .catch((error: unknown) => {
          logger.error({ err: (error as Error).message }, 'ending a command override failed');
        });
    },
    start() {
      running = true;
      trigger('start');
    },
    stop() {
      running = false;
      if (timer !== undefined) clock.clearTimeout(timer);
      timer = undefined;
    },
  };
}
