import type { CommandNotifier } from '../services/command-notifier.js';
import type { PlatformEvents } from '../services/platform-events.js';
import type { RedisLink } from './redis-link.js';

/**
 * Pub/sub between the instances of one platform (DESIGN.md §13): long-poll wake-ups and the stream's events.
 * Each is published after storage committed the change it announces, and acted on at once by the instance that
 * made it; the others act on it when it arrives. Redis is not the source of truth: a lost message (Redis away)
 * only delays a command to the charger's next poll or heartbeat, and a stream event is lost as it would be to a
 * subscriber that reconnects.
 *
 * Messages made in one turn of the event loop travel as one PUBLISH, so a busy instance sends a few hundred
 * messages a second, not one per request. Telemetry, the bulk of it, is published only while another instance
 * has stream subscribers: each such instance says so every few seconds, and at once when a subscription starts
 * (`announceInterest`), so that an instance without subscribers neither sends nor parses the fleet's telemetry.
 */
export interface Relay {
  /** The notifier routes and services use: wakes local polls and those parked on other instances. */
  notifier: CommandNotifier;
  /**
   * Wraps the local sink (the stream) so that the other instances' subscribers hear the same events;
   * `hasSubscribers` tells whether this instance's stream has any (then it asks the others for telemetry).
   */
  events(local: PlatformEvents, hasSubscribers: () => boolean): PlatformEvents;
  /** A subscription starts here: from now on the others send telemetry (published at once, not batched). */
  announceInterest(): void;
  /** Messages published and received, and publishes that failed (Redis away): for /metrics. */
  stats(): { published: number; received: number; failed: number };
  close(): Promise<void>;
}

type Message =
  | { k: 'interest' }
  | { k: 'wake'; d: string }
  | { k: 'telemetry'; d: string; r: Parameters<PlatformEvents['telemetry']>[1] }
  | { k: 'deviceStatus'; d: string; s: 'online' | 'offline'; t: number }
  | { k: 'commandStatus'; c: Parameters<PlatformEvents['commandStatus']>[0]; t: number };

/** How often an instance with subscribers says so, and how long that holds without being said again. */
const ANNOUNCE_INTEREST_EVERY_MS = 3_000;
const INTEREST_HOLDS_MS = 10_000;

interface Envelope {
  /** The publishing instance: it ignores its own messages (it acted on them already). */
  i: string;
  m: Message[];
}

export async function createRelay(
  link: RedisLink,
  options: { namespace: string; instanceId: string; notifier: CommandNotifier },
): Promise<Relay> {
  const channel = `${options.namespace}:relay`;
  const local = options.notifier;
  let sink: PlatformEvents | undefined;
  let hasSubscribers = () => false;
  const counts = { published: 0, received: 0, failed: 0 };
  /** Other instances with stream subscribers, and until when their last word holds. */
  const interested = new Map<string, number>();
  const othersListen = () => {
    const now = Date.now();
    for (const [instance, until] of interested) {
      if (until > now) return true;
      interested.delete(instance);
    }
    return false;
  };

  let outbox: Message[] = [];
  const flush = () => {
    const m = outbox;
    outbox = [];
    if (!link.available()) {
      counts.failed += m.length;
      return;
    }
    const envelope: Envelope = { i: options.instanceId, m };
    link.client.publish(channel, JSON.stringify(envelope)).then(
      () => {
        counts.published += m.length;
      },
      () => {
        counts.failed += m.length;
      },
    );
  };
  const post = (message: Message) => {
    outbox.push(message);
    if (outbox.length === 1) setImmediate(flush);
  };

  const deliver = (from: string, message: Message) => {
    switch (message.k) {
      case 'interest':
        interested.set(from, Date.now() + INTEREST_HOLDS_MS);
        return;
      case 'wake':
        local.notify(message.d);
        return;
      case 'telemetry':
        sink?.telemetry(message.d, message.r);
        return;
      case 'deviceStatus':
        sink?.deviceStatus(message.d, message.s, message.t);
        return;
      case 'commandStatus':
        sink?.commandStatus(message.c, message.t);
        return;
    }
  };
  const onMessage = (from: string, text: string) => {
    if (from !== channel) return;
    let envelope: Envelope;
    try {
      envelope = JSON.parse(text) as Envelope;
    } catch {
      return;
    }
    if (envelope.i === options.instanceId || !Array.isArray(envelope.m)) return;
    counts.received += envelope.m.length;
    for (const message of envelope.m) deliver(envelope.i, message);
  };
  link.subscriber.on('message', onMessage);
  // Queued until connected when Redis is away at start: the instance serves meanwhile, on its own.
  link.subscriber.subscribe(channel).catch(() => undefined);
  const announceInterest = () => {
    if (!link.available()) return;
    const envelope: Envelope = { i: options.instanceId, m: [{ k: 'interest' }] };
    link.client.publish(channel, JSON.stringify(envelope)).catch(() => undefined);
  };
  const announcer = setInterval(() => {
    if (hasSubscribers()) announceInterest();
  }, ANNOUNCE_INTEREST_EVERY_MS);
  announcer.unref();

  return {
    notifier: {
      ...local,
      notify(deviceId) {
        local.notify(deviceId);
        post({ k: 'wake', d: deviceId });
      },
    },
    events(localSink, subscribers) {
      sink = localSink;
      hasSubscribers = subscribers;
      return {
        telemetry(deviceId, records) {
          localSink.telemetry(deviceId, records);
          if (othersListen()) post({ k: 'telemetry', d: deviceId, r: records });
        },
        deviceStatus(deviceId, status, atMs) {
          localSink.deviceStatus(deviceId, status, atMs);
          post({ k: 'deviceStatus', d: deviceId, s: status, t: atMs });
        },
        commandStatus(c, atMs) {
          localSink.commandStatus(c, atMs);
          const { command_id, device_id, command, status, reason } = c;
          post({ k: 'commandStatus', c: { command_id, device_id, command, status, reason }, t: atMs });
        },
      };
    },
    announceInterest,
    stats: () => ({ ...counts }),
    async close() {
      clearInterval(announcer);
      link.subscriber.off('message', onMessage);
      await link.subscriber.unsubscribe(channel).catch(() => undefined);
    },
  };
}
