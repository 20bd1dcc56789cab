import type { FastifyBaseLogger } from 'fastify';
import type { PlatformKeys } from '../storage/platform-keys.js';
import type { Store } from '../storage/store.js';
import { createWebhookDispatcher } from '../webhooks/dispatcher.js';
import type { PrincipalDirectory } from './principal-directory.js';
import { createWebhookEvents } from './webhook-events.js';
import { createWebhookService } from './webhook-service.js';

export interface WebhookOptions {
  /** `--webhooks-allow-private`: http URLs and non-public addresses are accepted (the sandbox's default). */
  allowPrivate?: boolean;
  /** Extra CA certificates (PEM) trusted for receivers, besides Node's own. */
  ca?: string;
  /** How often due deliveries are looked for besides when events are queued, ms. */
  pollMs?: number;
}

/**
 * Webhooks (DESIGN.md §14), wired: the events that queue deliveries, the dispatcher that sends them and the
 * service behind the endpoint routes. The caller awaits it once at start (the endpoints are read then).
 */
export async function createWebhooks(deps: {
  store: Store;
  keys: PlatformKeys;
  directory: PrincipalDirectory;
  now: () => number;
  log: FastifyBaseLogger;
  options?: WebhookOptions | undefined;
}) {
  const allowPrivate = deps.options?.allowPrivate ?? false;
  const dispatcher = createWebhookDispatcher({
    store: deps.store,
    keys: deps.keys,
    now: deps.now,
    log: deps.log,
    allowPrivate,
    ca: deps.options?.ca,
    onDisabled: () => void events.reload(),
    ...(deps.options?.pollMs ? { pollMs: deps.options.pollMs } : {}),
  });
  const events = createWebhookEvents({
    store: deps.store,
    directory: deps.directory,
    now: deps.now,
    log: deps.log,
    onQueued: () => dispatcher.wake(),
  });
  await events.reload();
  const service = createWebhookService({
    store: deps.store,
    keys: deps.keys,
    now: deps.now,
    events,
    allowPrivate,
  });
  return {
    events,
    service,
    stats: () => dispatcher.stats(),
    /** Sends what is due now and waits for the attempts (tests and tools). */
    async deliverDue(): Promise<void> {
      await events.settled();
      await dispatcher.deliverDue();
    },
    async close(): Promise<void> {
      await events.close();
      await dispatcher.close();
    },
  };
}
