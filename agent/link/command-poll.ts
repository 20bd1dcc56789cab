/**
 * Long polls `GET /v1/device/commands?wait=` between heartbeats, so a command reaches the charger within
 * moments instead of at the next heartbeat (DESIGN.md §5).
 *
 * The platform answers at once while a delivered command still waits for its first report; the agent has it
 * journaled already, so on an answer made only of repeats the loop pauses briefly (the report is on its way
 * through the outbox) rather than spin.
 */
import type { Logger } from 'pino';
import { AgentFatalError } from '../agent-errors.js';
import { type Clock, sleep } from '../clock.js';
import { nextDelayMs } from '../core/backoff.js';
import type { CommandReceiver } from './platform-answers.js';
import type { DeviceApi } from './platform-client.js';
import { isPlatformError } from './platform-errors.js';

export const DEFAULT_POLL_WAIT_SECONDS = 25;
/** Pause after an answer that held only commands already being handled. */
const REPEAT_PAUSE_MS = 2_000;

export interface CommandPollOptions {
  api: () => DeviceApi | undefined;
  clock: Clock;
  logger: Logger;
  executor: CommandReceiver;
  /** Seconds each poll waits; a function when the remote configuration may change it. */
  waitSeconds?: number | (() => number);
  random?: () => number;
  backoff?: { baseMs: number; capMs: number };
  onFatal?: (error: AgentFatalError) => void;
  /** Each answer's `server_time` and when it arrived (a coarse clock-skew measurement). */
  onServerTime?: (serverTime: string, receivedAtMs: number) => void;
}

export async function runCommandPoll(options: CommandPollOptions, signal: AbortSignal): Promise<void> {
  const { clock, logger, executor } = options;
  const { waitSeconds = DEFAULT_POLL_WAIT_SECONDS } = options;
  const waitOf = typeof waitSeconds === 'function' ? waitSeconds : () => waitSeconds;
  const random = options.random ?? Math.random;
  const backoff = options.backoff ?? { baseMs: 1_000, capMs: 60_000 };
  let attempt = 0;
  while (!signal.aborted) {
    const api = options.api();
    if (!api) {
      await sleep(clock, 1_000, signal);
      continue;
    }
    try {
      const answer = await api.pollCommands(waitOf(), signal);
      attempt = 0;
      options.onServerTime?.(answer.serverTime, clock.now());
      const { fresh, repeats } = executor.receive(answer.commands);
      if (fresh === 0 && repeats > 0) await sleep(clock, REPEAT_PAUSE_MS, signal);
    } catch (error) {
      if (signal.aborted) break;
      if (error instanceof AgentFatalError) {
        options.onFatal?.(error);
        return;
      }
      const retryAfterSeconds = isPlatformError(error) ? error.retryAfterSeconds : undefined;
      const delay = nextDelayMs(attempt, {
        ...backoff,
        random,
        ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}),
      });
      attempt += 1;
      logger.debug({ err: (error as Error).message, retry_in_ms: delay }, 'command poll failed');
      await sleep(clock, delay, signal);
    }
  }
}
