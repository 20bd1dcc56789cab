/**
 * Everything the agent sends the platform besides heartbeats and polls: telemetry, events, charging records
 * and command statuses (DESIGN.md §7, issue item 5).
 *
 * - Live telemetry goes straight to the platform while the link is healthy and nothing older waits; it touches
 *   the disk only when it has to wait (the send failed, or a backlog is being replayed), then in one
 *   transaction per tick. This spares the flash: a connected charger writes no telemetry at all.
 * - Everything else goes through the SQLite outbox always (it must never be lost), and the flusher replays the
 *   outbox oldest first: telemetry through `/v1/device/telemetry/batch` (up to 500 per request), events and
 *   charging records in batches (up to 100), command and firmware statuses one by one. Order is kept within each kind; the
 *   kinds go to different endpoints and do not depend on each other.
 * - Retryable failures (network, 5xx, 429, malformed answers) back off exponentially with full jitter, capped,
 *   never sooner than the server's `retry_after`; a fleet that lost the platform together therefore comes back
 *   spread out. A long replay is paced (a token bucket: a few requests at once, then one per `paceMs`),
 *   leaving room in the per-device rate limit for live traffic, while a command's reports go out at once.
 * - A permanent refusal (4xx other than 429) drops what the platform will never take, with a log line: a
 *   command status for a command that expired or was cancelled (409), unknown (404), or invalid (400). For a
 *   batch refused because of one record (`details.field` = `records.N...`), only that record is dropped.
 */
import type { Logger } from 'pino';
import type {
  ChargingRecordUpload,
  CommandStatusReport,
  DeviceEvent,
  FirmwareStatusReport,
  TelemetryRecord,
} from '../../shared/device-api.js';
import { CHARGING_RECORDS_BATCH_MAX, EVENTS_BATCH_MAX, TELEMETRY_BATCH_MAX } from '../../shared/limits.js';
import { AgentFatalError } from '../agent-errors.js';
import { type Clock, createWakeup, iso, sleep } from '../clock.js';
import { DEFAULT_BACKOFF, nextDelayMs } from '../core/backoff.js';
import type { OutboxKind } from '../core/outbox-policy.js';
import type { AgentStore } from '../store/agent-store.js';
import type { OutboxItem } from '../store/outbox.js';
import type { DeviceApi } from './platform-client.js';
import { isPlatformError, type PlatformError } from './platform-errors.js';

/** How many outbox items the flusher looks at to assemble one request. */
const PEEK_WINDOW = TELEMETRY_BATCH_MAX;
const BATCH_MAX: Record<OutboxKind, number> = {
  telemetry: TELEMETRY_BATCH_MAX,
  event: EVENTS_BATCH_MAX,
  charging_record: CHARGING_RECORDS_BATCH_MAX,
  command_status: 1,
  firmware_status: 1,
};

export interface UplinkStats {
  /** Telemetry records handed to the uplink. */
  telemetryProduced: number;
  /** Delivered (the platform answered 2xx), by kind. */
  delivered: Record<OutboxKind, number>;
  /** Given up because the platform refused them permanently, by kind. */
  refused: Record<OutboxKind, number>;
  /** Telemetry that went to the outbox instead of straight out. */
  telemetryQueued: number;
  failures: number;
}

export interface UplinkOptions {
  store: AgentStore;
  clock: Clock;
  logger: Logger;
  /** The authenticated API, or undefined while the agent has no identity yet. */
  api: () => DeviceApi | undefined;
  random?: () => number;
  backoff?: { baseMs: number; capMs: number };
  /**
   * Sustained pace of the flusher, ms per request; default 200 (≤ 5 requests/s of the 10/s budget). A short
   * burst (`paceBurst` requests) goes without pausing, so a command's `accepted` and `succeeded` reports do not
   * wait behind each other; only a long replay is paced.
   */
  paceMs?: number;
  /** Requests the flusher may send back to back before pacing; default 4. */
  paceBurst?: number;
  /** Told about a fatal error (the platform refuses the charger's identity). */
  onFatal?: (error: AgentFatalError) => void;
}

export type FlushOutcome =
  | { kind: 'empty' }
  | { kind: 'sent'; count: number }
  | { kind: 'refused'; count: number }
  | { kind: 'retry'; error: PlatformError }
  | { kind: 'not_ready' };

export interface Uplink {
  /** Live telemetry of one tick: sent straight away when possible, else queued in one transaction. */
  sendTelemetry(records: readonly TelemetryRecord[]): Promise<void>;
  /** Wake the flusher: something was queued. */
  notify(): void;
  /** One request's worth of the outbox. */
  flushOnce(): Promise<FlushOutcome>;
  /** Flushes until `signal` aborts. */
  run(signal: AbortSignal): Promise<void>;
  /** Flushes until empty, a failure, or `deadline` (agent clock); true when the outbox is empty. */
  drain(deadlineMs: number): Promise<boolean>;
  /** Resolves once every live send handed over so far has been sent or queued. */
  settled(): Promise<void>;
  /** The flusher is waiting out a failure: live telemetry queues rather than races it. */
  backingOff(): boolean;
  stats(): UplinkStats;
}

const zeroCounts = (): Record<OutboxKind, number> => ({
  telemetry: 0,
  event: 0,
  charging_record: 0,
  command_status: 0,
  firmware_status: 0,
});

/** Index of the offending record in a refused batch (`details.field` like `records.17.power`). */
export function offendingIndex(error: PlatformError, key: 'records' | 'events'): number | undefined {
  const field = error.details?.field;
  if (typeof field !== 'string') return undefined;
  const match = new RegExp(`^${key}\\.(\\d+)(\\.|$)`).exec(field);
  return match ? Number(match[1]) : undefined;
}

export function createUplink(options: UplinkOptions): Uplink {
  const { store, clock, logger } = options;
  const random = options.random ?? Math.random;
  const backoff = options.backoff ?? DEFAULT_BACKOFF;
  const paceMs = options.paceMs ?? 200;
  const paceBurst = options.paceBurst ?? 4;
  const wakeup = createWakeup(clock);
  const stats: UplinkStats = {
    telemetryProduced: 0,
    delivered: zeroCounts(),
    refused: zeroCounts(),
    telemetryQueued: 0,
    failures: 0,
  };
  let retrying = false;
  let flushing: Promise<FlushOutcome> | undefined;
  let liveChain: Promise<void> = Promise.resolve();

  function queueTelemetry(records: readonly TelemetryRecord[]): void {
    store.enqueue(
      records.map((r) => ({
        kind: 'telemetry' as const,
        payload: r,
        createdAt: new Date(Date.parse(r.timestamp)),
      })),
    );
    stats.telemetryQueued += records.length;
    wakeup.notify();
  }

  function noteError(where: string, error: Error): void {
    stats.failures += 1;
    store.setState('last_error', { at: iso(clock.now()), where, message: error.message });
  }

  async function sendLive(records: readonly TelemetryRecord[]): Promise<void> {
    const api = options.api();
    if (!api || retrying || flushing || !store.outbox.isEmpty()) {
      queueTelemetry(records);
      return;
    }
    try {
      if (records.length === 1) await api.sendTelemetry(records[0]!);
      else await api.sendTelemetryBatch(records);
      stats.delivered.telemetry += records.length;
    } catch (error) {
      if (isPlatformError(error) && !error.retryable && error.kind !== 'unauthorized') {
        // Validated before sending, so this is a platform that disagrees: keeping it would block the queue.
        stats.refused.telemetry += records.length;
        logger.warn(
          { err: error.message, count: records.length },
          'telemetry refused by the platform; dropped',
        );
        return;
      }
      if (error instanceof AgentFatalError) options.onFatal?.(error);
      noteError('telemetry', error as Error);
      queueTelemetry(records);
    }
  }

  /** Drops `seqs` for good, counting them as refused. */
  function drop(items: readonly OutboxItem[], error: PlatformError, what: string): FlushOutcome {
    store.outbox.ack(items.map((i) => i.seq));
    for (const i of items) stats.refused[i.kind] += 1;
    logger.warn(
      { err: error.message, count: items.length, kind: items[0]?.kind },
      `${what} refused by the platform; dropped`,
    );
    noteError(`send ${items[0]?.kind ?? 'item'}`, error);
    return { kind: 'refused', count: items.length };
  }

  async function sendGroup(api: DeviceApi, group: OutboxItem[]): Promise<FlushOutcome> {
    const kind = group[0]!.kind;
    try {
      switch (kind) {
        case 'telemetry':
          await api.sendTelemetryBatch(group.map((i) => i.payload as TelemetryRecord));
          break;
        case 'event':
          await api.sendEvents(group.map((i) => i.payload as DeviceEvent));
          break;
        case 'charging_record':
          await api.sendChargingRecords(group.map((i) => i.payload as ChargingRecordUpload));
          break;
        case 'command_status': {
          const { command_id, ...report } = group[0]!.payload as CommandStatusReport & { command_id: string };
          await api.reportCommandStatus(command_id, report);
          break;
        }
        case 'firmware_status':
          await api.reportFirmwareStatus(group[0]!.payload as FirmwareStatusReport);
          break;
      }
    } catch (error) {
      if (!isPlatformError(error)) throw error;
      if (error.retryable || error.kind === 'unauthorized') return { kind: 'retry', error };
      const key = kind === 'event' ? 'events' : 'records';
      const index = BATCH_MAX[kind] === 1 ? undefined : offendingIndex(error, key);
      if (index !== undefined && group[index] && group.length > 1)
        return drop([group[index]], error, `${kind} item`);
      return drop(group, error, kind);
    }
    store.outbox.ack(group.map((i) => i.seq));
    stats.delivered[kind] += group.length;
    return { kind: 'sent', count: group.length };
  }

  async function flushStep(): Promise<FlushOutcome> {
    const api = options.api();
    if (!api) return { kind: 'not_ready' };
    // Most wake-ups of a connected charger find nothing waiting: known without reading the table.
    if (store.outbox.isEmpty()) return { kind: 'empty' };
    const window = store.outbox.peek(PEEK_WINDOW);
    const head = window[0];
    if (!head) return { kind: 'empty' };
    const group = window.filter((i) => i.kind === head.kind).slice(0, BATCH_MAX[head.kind]);
    try {
      return await sendGroup(api, group);
    } catch (error) {
      if (error instanceof AgentFatalError) {
        options.onFatal?.(error);
        return { kind: 'not_ready' };
      }
      throw error;
    }
  }

  function flushOnce(): Promise<FlushOutcome> {
    // One request at a time, whoever asks (the loop, or the shutdown drain).
    flushing ??= flushStep().finally(() => {
      flushing = undefined;
    });
    return flushing;
  }

  return {
    sendTelemetry(records) {
      stats.telemetryProduced += records.length;
      if (records.length === 0) return liveChain;
      // Sequential: ticks reach the platform (or the outbox) in the order they were taken.
      liveChain = liveChain.then(() => sendLive(records));
      return liveChain;
    },
    notify: () => wakeup.notify(),
    flushOnce,
    async run(signal) {
      let attempt = 0;
      // Token bucket: `paceBurst` requests at once, refilled at one per `paceMs`.
      let tokens = paceBurst;
      let refilledAt = clock.now();
      const takeToken = (): number => {
        const now = clock.now();
        if (paceMs > 0) {
          tokens = Math.min(paceBurst, tokens + (now - refilledAt) / paceMs);
          refilledAt = now;
        } else tokens = paceBurst;
        tokens -= 1;
        // Wait until the next request has a whole token.
        return tokens >= 1 ? 0 : Math.ceil((1 - tokens) * paceMs);
      };
      while (!signal.aborted) {
        let outcome: FlushOutcome;
        try {
          outcome = await flushOnce();
        } catch (error) {
          logger.error({ err: (error as Error).message }, 'outbox flush failed');
          outcome = { kind: 'retry', error: error as PlatformError };
        }
        if (outcome.kind === 'empty' || outcome.kind === 'not_ready') {
          attempt = 0;
          await wakeup.wait(outcome.kind === 'empty' ? 60_000 : 1_000, signal);
        } else if (outcome.kind === 'retry') {
          const retryAfterSeconds = isPlatformError(outcome.error)
            ? outcome.error.retryAfterSeconds
            : undefined;
          const delay = nextDelayMs(attempt, {
            ...backoff,
            random,
            ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}),
          });
          attempt += 1;
          noteError('flush', outcome.error);
          logger.warn(
            { err: outcome.error.message, retry_in_ms: delay, backlog: store.outbox.size().items },
            'outbox flush failed; backing off',
          );
          retrying = true;
          await sleep(clock, delay, signal);
          retrying = false;
        } else {
          attempt = 0;
          const wait = takeToken();
          if (wait > 0) await sleep(clock, wait, signal);
        }
      }
    },
    async drain(deadlineMs) {
      while (clock.now() < deadlineMs) {
        const outcome = await flushOnce();
        if (outcome.kind === 'empty') return true;
        if (outcome.kind === 'retry' || outcome.kind === 'not_ready') return false;
      }
      return store.outbox.isEmpty();
    },
    settled: () => liveChain,
    backingOff: () => retrying,
    stats: () => ({
      ...stats,
      delivered: { ...stats.delivered },
      refused: { ...stats.refused },
    }),
  };
}
