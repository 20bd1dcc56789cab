import type { Store } from './storage/store.js';

/**
 * The current secret generation of every device, in memory, so that checking a device token for revocation
 * costs a map lookup. Reloaded when another process (the admin CLI: `devices reset`) changes the database.
 */
export async function createDeviceCredentials(store: Store, pollMs = 1_000) {
  let generations = await store.loadSecretGenerations();
  let version = store.externalChangeVersion();
  let reloading = false;

  const timer = setInterval(() => {
    const v = store.externalChangeVersion();
    if (v === version || reloading) return;
    version = v;
    reloading = true;
    store
      .loadSecretGenerations()
      .then((g) => {
        generations = g;
      })
      .catch(() => undefined)
      .finally(() => {
        reloading = false;
      });
  }, pollMs);
  timer.unref();

  return {
    currentGeneration(deviceId: string): number | undefined {
      return generations.get(deviceId);
    },
    setGeneration(deviceId: string, gen: number): void {
      generations.set(deviceId, gen);
    },
    close(): void {
      clearInterval(timer);
    },
  };
}
export type DeviceCredentials = Awaited<ReturnType<typeof createDeviceCredentials>>;
