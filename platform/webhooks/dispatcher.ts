import type { FastifyBaseLogger } from 'fastify';
import { Agent, request } from 'undici';
import { type AttemptResult, afterAttempt, retryAfterSeconds } from '../domain/webhook-delivery.js';
import type { PlatformKeys } from '../storage/platform-keys.js';
import type { DeliveryRow, Store, WebhookRow } from '../storage/store.js';
import { literalHostRefusal, publicOnlyLookup } from './address-policy.js';
import { attemptErrorCategory } from './delivery-errors.js';
import { signatureHeader } from './signing.js';

export interface DispatcherOptions {
  store: Store;
  keys: PlatformKeys;
  now: () => number;
  log: FastifyBaseLogger;
  /** Deliver to loopback and private addresses too (`--webhooks-allow-private`, the sandbox). */
  allowPrivate: boolean;
  /** Extra CA certificates trusted for receivers (PEM), besides the system's. */
  ca?: string | undefined;
  /** Told when an endpoint is disabled by a delivery outcome (410, five days failing). */
  onDisabled?: (webhookId: string) => void;
  /** How often due deliveries are looked for when nothing wakes the dispatcher, ms. */
  pollMs?: number;
}

/** Attempts in flight on this instance at once, and per endpoint: a slow receiver holds only its own two. */
const MAX_IN_FLIGHT = 32;
const PER_WEBHOOK = 2;
/** A claimed delivery is this instance's for this long: longer than an attempt can take. */
const LEASE_MS = 30_000;
const TIMEOUT_MS = 15_000;

/**
 * Sends queued deliveries (DESIGN.md §14): claims due ones from the durable queue, POSTs each signed with the
 * endpoint's secrets, and records the outcome by the pure rules of `domain/webhook-delivery.ts`. Never on a
 * request's path: ingest and commands only enqueue.
 */
export function createWebhookDispatcher(opts: DispatcherOptions) {
  const { store, now, log } = opts;
  const agent = new Agent({
    connect: {
      ...(opts.ca ? { ca: opts.ca } : {}),
      ...(opts.allowPrivate ? {} : { lookup: publicOnlyLookup }),
      timeout: 10_000,
    },
    headersTimeout: TIMEOUT_MS,
    bodyTimeout: TIMEOUT_MS,
    keepAliveTimeout: 4_000,
  });
  const inFlight = new Map<string, number>();
  /** Attempts by outcome, for the metrics. */
  const outcomes = { delivered: 0, failed: 0, gave_up: 0, disabled: 0 };
  const attempts = new Set<Promise<void>>();
  const closing = new AbortController();
  let passing: Promise<number> | undefined;
  let again = false;
  let closed = false;

  const timer = setInterval(() => wake(), opts.pollMs ?? 1_000);
  timer.unref();

  function wake(): void {
    if (closed) return;
    if (passing) {
      again = true;
      return;
    }
    passing = pass()
      .catch((err: unknown) => {
        log.warn({ err }, 'webhook delivery pass failed');
        return 0;
      })
      .finally(() => {
        passing = undefined;
        if (again) {
          again = false;
          wake();
        }
      });
  }

  async function pass(): Promise<number> {
    const room = MAX_IN_FLIGHT - attempts.size;
    if (room <= 0) return 0;
    const full = [...inFlight].filter(([, n]) => n >= PER_WEBHOOK).map(([id]) => id);
    // One per endpoint per pass, endpoints at their limit left out; a pass that found work runs another.
    const due = await store.claimDueDeliveries(now(), LEASE_MS, room, 1, full);
    if (due.length > 0) again = true;
    for (const d of due) {
      inFlight.set(d.webhook_id, (inFlight.get(d.webhook_id) ?? 0) + 1);
      const running: Promise<void> = attempt(d)
        .catch((err: unknown) =>
          log.warn({ err, delivery_id: d.delivery_id }, 'webhook attempt not recorded'),
        )
        .finally(() => {
          attempts.delete(running);
          const left = (inFlight.get(d.webhook_id) ?? 1) - 1;
          if (left > 0) inFlight.set(d.webhook_id, left);
          else inFlight.delete(d.webhook_id);
          // A freed slot may let this endpoint's next due delivery go now.
          wake();
        });
      attempts.add(running);
    }
    return due.length;
  }

  async function attempt(d: DeliveryRow): Promise<void> {
    const hook = await store.getWebhook(d.webhook_id);
    // Gone or disabled since the claim: its lease runs out, and a disabled endpoint's deliveries are not claimed.
    if (hook?.status !== 'enabled') return;
    const result = await send(hook, d);
    if (closing.signal.aborted) {
      // Cut short by shutdown: not an attempt. Due again at once, for whichever instance is still up.
      await store.recordAttempt({ ...unchanged(d, hook), state: 'pending', next_attempt_ms: now() }, now());
      return;
    }
    const at = now();
    const next = afterAttempt(d.attempts + 1, result, at, hook.failing_since_ms);
    outcomes[result.kind]++;
    if (next.state === 'failed') outcomes.gave_up++;
    if (next.disable) outcomes.disabled++;
    await store.recordAttempt(
      {
        delivery_id: d.delivery_id,
        webhook_id: d.webhook_id,
        attempts: d.attempts + 1,
        last_status: result.status,
        last_error: result.kind === 'failed' ? result.error : null,
        state: next.state,
        next_attempt_ms: next.nextAttemptMs,
        failing_since_ms: next.failingSinceMs,
        ...(next.disable ? { disable: next.disable } : {}),
      },
      at,
    );
    if (next.disable) {
      log.warn({ webhook_id: d.webhook_id, reason: next.disable }, 'webhook endpoint disabled');
      opts.onDisabled?.(d.webhook_id);
    }
  }

  async function send(hook: WebhookRow, d: DeliveryRow): Promise<AttemptResult> {
    const url = new URL(hook.url);
    // A URL stored before the address policy last tightened is judged again here, at every attempt.
    const refusal = opts.allowPrivate ? undefined : literalHostRefusal(url);
    if (refusal) return { kind: 'failed', status: null, error: 'address_not_allowed' };
    const at = now();
    const secrets = [opts.keys.openSecret(hook.secret_sealed)];
    if (hook.previous_secret_sealed && (hook.previous_secret_until_ms ?? 0) > at)
      secrets.push(opts.keys.openSecret(hook.previous_secret_sealed));
    const timestamp = Math.floor(at / 1000);
    try {
      const res = await request(url, {
        method: 'POST',
        dispatcher: agent,
        body: d.payload,
        headers: {
          'content-type': 'application/json',
          'user-agent': 'charger-platform-webhooks/1',
          'webhook-id': d.delivery_id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signatureHeader(secrets, d.delivery_id, timestamp, d.payload),
        },
        signal: AbortSignal.any([AbortSignal.timeout(TIMEOUT_MS), closing.signal]),
      });
      // The answer's body is not read beyond what keeps the connection reusable.
      await res.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
      if (res.statusCode >= 200 && res.statusCode < 300) return { kind: 'delivered', status: res.statusCode };
      const retryAfter = retryAfterSeconds(headerText(res.headers['retry-after']), now());
      return {
        kind: 'failed',
        status: res.statusCode,
        error: 'http_status',
        ...(retryAfter !== undefined ? { retryAfterSeconds: retryAfter } : {}),
      };
    } catch (err) {
      // The raw error stays in the platform's own log (debug), never in what the endpoint's owner reads.
      log.debug({ err, webhook_id: hook.webhook_id, delivery_id: d.delivery_id }, 'webhook attempt failed');
      return { kind: 'failed', status: null, error: attemptErrorCategory(err) };
    }
  }

  return {
    /** Look for due deliveries now (called after events are queued). */
    wake,
    /** Runs passes until nothing due is left to claim, and waits for every attempt: for tests and tools. */
    async deliverDue(): Promise<void> {
      for (;;) {
        await passing;
        const claimed = await pass();
        if (attempts.size > 0) await Promise.allSettled([...attempts]);
        // A pass woken meanwhile may hold claims whose attempts have not started yet: only done once none runs.
        else if (claimed === 0 && !passing) return;
      }
    },
    /** Attempts running now, and counts since start: delivered, failed, deliveries given up, endpoints disabled. */
    stats: () => ({ inFlight: attempts.size, outcomes: { ...outcomes } }),
    async close(): Promise<void> {
      closed = true;
      clearInterval(timer);
      closing.abort();
      await passing;
      await Promise.allSettled([...attempts]);
      await agent.close();
    },
  };
}
export type WebhookDispatcher = ReturnType<typeof createWebhookDispatcher>;

function unchanged(d: DeliveryRow, hook: WebhookRow) {
  return {
    delivery_id: d.delivery_id,
    webhook_id: d.webhook_id,
    attempts: d.attempts,
    last_status: d.last_status,
    last_error: d.last_error,
    failing_since_ms: hook.failing_since_ms,
  };
}

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
