/**
 * Reads the hardware on a steady tick and on every hardware event, and turns readings into:
 * - telemetry records (cadence in `core/telemetry.ts`), handed to the uplink;
 * - charging sessions: opened in the store when energy first flows, closed (with their charging record queued
 *   in the same transaction) when the vehicle leaves;
 * - connector snapshots for the technician's `status`.
 *
 * Flash: a session's progress and the snapshots are written together, once a minute and on every change of
 * state — not every tick. After a power cut a session's record is therefore right up to the last minute; the
 * meter registers still give the true energy of any later session.
 *
 * Samples run one at a time (a hardware event during a tick waits for it), so a session is never opened or
 * closed twice.
 */
import type { Logger } from 'pino';
import type { TelemetryRecord } from '../../shared/device-api.js';
import { type Clock, iso, type TimerHandle } from '../clock.js';
import {
  advanceSession,
  energyDelivered,
  newRecordId,
  openSession,
  readingBreaksSession,
  toChargingRecord,
} from '../core/sessions.js';
import {
  DEFAULT_TELEMETRY_INTERVALS,
  type LastSent,
  type TelemetryIntervals,
  telemetryDue,
  toTelemetryRecord,
} from '../core/telemetry.js';
import type { ConnectorInfo, ConnectorReading, Hal } from '../hal.js';
import type { Uplink } from '../link/uplink.js';
import type { AgentStore, ConnectorSnapshot, SessionRow } from '../store/agent-store.js';
import type { ControlLoop } from './control-loop.js';
import { createSerialRunner } from './serial-runner.js';

export const PERSIST_INTERVAL_MS = 60_000;

export interface SamplerOptions {
  store: AgentStore;
  hal: Hal;
  clock: Clock;
  logger: Logger;
  uplink: Uplink;
  controlLoop?: ControlLoop;
  connectors: () => readonly ConnectorInfo[];
  intervals?: TelemetryIntervals;
  /** Sampling tick, ms; default the active telemetry interval. */
  tickMs?: number;
  persistEveryMs?: number;
  recordId?: (connectorId: number, startedAtMs: number) => string;
}

export interface Sampler {
  /** Reconciles the sessions the store remembers with the hardware (after a restart). */
  init(): Promise<void>;
  /**
   * The hardware reported the vehicle gone at `at`: its session ends there, with what the last sample saw, even
   * if another vehicle is plugged in by the time a sample runs.
   */
  vehicleLeft(connectorId: number, at: number): Promise<void>;
  /** Takes one sample now (queued behind a running one). */
  sample(reason: string): Promise<void>;
  start(): void;
  /** Stops the tick; resolves once a sample in progress has finished. */
  stop(): Promise<void>;
  /** Writes session progress and snapshots now (shutdown). */
  persist(): void;
  /** The control loop's target changed: record it with the next write. */
  markDirty(connectorId: number): void;
  latest(): ReadonlyMap<number, ConnectorReading>;
  /** A new telemetry cadence (remote configuration); the sampling tick follows the active interval. */
  setIntervals(intervals: TelemetryIntervals): void;
}

export function createSampler(options: SamplerOptions): Sampler {
  const { store, hal, clock, logger, uplink } = options;
  let intervals = options.intervals ?? DEFAULT_TELEMETRY_INTERVALS;
  let tickMs = options.tickMs ?? intervals.activeMs;
  const persistEveryMs = options.persistEveryMs ?? PERSIST_INTERVAL_MS;
  const recordIdOf = options.recordId ?? ((c: number, at: number) => newRecordId(c, at));
  const runner = createSerialRunner();
  const sessions = new Map<number, SessionRow>();
  const lastSent = new Map<number, LastSent>();
  const latest = new Map<number, ConnectorReading>();
  const dirty = new Set<number>();
  let lastPersist = clock.now();
  let timer: TimerHandle | undefined;
  let running = false;
  let readFailureLogged = false;

  function close(session: SessionRow, endedAt: string, why: string): void {
    store.closeSession(session, endedAt, toChargingRecord(session, endedAt));
    sessions.delete(session.connectorId);
    logger.info(
      {
        connector_id: session.connectorId,
        record_id: session.recordId,
        energy_kwh: session.meterLast - session.meterStart,
        why,
      },
      'session closed',
    );
    uplink.notify();
  }

  function snapshotOf(reading: ConnectorReading, at: number): ConnectorSnapshot {
    const snap: ConnectorSnapshot = {
      connectorId: reading.connectorId,
      state: reading.state,
      powerKw: reading.powerKw,
      voltageV: reading.voltageV,
      currentA: reading.currentA,
      energyDeliveredKwh: energyDelivered(sessions.get(reading.connectorId)),
      temperatureC: reading.temperatureC,
      vehiclePresent: reading.vehiclePresent,
      faultCode: reading.faultCode,
      updatedAt: iso(at),
    };
    if (reading.soc !== undefined) snap.soc = reading.soc;
    const target = options.controlLoop?.targets().get(reading.connectorId);
    if (target) {
      snap.mode = target.mode;
      snap.maxPowerKw = target.powerLimitKw;
      snap.reason = target.reason;
      if (target.nextChangeAt !== undefined) snap.nextChangeAt = iso(target.nextChangeAt);
    }
    return snap;
  }

  function persist(): void {
    const at = clock.now();
    const open = [...sessions.values()];
    const snaps = [...latest.values()].map((r) => snapshotOf(r, at));
    store.transaction(() => {
      for (const s of open) store.updateSessionProgress(s);
      store.saveSnapshots(snaps);
    });
    dirty.clear();
    lastPersist = at;
  }

  async function readAll(): Promise<ConnectorReading[] | undefined> {
    try {
      const readings = await hal.readConnectors();
      readFailureLogged = false;
      return readings;
    } catch (error) {
      if (!readFailureLogged) logger.warn({ err: (error as Error).message }, 'reading the hardware failed');
      readFailureLogged = true;
      return undefined;
    }
  }

  async function takeSample(): Promise<void> {
    const readings = await readAll();
    if (!readings) return;
    const now = clock.now();
    const records: TelemetryRecord[] = [];
    for (const r of readings) {
      const id = r.connectorId;
      const before = latest.get(id);
      let session = sessions.get(id);
      if (session && readingBreaksSession(session, r)) {
        close(session, session.updatedAt, 'meter restarted');
        session = undefined;
      }
      if (session) {
        session = advanceSession(session, r, now);
        sessions.set(id, session);
      } else if (r.state === 'charging' || r.state === 'discharging') {
        session = openSession(r, now, recordIdOf(id, now));
        store.insertSession(session);
        sessions.set(id, session);
        logger.info({ connector_id: id, record_id: session.recordId }, 'session opened');
      }
      if (session && !r.vehiclePresent) {
        close(session, iso(now), 'vehicle left');
        session = undefined;
      }
      const last = lastSent.get(id);
      if (telemetryDue(last, r.state, now, intervals)) {
        // The platform keeps one record per connector and instant, so a second record stamped with the same
        // millisecond (a state change the control loop caused right after the previous sample) would be taken
        // for a duplicate and dropped: stamps of a connector strictly increase.
        const at = last !== undefined && now <= last.at ? last.at + 1 : now;
        const record = toTelemetryRecord(r, at, energyDelivered(session));
        if (record) records.push(record);
        else logger.warn({ connector_id: id }, 'reading not expressible as telemetry; skipped');
        lastSent.set(id, { at, state: r.state });
      }
      if (
        !before ||
        before.state !== r.state ||
        before.vehiclePresent !== r.vehiclePresent ||
        before.faultCode !== r.faultCode
      ) {
        dirty.add(id);
      }
      latest.set(id, r);
    }
    if (dirty.size > 0 || now - lastPersist >= persistEveryMs) persist();
    options.controlLoop?.observe(readings);
    // Not awaited: a slow network must not hold up sampling; the uplink keeps the ticks in order.
    void uplink.sendTelemetry(records);
  }

  /**
   * The next tick comes `tickMs` after the latest sample, whatever caused it: a sample taken for a hardware
   * event restarts the cadence, so records of an active connector stay 5 s apart rather than drifting off a
   * fixed grid.
   */
  function rearm(): void {
    if (timer !== undefined) clock.clearTimeout(timer);
    timer = undefined;
    if (!running) return;
    timer = clock.setTimeout(() => {
      timer = undefined;
      void sample('tick');
    }, tickMs);
  }

  function sample(reason: string): Promise<void> {
    return runner
      .run(takeSample)
      .catch((error: unknown) => {
        logger.error({ err: (error as Error).message, reason }, 'sampling failed');
      })
      .finally(rearm);
  }

  return {
    async init() {
      for (const s of store.openSessions()) sessions.set(s.connectorId, s);
      if (sessions.size === 0) return;
      const readings = await readAll();
      if (!readings) return; // decided on the first sample the hardware answers
      await runner.run(() => {
        const byId = new Map(readings.map((r) => [r.connectorId, r]));
        for (const s of [...sessions.values()]) {
          const r = byId.get(s.connectorId);
          // The vehicle left while the agent was down, or the meter restarted: the record ends with what the
          // store last knew. Otherwise the session carries on across the restart.
          if (!r?.vehiclePresent || readingBreaksSession(s, r))
            close(s, s.updatedAt, 'ended while the agent was down');
        }
      });
    },
    sample,
    vehicleLeft(connectorId, at) {
      return runner
        .run(() => {
          const session = sessions.get(connectorId);
          if (session) close(session, iso(Math.max(at, Date.parse(session.updatedAt))), 'vehicle left');
        })
        .catch((error: unknown) => {
          logger.error({ err: (error as Error).message }, 'closing a session failed');
        });
    },
    start() {
      if (running) return;
      running = true;
      void sample('start');
    },
    stop() {
      running = false;
      if (timer !== undefined) clock.clearTimeout(timer);
      timer = undefined;
      return runner.idle();
    },
    persist: () => persist(),
    setIntervals(next) {
      if (next.activeMs === intervals.activeMs && next.idleMs === intervals.idleMs) return;
      intervals = next;
      tickMs = next.activeMs;
      rearm(); // the next sample comes at the new cadence from now, not after the old one's wait
    },
    markDirty(connectorId) {
      dirty.add(connectorId);
    },
    latest: () => latest,
  };
}
