import { ONLINE_WINDOW_SECONDS } from '../../shared/index.js';
import { isOnline, latestSeenState } from '../domain/liveness-rule.js';
import type { DeviceRow, Store } from '../storage/store.js';

/** A last-seen time is written again once it is this much newer than what the database holds. */
export const PERSIST_STALENESS_MS = 15_000;
/** Rows per write: a fleet's worth of updates in one write would hold the event loop for tens of ms. */
export const PERSIST_CHUNK = 250;

/**
 * Several instances (DESIGN.md §13): a charger's requests may reach any of them, so each instance's memory is
 * only part of the picture. `claim` says whether this instance is the one to announce a transition (the first
 * to report it; the others saw it announced already), so that subscribers hear each transition once.
 */
export interface SharedLiveness {
  claim(deviceId: string, status: 'online' | 'offline'): boolean | Promise<boolean>;
}

/**
 * Who is online (DESIGN.md §7), kept in memory so that the hot path never writes a row just to say "seen".
 * Last-seen times reach the database every few seconds, so liveness survives a restart: each device's when it
 * has moved on by `PERSIST_STALENESS_MS` (so after a crash the database is at most that far behind, well inside
 * the 90-s window), in writes of `PERSIST_CHUNK` rows that let requests in between. `flush()` writes every
 * pending time exactly, for queries that must agree with `isOnline`, and so does `close()`.
 * Transitions are reported to `onChange` (the live stream's device_status messages).
 *
 * With `shared` (several instances), a charger whose window ran out here is looked up in the database first:
 * if another instance has seen it since, this one forgets it instead of calling it offline; and each transition
 * is announced by the one instance that claims it.
 */
export function createLiveness(
  store: Store,
  now: () => number,
  onChange: (deviceId: string, status: 'online' | 'offline', atMs: number) => void = () => {},
  tickMs = 5_000,
  shared?: SharedLiveness,
) {
  const announce = (deviceId: string, status: 'online' | 'offline', atMs: number) => {
    if (!shared) return onChange(deviceId, status, atMs);
    const claimed = shared.claim(deviceId, status);
    if (claimed === true) onChange(deviceId, status, atMs);
    else if (claimed instanceof Promise)
      claimed.then((ok) => ok && onChange(deviceId, status, atMs)).catch(() => undefined);
  };
  const windowMs = ONLINE_WINDOW_SECONDS * 1000;
  const seen = new Map<string, { ms: number; offline: boolean }>();
  /** Devices seen since their time was last written. */
  const dirty = new Set<string>();
  /** The time last written for each device. */
  const written = new Map<string, number>();

  /** Writes the pending times (all of them, or only those `PERSIST_STALENESS_MS` ahead), chunk by chunk. */
  const persist = async (all: boolean) => {
    const due: Array<[string, number]> = [];
    for (const deviceId of dirty) {
      const ms = seen.get(deviceId)?.ms;
      const writtenMs = written.get(deviceId);
      if (ms === undefined) continue;
      if (all || writtenMs === undefined || ms - writtenMs >= PERSIST_STALENESS_MS) due.push([deviceId, ms]);
    }
    for (let i = 0; i < due.length; i += PERSIST_CHUNK) {
      const chunk = due.slice(i, i + PERSIST_CHUNK);
      await store.touchDevices(new Map(chunk));
      for (const [deviceId, ms] of chunk) {
        written.set(deviceId, ms);
        // Unless seen again while this chunk was being written, nothing is pending for it.
        if (seen.get(deviceId)?.ms === ms) dirty.delete(deviceId);
      }
    }
  };
  let persisting: Promise<void> | undefined;
  /** One persist at a time: a flush waits for a periodic one in progress, then writes what is left. */
  const persistOnce = (all: boolean): Promise<void> => {
    const run = async () => {
      if (persisting) await persisting.catch(() => undefined);
      await persist(all);
    };
    const p = run().finally(() => {
      if (persisting === p) persisting = undefined;
    });
    persisting = p;
    return p;
  };
  let confirming: Promise<void> | undefined;
  /** Devices whose window ran out since the last tick go offline. */
  const expire = () => {
    const t = now();
    const due: string[] = [];
    for (const [deviceId, e] of seen) {
      if (e.offline || t - e.ms <= windowMs) continue;
      if (shared) {
        due.push(deviceId);
        continue;
      }
      e.offline = true;
      onChange(deviceId, 'offline', e.ms + windowMs);
    }
    if (due.length > 0 && !confirming)
      confirming = confirmOffline(due).finally(() => (confirming = undefined));
  };
  /** Several instances: offline only if no other instance has seen the charger since (the stored row says). */
  const confirmOffline = async (due: readonly string[]) => {
    for (const deviceId of due) {
      const e = seen.get(deviceId);
      if (!e || e.offline) continue;
      const row = await store.getDevice(deviceId).catch(() => undefined);
      const latest = row ? latestSeenState(e, row) : { lastSeenMs: e.ms, offline: false };
      if (seen.get(deviceId) !== e || e.offline) continue; // seen again meanwhile
      if (isOnline(latest, now(), windowMs)) {
        // Another instance serves it now: its memory, not this one's, decides when it goes offline.
        seen.delete(deviceId);
        continue;
      }
      e.offline = true;
      announce(deviceId, 'offline', (latest.lastSeenMs ?? e.ms) + windowMs);
    }
  };
  const timer = setInterval(() => {
    expire();
    if (!persisting) persistOnce(false).catch(() => undefined);
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
        announce(deviceId, 'online', ms);
      }
      dirty.add(deviceId);
    },
    /**
     * A heartbeat with status `offline`: offline at once. `atMs` is the time the heartbeat is stored with: the
     * last-seen time written out must not be later than it, or the stored row would read as "seen after it said
     * goodbye", online (a one-millisecond race between two clock reads).
     */
    markOffline(deviceId: string, atMs: number = now()): void {
      const ms = atMs;
      const entry = seen.get(deviceId);
      seen.set(deviceId, { ms, offline: true });
      if (!entry?.offline) announce(deviceId, 'offline', ms);
    },
    /** From this instance's memory and the row, whichever is newer (another instance may have written it). */
    isOnline(device: DeviceRow): boolean {
      return isOnline(latestSeenState(seen.get(device.device_id), device), now(), windowMs);
    },
    onlineCount(): number {
      const t = now();
      let n = 0;
      for (const e of seen.values()) if (isOnline({ lastSeenMs: e.ms, offline: e.offline }, t, windowMs)) n++;
      return n;
    },
    /** Write pending last-seen times now, so that a database query agrees with `isOnline`. */
    flush(): Promise<void> {
      return persistOnce(true);
    },
    async close(): Promise<void> {
      clearInterval(timer);
      await confirming;
      await persistOnce(true);
    },
  };
}
export type Liveness = ReturnType<typeof createLiveness>;
