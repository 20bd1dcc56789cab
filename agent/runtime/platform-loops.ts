/**
 * The agent's conversation with the platform, in the background: registration (first start only), then the
 * heartbeat, the command poll and the outbox flush, each its own loop until the agent stops. A fatal error
 * in any of them (the platform refuses the identity) goes to the fatal latch; anything else is logged.
 */
import type { Logger } from 'pino';
import { type AgentFatalError, isAgentFatalError } from '../agent-errors.js';
import type { Clock } from '../clock.js';
import { runCommandPoll } from '../link/command-poll.js';
import type { DeviceCredentials } from '../link/device-credentials.js';
import type { HeartbeatLoop } from '../link/heartbeat-loop.js';
import type { DeviceApi } from '../link/platform-client.js';
import type { Uplink } from '../link/uplink.js';
import type { Identity } from '../store/agent-store.js';
import type { CommandExecutor } from './command-executor.js';
import type { AgentTuning } from './tuning.js';

export interface PlatformLoopsOptions {
  credentials: DeviceCredentials;
  heartbeat: HeartbeatLoop;
  uplink: Uplink;
  executor: CommandExecutor;
  /** The device API once registered, else undefined. */
  api: () => DeviceApi | undefined;
  clock: Clock;
  logger: Logger;
  random: () => number;
  tuning: AgentTuning;
  /** Seconds each long poll waits, as the remote configuration has it now. */
  pollWaitSeconds: () => number;
  fail: (error: AgentFatalError) => void;
  /** Called once the identity is ready, before the loops start. */
  onRegistered: () => void;
}

export interface PlatformLoops {
  /** Settles once registered (undefined when stopped first, or when registration stopped on an error). */
  readonly registered: Promise<Identity | undefined>;
  /** Settles when every loop started so far has ended. */
  allSettled(): Promise<unknown>;
}

export function startPlatformLoops(options: PlatformLoopsOptions, signal: AbortSignal): PlatformLoops {
  const { credentials, heartbeat, uplink, executor, api, clock, logger, random, tuning, fail } = options;
  const loops: Promise<void>[] = [];
  const guard = (name: string, loop: Promise<void>) =>
    loop.catch((error: unknown) => {
      if (isAgentFatalError(error)) fail(error);
      else logger.error({ err: (error as Error).message, loop: name }, 'loop stopped unexpectedly');
    });
  const registered = credentials
    .ensureRegistered(signal)
    .then((identity) => {
      if (!identity || signal.aborted) return identity;
      options.onRegistered();
      logger.info({ device_id: identity.deviceId }, 'platform identity ready');
      loops.push(guard('heartbeat', heartbeat.run(signal)));
      loops.push(
        guard(
          'poll',
          runCommandPoll(
            {
              api,
              clock,
              logger,
              executor,
              waitSeconds: options.pollWaitSeconds,
              random,
              onServerTime: (serverTime, receivedAt) => heartbeat.observeServerTime(serverTime, receivedAt),
              // Commands should not wait long after the platform returns: cap the poll's backoff at a minute.
              backoff: { baseMs: tuning.backoff.baseMs, capMs: Math.min(tuning.backoff.capMs, 60_000) },
              onFatal: fail,
            },
            signal,
          ),
        ),
      );
      loops.push(guard('flush', uplink.run(signal)));
      return identity;
    })
    .catch((error: unknown) => {
      if (isAgentFatalError(error)) fail(error);
      else logger.error({ err: (error as Error).message }, 'registration stopped unexpectedly');
      return undefined;
    });
  return { registered, allSettled: () => Promise.allSettled(loops) };
}
