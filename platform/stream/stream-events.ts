import type { TelemetryRecord } from '../../shared/index.js';
import { toTimestamp } from '../../shared/index.js';
import type { PlatformEvents } from '../services/platform-events.js';
import type { PrincipalDirectory } from '../services/principal-directory.js';
import type { Subscriber } from './subscribers.js';

/**
 * What the stream's subscribers hear (DESIGN.md §8): each event goes to the subscribers of its device and of
 * its device's site who may see it now (tenancy checked on every message against the principal directory), one
 * JSON serialisation per event whatever the number of subscribers.
 */
export function createStreamEvents(
  directory: PrincipalDirectory,
  subscribers: {
    byDevice: ReadonlyMap<string, Set<Subscriber>>;
    bySite: ReadonlyMap<string, Set<Subscriber>>;
    send: (s: Subscriber, text: string) => void;
  },
): PlatformEvents {
  const { byDevice, bySite, send } = subscribers;
  /** Subscribers that may see this device now. */
  const audienceOf = (deviceId: string): Subscriber[] => {
    const entry = directory.device(deviceId);
    if (!entry?.operator_id) return [];
    const out: Subscriber[] = [];
    const direct = byDevice.get(deviceId);
    const site = entry.site_id ? bySite.get(entry.site_id) : undefined;
    for (const set of [direct, site]) {
      if (!set) continue;
      for (const s of set) if (s.operatorIds.includes(entry.operator_id) && !out.includes(s)) out.push(s);
    }
    return out;
  };

  /**
   * Runs `publish` once the device's tenancy is known here. An event relayed from another instance may name a
   * device registered there a moment ago, before this instance's directory heard of it: it is looked up once
   * (one lookup per device however many events wait for it), not dropped.
   */
  const refreshing = new Map<string, Promise<void>>();
  const whenKnown = (deviceId: string, publish: () => void) => {
    if (directory.device(deviceId)) return publish();
    let known = refreshing.get(deviceId);
    if (!known) {
      known = directory
        .refreshDevice(deviceId)
        .catch(() => undefined)
        .finally(() => refreshing.delete(deviceId));
      refreshing.set(deviceId, known);
    }
    void known.then(publish);
  };

  const local: PlatformEvents = {
    telemetry(deviceId, records: readonly TelemetryRecord[]) {
      const audience = audienceOf(deviceId);
      if (audience.length === 0) return;
      const siteId = directory.device(deviceId)?.site_id ?? undefined;
      for (const r of records) {
        const text = JSON.stringify({ type: 'telemetry', device_id: deviceId, site_id: siteId, ...r });
        for (const s of audience) send(s, text);
      }
    },
    deviceStatus(deviceId, status, atMs) {
      const audience = audienceOf(deviceId);
      if (audience.length === 0) return;
      const text = JSON.stringify({
        type: 'device_status',
        device_id: deviceId,
        status,
        at: toTimestamp(atMs),
      });
      for (const s of audience) send(s, text);
    },
    commandStatus(c, atMs) {
      const audience = audienceOf(c.device_id);
      if (audience.length === 0) return;
      const message: Record<string, unknown> = {
        type: 'command_status',
        command_id: c.command_id,
        device_id: c.device_id,
        command: c.command,
        status: c.status,
        at: toTimestamp(atMs),
      };
      if (c.reason) message.reason = c.reason;
      const text = JSON.stringify(message);
      for (const s of audience) send(s, text);
    },
  };
  // Nobody subscribed (the usual case on the ingest path): nothing to look up, nothing allocated.
  const nobody = () => byDevice.size === 0 && bySite.size === 0;
  return {
    telemetry(deviceId, records) {
      if (!nobody()) whenKnown(deviceId, () => local.telemetry(deviceId, records));
    },
    deviceStatus(deviceId, status, atMs) {
      if (!nobody()) whenKnown(deviceId, () => local.deviceStatus(deviceId, status, atMs));
    },
    commandStatus(c, atMs) {
      if (!nobody()) whenKnown(c.device_id, () => local.commandStatus(c, atMs));
    },
  };
}
