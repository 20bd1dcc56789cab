import type { Device } from '../../shared/resources.js';
import { type Api, describeError } from './api.js';
import {
  applyMessage,
  type CommandStatusMessage,
  type Devices,
  type FleetSummary,
  type StreamMessage,
  summarize,
} from './fleet.js';
import type { LiveStream } from './live-stream.js';

export interface SiteView {
  site_id: string;
  operator_id: string;
  name: string;
  timezone: string;
  device_count: number;
}

export interface HeardCommand extends CommandStatusMessage {
  /** Statuses in the order heard (`queued → delivered → accepted → succeeded`). */
  trail: readonly string[];
}

export interface Page<T> {
  total: number;
  page: number;
  size: number;
  items: T[];
}

export interface FleetSnapshot {
  loading: boolean;
  error: string | undefined;
  sites: readonly SiteView[];
  devices: Devices;
  summary: FleetSummary;
  /** More chargers than the overview loads (`MAX_DEVICES`): the counts cover those loaded. */
  truncated: boolean;
  /** What the stream said of each command, by command id: its latest status and every status heard. */
  commands: ReadonlyMap<string, HeardCommand>;
}

export interface FleetStore {
  snapshot(): FleetSnapshot;
  subscribe(listener: () => void): () => void;
  /** Loads sites and chargers (again) and subscribes the stream to every site. */
  load(): Promise<void>;
  /** Reads one charger again (what the stream does not carry: a connector's availability) and keeps it. */
  refreshDevice(deviceId: string): Promise<void>;
}

/** Every page of the operator's sites the stream can follow (100 site ids per subscription). */
const MAX_SITES = 100;
/** Ten pages of devices; beyond that the overview says it shows part of the fleet. */
const MAX_DEVICES = 1000;
/** Re-render at most this often, however many telemetry messages arrive. */
const PUBLISH_EVERY_MS = 250;
const KEEP_COMMANDS = 500;

export function createFleetStore(api: Api, live: LiveStream): FleetStore {
  const listeners = new Set<() => void>();
  let snap: FleetSnapshot = {
    loading: true,
    error: undefined,
    sites: [],
    devices: new Map(),
    summary: summarize(new Map()),
    truncated: false,
    commands: new Map(),
  };
  let publishTimer: ReturnType<typeof setTimeout> | undefined;
  const fetching = new Set<string>();

  const publish = (now = false) => {
    if (now) {
      clearTimeout(publishTimer);
      publishTimer = undefined;
      for (const l of listeners) l();
      return;
    }
    publishTimer ??= setTimeout(() => {
      publishTimer = undefined;
      for (const l of listeners) l();
    }, PUBLISH_EVERY_MS);
  };
  const update = (patch: Partial<FleetSnapshot>, now = false) => {
    snap = { ...snap, ...patch };
    if (patch.devices) snap.summary = summarize(snap.devices);
    publish(now);
  };

  /** A charger heard on the stream but not loaded (registered since): fetched once and added. */
  const fetchDevice = (deviceId: string) => {
    if (fetching.has(deviceId)) return;
    fetching.add(deviceId);
    api.get<Device>(`/v1/operator/devices/${encodeURIComponent(deviceId)}`).then(
      (device) => {
        const devices = new Map(snap.devices);
        devices.set(device.device_id, device);
        update({ devices });
      },
      () => fetching.delete(deviceId),
    );
  };

  live.onMessage((m: StreamMessage) => {
    if (m.type === 'command_status') {
      const commands = new Map(snap.commands);
      const before = commands.get(m.command_id);
      commands.delete(m.command_id);
      const trail = before?.trail.includes(m.status) ? before.trail : [...(before?.trail ?? []), m.status];
      commands.set(m.command_id, { ...m, trail });
      if (commands.size > KEEP_COMMANDS) commands.delete(commands.keys().next().value as string);
      update({ commands });
      return;
    }
    const { devices, unknown } = applyMessage(snap.devices, m);
    if (unknown && !snap.loading) fetchDevice(unknown);
    if (devices !== snap.devices) update({ devices });
  });

  return {
    snapshot: () => snap,
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async refreshDevice(deviceId) {
      const device = await api.get<Device>(`/v1/operator/devices/${encodeURIComponent(deviceId)}`);
      const devices = new Map(snap.devices);
      devices.set(device.device_id, device);
      update({ devices }, true);
    },
    async load() {
      update({ loading: true, error: undefined }, true);
      try {
        const sites = await api.get<Page<SiteView>>('/v1/operator/sites', { size: MAX_SITES });
        const devices = new Map<string, Device>();
        let total = 0;
        for (let page = 1; devices.size < MAX_DEVICES; page++) {
          const p = await api.get<Page<Device>>('/v1/operator/devices', { page, size: 100 });
          total = p.total;
          for (const d of p.items) devices.set(d.device_id, d);
          if (p.items.length < p.size || devices.size >= total) break;
        }
        fetching.clear();
        update({ loading: false, sites: sites.items, devices, truncated: total > devices.size }, true);
        live.subscribeSites(sites.items.map((s) => s.site_id));
      } catch (err) {
        update({ loading: false, error: describeError(err) }, true);
      }
    },
  };
}
