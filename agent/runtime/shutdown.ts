/**
 * The agent's clean stop (SIGTERM): stop sampling and control passes, persist session progress, flush the
 * outbox (bounded), then the last heartbeat with status `offline` — last, because any later authenticated
 * request would mark the charger online again — then close the hardware and the store. Every wait is
 * bounded, so a dead link or a stuck HAL cannot hold the stop.
 */
import type { Logger } from 'pino';
import { type Clock, iso, sleep } from '../clock.js';
import type { Hal } from '../hal.js';
import type { HeartbeatLoop } from '../link/heartbeat-loop.js';
import type { PlatformClient } from '../link/platform-client.js';
import type { Uplink } from '../link/uplink.js';
import type { AgentStore } from '../store/agent-store.js';
import type { ControlLoop } from './control-loop.js';
import type { PlatformLoops } from './platform-loops.js';
import type { Sampler } from './sampler.js';
import type { SerialRunner } from './serial-runner.js';
import type { AgentTuning } from './tuning.js';

export interface RunningAgent {
  abort: AbortController;
  /** Detaches the hardware event handler. */
  unsubscribe: () => void;
  controlLoop: ControlLoop;
  sampler: Sampler;
  runner: SerialRunner;
  platform: PlatformLoops;
  uplink: Uplink;
  heartbeat: HeartbeatLoop;
  hal: Hal;
  client: PlatformClient;
  store: AgentStore;
  clock: Clock;
  logger: Logger;
  tuning: AgentTuning;
  isRegistered: () => boolean;
  hasFailed: () => boolean;
  /** Keeps what is left in the outbox as the store closes, so that stats still answer after the stop. */
  keepFinalOutbox: (usage: { items: number; bytes: number }) => void;
}

export async function shutDown(agent: RunningAgent): Promise<void> {
  const { controlLoop, sampler, runner, uplink, heartbeat, hal, client, store, clock, logger, tuning } =
    agent;
  agent.abort.abort();
  agent.unsubscribe();
  controlLoop.stop();
  await atMost(clock, 2_000, sampler.stop(), undefined);
  // A command in the middle of its HAL calls finishes; one still queued is resumed at the next start.
  await atMost(clock, 2_000, runner.idle(), undefined);
  try {
    sampler.persist();
  } catch (error) {
    logger.warn({ err: (error as Error).message }, 'persisting session progress failed');
  }
  // A registration or secret rotation whose answer is on its way must be stored before the store closes:
  // the platform will not hand that secret out again. Both are bounded by the request timeout.
  const bound = tuning.requestTimeoutMs + 1_000;
  await atMost(clock, bound, agent.platform.registered, undefined);
  await atMost(clock, bound, agent.platform.allSettled(), undefined);
  await atMost(clock, tuning.shutdownFlushMs, uplink.settled(), undefined);
  if (agent.isRegistered() && !agent.hasFailed()) {
    const drained = await atMost(
      clock,
      tuning.shutdownFlushMs + 500,
      uplink.drain(clock.now() + tuning.shutdownFlushMs),
      false,
    ).catch(() => false);
    const backlog = store.outbox.size().items;
    if (!drained) logger.warn({ backlog }, 'outbox not empty at shutdown; it is sent at the next start');
    const offline = await atMost(
      clock,
      tuning.shutdownHeartbeatMs,
      heartbeat.beat('offline').catch(() => false),
      false,
    );
    logger.info({ offline_heartbeat: offline, backlog }, 'agent stopping');
  }
  try {
    await hal.close?.();
  } catch (error) {
    logger.warn({ err: (error as Error).message }, 'closing the hardware failed');
  }
  await client.close().catch(() => undefined);
  const proc = store.getState('agent_process');
  if (proc) store.setState('agent_process', { ...proc, stoppedAt: iso(clock.now()) });
  agent.keepFinalOutbox(store.outbox.size());
  store.close();
}

/**
 * `work`'s answer, or `fallback` once `ms` passed. The wait's timer is cleared as soon as `work` settles: left
 * running it held an agent stopped in process (the fleet's worker threads) for up to the request timeout.
 */
async function atMost<T, F>(clock: Clock, ms: number, work: Promise<T>, fallback: F): Promise<T | F> {
  const settled = new AbortController();
  try {
    return await Promise.race([work, sleep(clock, ms, settled.signal).then(() => fallback)]);
  } finally {
    settled.abort();
  }
}
