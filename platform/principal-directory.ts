import type { Store } from './storage/store.js';

/**
 * What the hot path needs to know about devices and clients, in memory: a device's secret generation (token
 * revocation), its site and operator (tenancy of stream messages), and who must sign requests. Reloaded when
 * another process (the admin CLI) changes the database, which SQLite's `data_version` tells us cheaply.
 */
export interface DeviceEntry {
  device_id: string;
  secret_gen: number;
  secret_sealed: string | null;
  require_signature: boolean;
  site_id: string | null;
  operator_id: string | null;
}
export interface ClientEntry {
  client_id: string;
  secret_sealed: string;
  require_signature: boolean;
  operator_ids: string[];
}

export async function createPrincipalDirectory(store: Store, pollMs = 1_000) {
  let devices = new Map<string, DeviceEntry>();
  let clients = new Map<string, ClientEntry>();
  const load = async () => {
    const snapshot = await store.loadDirectory();
    devices = new Map(snapshot.devices.map((d) => [d.device_id, d]));
    clients = new Map(snapshot.clients.map((c) => [c.client_id, c]));
  };
  await load();
  let version = store.externalChangeVersion();
  let reloading = false;
  const listeners = new Set<() => void>();

  const timer = setInterval(() => {
    const v = store.externalChangeVersion();
    if (v === version || reloading) return;
    version = v;
    reloading = true;
    load()
      .then(() => {
        for (const l of listeners) l();
      })
      .catch(() => undefined)
      .finally(() => {
        reloading = false;
      });
  }, pollMs);
  timer.unref();

  return {
    device(deviceId: string): DeviceEntry | undefined {
      return devices.get(deviceId);
    },
    client(clientId: string): ClientEntry | undefined {
      return clients.get(clientId);
    },
    /** This process changed a device (registration, rotation): refresh its entry now. */
    async refreshDevice(deviceId: string): Promise<void> {
      const entry = await store.loadDeviceEntry(deviceId);
      if (entry) devices.set(deviceId, entry);
      else devices.delete(deviceId);
    },
    /** A client just authenticated with its secret: make sure its entry is current. */
    async refreshClient(clientId: string): Promise<void> {
      const entry = await store.loadClientEntry(clientId);
      if (entry) clients.set(clientId, entry);
      else clients.delete(clientId);
    },
    onReload(listener: () => void): () => void {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close(): void {
      clearInterval(timer);
      listeners.clear();
    },
  };
}
export type PrincipalDirectory = Awaited<ReturnType<typeof createPrincipalDirectory>>;
