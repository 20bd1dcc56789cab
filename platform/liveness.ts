import { ONLINE_WINDOW_SECONDS } from '../shared/index.js';
import type { DeviceRow, Store } from './storage/store.js';

/**
 * Who is online (DESIGN.md §7), kept in memory so that the hot path never writes a row just to say "seen".
 * Last-seen times reach the database in one batched write every few seconds, so liveness survives a restart.
 * Transitions are reported to `onChange` (the live stream's device_status messages).
 */
export function createLiveness(
  store: Store,
  now: () => number,
  onChange: (deviceId: string, status: 'online' | 'offline', atMs: number) => void = () => {},
  tickMs = 5_000,
) {
  const windowMs = ONLINE_WINDOW_SECONDS * 1000;
  const seen = new Map<string, { ms: number; offline: boolean }>();
  let dirty = new Map<string, number>();

  const persist = async () => {
    if (dirty.size === 0) return;
    const batch = dirty;
    dirty = new Map();
    await store.touchDevices(batch);
  };
  /** Devices whose window ran out since the last tick go offline. */
  const expire = () => {
    const t = now();
    for (const [deviceId, e] of seen) {
      if (!e.offline && t - e.ms > windowMs) {
        e.offline = true;
        onChange(deviceId, 'offline', e.ms + windowMs);
      }
    }
  };
  const timer = setInterval(() => {
    expire();
    persist().catch(() => undefined);
  }, tickMs);
  timer.unref();

  return {
    /** An authenticated request arrived from this device. */
    markSeen(deviceId: string): void {
      const ms = now();
      const entry = seen.get(deviceId);
      if (entry && !entry.offline) {
        entry.ms = ms;
      } else {
        seen.set(deviceId, { ms, offline: false });
        onChange(deviceId, 'online', ms);
      }
      dirty.set(deviceId, ms);
    },
    /** A heartbeat with status `offline`: offline at once. */
    markOffline(deviceId: string): void {
      const ms = now();
      const entry = seen.get(deviceId);
      seen.set(deviceId, { ms, offline: true });
      if (!entry?.offline) onChange(deviceId, 'offline', ms);
    },
    isOnline(device: DeviceRow): boolean {
      const entry = seen.get(device.device_id);
      const lastMs = entry ? entry.ms : device.last_seen_ms;
      // Without an entry (after a restart): an offline heartbeat counts until a later request was seen.
      const offline = entry
        ? entry.offline
        : device.reported_status === 'offline' &&
          !(device.last_seen_ms !== null && device.last_seen_ms > (device.last_heartbeat_ms ?? 0));
      if (offline || lastMs === null) return false;
      return now() - lastMs <= windowMs;
    },
    onlineCount(): number {
      const t = now();
      let n = 0;
      for (const e of seen.values()) if (!e.offline && t - e.ms <= windowMs) n++;
      return n;
    },
    /** Write pending last-seen times now, so that a database query agrees with `isOnline`. */
    flush(): Promise<void> {
      return persist();
    },
    async close(): Promise<void> {
      clearInterval(timer);
      await persist();
    },
  };
}
export type Liveness = ReturnType<typeof createLiveness>;
