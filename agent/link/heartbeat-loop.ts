/**
 * Heartbeats (every 30 s, spec) with the charger's status and fault code from the hardware; the commands they
 * carry go to the executor. Each answer's `server_time` gives the clock skew (DESIGN.md §7): stored for the
 * technician, warned about beyond 5 s, and used to judge command expiry in the platform's time.
 *
 * The period has ±10 % jitter so that chargers started together (a power cut over a whole site) drift apart
 * instead of heartbeating in lockstep; failures retry sooner, with jittered backoff capped at the period.
 */
import type { Logger } from 'pino';
import { CLOCK_SKEW_WARN_SECONDS, HEARTBEAT_INTERVAL_SECONDS } from '../../shared/limits.js';
import type { HeartbeatStatus } from '../../shared/primitives.js';
import { AgentFatalError } from '../agent-errors.js';
import { type Clock, createWakeup, iso } from '../clock.js';
import { nextDelayMs } from '../core/backoff.js';
import type { ConnectorReading, Hal } from '../hal.js';
import type { AgentStore } from '../store/agent-store.js';
import type { CommandReceiver } from './platform-answers.js';
import type { DeviceApi } from './platform-client.js';
import { isPlatformError } from './platform-errors.js';

export const DEFAULT_HEARTBEAT_INTERVAL_MS = HEARTBEAT_INTERVAL_SECONDS * 1000;
/** Repeat the skew warning at most this often while the clock stays off. */
const SKEW_WARN_REPEAT_MS = 3_600_000;

/** The heartbeat's status and fault code from the hardware: `fault` with the first fault code seen. Pure. */
export function deviceStatusOf(readings: readonly ConnectorReading[] | undefined): {
  status: HeartbeatStatus;
  fault_code: number;
} {
  const faulted = readings?.find((r) => r.faultCode !== 0);
  return faulted ? { status: 'fault', fault_code: faulted.faultCode } : { status: 'online', fault_code: 0 };
}

/** Platform time minus agent time, ms, taking the request's midpoint as the instant the server stamped. Pure. */
export function measureSkewMs(serverTime: string, sentAtMs: number, receivedAtMs: number): number {
  return Date.parse(serverTime) - Math.round((sentAtMs + receivedAtMs) / 2);
}

export interface HeartbeatLoopOptions {
  api: () => DeviceApi | undefined;
  hal: Hal;
  store: AgentStore;
  clock: Clock;
  logger: Logger;
  executor: CommandReceiver;
  intervalMs?: number;
  random?: () => number;
  onFatal?: (error: AgentFatalError) => void;
  /** Called after each successful heartbeat (secret rotation checks hang here). */
  afterSuccess?: () => Promise<void>;
}

export interface HeartbeatLoop {
  /** One heartbeat; `offline` for the last one on shutdown. Resolves true when the platform answered. */
  beat(status?: 'offline'): Promise<boolean>;
  run(signal: AbortSignal): Promise<void>;
  /** The latest measured skew, ms (0 until measured; persisted across restarts). */
  skewMs(): number;
  /** A new cadence (remote configuration): a wait under way ends at once, and the next ones use it. */
  setIntervalMs(ms: number): void;
  /**
   * A `server_time` seen elsewhere (a long poll, which is not signed and so works even when the clock is too
   * far off for signed writes). Coarse — it is stamped after the poll's wait — so it only corrects a skew that
   * is off by more than the warning threshold; heartbeats refine it.
   */
  observeServerTime(serverTime: string, receivedAtMs: number): void;
}

export function createHeartbeatLoop(options: HeartbeatLoopOptions): HeartbeatLoop {
  const { hal, store, clock, logger, executor } = options;
  let intervalMs = options.intervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS;
  const wakeup = createWakeup(clock);
  const random = options.random ?? Math.random;
  let skew = store.getState('clock_skew')?.ms ?? 0;
  let lastSkewWarnAt = Number.NEGATIVE_INFINITY;
  let skewWasOff = false;

  function noteSkew(ms: number): void {
    skew = ms;
    const now = clock.now();
    const off = Math.abs(ms) > CLOCK_SKEW_WARN_SECONDS * 1000;
    if (off && (!skewWasOff || now - lastSkewWarnAt >= SKEW_WARN_REPEAT_MS)) {
      logger.warn(
        { skew_ms: ms },
        `clock is off by ${(ms / 1000).toFixed(1)} s from the platform (more than ${CLOCK_SKEW_WARN_SECONDS} s): schedules follow the local clock; check NTP`,
      );
      lastSkewWarnAt = now;
    } else if (!off && skewWasOff) {
      logger.info({ skew_ms: ms }, 'clock is back within the skew tolerance');
    }
    skewWasOff = off;
  }

  async function beat(status?: 'offline'): Promise<boolean> {
    const api = options.api();
    if (!api) return false;
    let readings: ConnectorReading[] | undefined;
    try {
      readings = await hal.readConnectors();
    } catch {
      readings = undefined;
    }
    const body = status === 'offline' ? { status, fault_code: 0 } : deviceStatusOf(readings);
    const sentAt = clock.now();
    try {
      const answer = await api.heartbeat({ timestamp: iso(sentAt), ...body });
      const receivedAt = clock.now();
      const measured = measureSkewMs(answer.serverTime, sentAt, receivedAt);
      // One commit for both: a heartbeat every 30 s is the agent's most frequent steady-state write.
      store.transaction(() => {
        store.setState('last_heartbeat', {
          at: iso(receivedAt),
          ok: true,
          status: body.status,
          roundTripMs: receivedAt - sentAt,
        });
        store.setState('clock_skew', { ms: measured, at: iso(receivedAt) });
      });
      noteSkew(measured);
      if (answer.unusable > 0)
        logger.warn({ count: answer.unusable }, 'heartbeat carried commands without a usable id');
      if (answer.commands.length > 0) executor.receive(answer.commands);
      return true;
    } catch (error) {
      if (error instanceof AgentFatalError) {
        options.onFatal?.(error);
        return false;
      }
      const message = (error as Error).message;
      store.transaction(() => {
        store.setState('last_heartbeat', {
          at: iso(clock.now()),
          ok: false,
          status: body.status,
          error: message,
        });
        store.setState('last_error', { at: iso(clock.now()), where: 'heartbeat', message });
      });
      throw error;
    }
  }

  return {
    beat,
    skewMs: () => skew,
    setIntervalMs(ms) {
      if (ms === intervalMs) return;
      intervalMs = ms;
      wakeup.notify();
    },
    observeServerTime(serverTime, receivedAtMs) {
      const measured = Date.parse(serverTime) - receivedAtMs;
      if (Number.isNaN(measured) || Math.abs(measured - skew) <= CLOCK_SKEW_WARN_SECONDS * 1000) return;
      store.setState('clock_skew', { ms: measured, at: iso(receivedAtMs) });
      noteSkew(measured);
    },
    async run(signal) {
      let attempt = 0;
      while (!signal.aborted) {
        let delay: number;
        try {
          await beat();
          attempt = 0;
          if (options.afterSuccess)
            await options.afterSuccess().catch((e: unknown) => {
              if (e instanceof AgentFatalError) options.onFatal?.(e);
              else logger.warn({ err: (e as Error).message }, 'post-heartbeat task failed');
            });
          delay = intervalMs * (0.9 + 0.2 * random());
        } catch (error) {
          if (signal.aborted) break;
          const retryAfterSeconds = isPlatformError(error) ? error.retryAfterSeconds : undefined;
          delay = nextDelayMs(attempt, {
            baseMs: 1_000,
            capMs: intervalMs,
            random,
            ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}),
          });
          attempt += 1;
          logger.warn({ err: (error as Error).message, retry_in_ms: delay }, 'heartbeat failed');
        }
        await wakeup.wait(delay, signal);
      }
    },
  };
}
