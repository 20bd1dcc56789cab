import type { ClientEntry, DeviceEntry, Store } from '../storage/store.js';

export type { ClientEntry, DeviceEntry } from '../storage/store.js';

/**
 * What the hot path needs to know about devices and clients, in memory: a device's secret generation and the
 * age of a pending rotation (token revocation), its site and operator (tenancy of stream messages), a client's
 * status, secret generation and the end of its rotation's grace (domain/client-credentials.ts), and who must
 * sign requests. Revoked clients stay in it, so that their tokens are refused without a database read. Reloaded when
 * another process (the admin CLI) or instance changes the database, which `store.externalChangeVersion()` tells
 * cheaply (SQLite's `data_version`, PostgreSQL's NOTIFY).
 */
export async function createPrincipalDirectory(store: Store, pollMs = 1_000) {
  let devices = new Map<string, DeviceEntry>();
  let clients = new Map<string, ClientEntry>();
  // Entries refreshed while a reload runs. The reload's snapshot may have been read before the change that
  // refreshed them (a registration committing meanwhile): they are laid over it, or the new device would be
  // unknown until the next reload. A refresh older than the snapshot is corrected by the reload its own
  // change announces.
  let refreshedDuringLoad:
    | { devices: Map<string, DeviceEntry | undefined>; clients: Map<string, ClientEntry | undefined> }
    | undefined;
  const load = async () => {
    const refreshed = { devices: new Map(), clients: new Map() };
    refreshedDuringLoad = refreshed;
    try {
      const snapshot = await store.loadDirectory();
      const nextDevices = new Map(snapshot.devices.map((d) => [d.device_id, d]));
      const nextClients = new Map(snapshot.clients.map((c) => [c.client_id, c]));
      for (const [id, entry] of refreshed.devices) setOrDelete(nextDevices, id, entry);
      for (const [id, entry] of refreshed.clients) setOrDelete(nextClients, id, entry);
      devices = nextDevices;
      clients = nextClients;
    } finally {
      if (refreshedDuringLoad === refreshed) refreshedDuringLoad = undefined;
    }
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
      setOrDelete(devices, deviceId, entry);
      refreshedDuringLoad?.devices.set(deviceId, entry);
    },
    /** A client just authenticated with its secret: make sure its entry is current. */
    async refreshClient(clientId: string): Promise<void> {
      const entry = await store.loadClientEntry(clientId);
      setOrDelete(clients, clientId, entry);
      refreshedDuringLoad?.clients.set(clientId, entry);
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

function setOrDelete<T>(map: Map<string, T>, id: string, entry: T | undefined): void {
  if (entry) map.set(id, entry);
  else map.delete(id);
}
