import { ONLINE_WINDOW_SECONDS } from '../shared/index.js';
import type { DeviceRow, Store } from './storage/store.js';

/**
 * Who is online (DESIGN.md §7), kept in memory so that the hot path never writes a row just to say "seen".
 * Last-seen times reach the database in one batched write every few seconds, so liveness survives a restart.
 */
export function createLiveness(store: Store, now: () => number, persistEveryMs = 5_000) {
  const seen = new Map<string, { ms: number; offline: boolean }>();
  let dirty = new Map<string, number>();

  const persist = async () => {
    if (dirty.size === 0) return;
    const batch = dirty;
    dirty = new Map();
    await store.touchDevices(batch);
  };
  const timer = setInterval(() => {
    persist().catch(() => undefined);
  }, persistEveryMs);
  timer.unref();

  return {
    /** An authenticated request arrived from this device. */
    markSeen(deviceId: string): void {
      const ms = now();
      seen.set(deviceId, { ms, offline: false });
      dirty.set(deviceId, ms);
    },
    /** A heartbeat with status `offline`: offline at once. */
    markOffline(deviceId: string): void {
      seen.set(deviceId, { ms: now(), offline: true });
    },
    isOnline(device: DeviceRow): boolean {
      const entry = seen.get(device.device_id);
      const lastMs = entry ? entry.ms : device.last_seen_ms;
      const offline = entry ? entry.offline : device.reported_status === 'offline';
      if (offline || lastMs === null) return false;
      return now() - lastMs <= ONLINE_WINDOW_SECONDS * 1000;
    },
    onlineCount(): number {
      const t = now();
      let n = 0;
      for (const e of seen.values()) if (!e.offline && t - e.ms <= ONLINE_WINDOW_SECONDS * 1000) n++;
      return n;
    },
    async close(): Promise<void> {
      clearInterval(timer);
      await persist();
    },
  };
}
export type Liveness = ReturnType<typeof createLiveness>;
