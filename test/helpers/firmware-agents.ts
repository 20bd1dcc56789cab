import { createHash, type KeyObject, randomBytes, sign } from 'node:crypto';
import { Agent } from 'undici';
import { type AgentRuntime, startAgent } from '../../agent/runtime/agent-runtime.js';
import {
  createMemoryRateLimitStore,
  type RateLimitStore,
} from '../../platform/http/rate-limit/rate-limiter.js';
import { artifactSigningText } from '../../shared/index.js';
import {
  createSimulatedHal,
  type SimulatedHal,
  type SimulatedHalOptions,
} from '../../simulators/simulated-hal.js';
import { offsetClock, quietLogger, tempDir, waitFor } from './agent.js';
import type { TestPlatform } from './platform.js';

/**
 * Real agents (in process, on the simulated HAL) that trust an OEM's Ed25519 update key, against a real platform
 * over HTTPS; and the OEM's side: a firmware image signed with that key and uploaded as an artifact. For the
 * end-to-end firmware update tests (DESIGN.md §19).
 */

/**
 * The platform's rate limits, except the operator's reads: a test polls an update's view faster than 60 a minute,
 * while the agents stay under the device limits they meet in the field.
 */
export function rateLimitsButOperatorReads(): RateLimitStore {
  const real = createMemoryRateLimitStore();
  const free = (limit: number) => ({ allowed: true, limit, remaining: limit, resetSeconds: 1 });
  return {
    hit: (key, limit, windowMs, nowMs) =>
      key.startsWith('operatorQuery:') ? free(limit) : real.hit(key, limit, windowMs, nowMs),
    peek: (key, limit, windowMs, nowMs) =>
      key.startsWith('operatorQuery:') ? free(limit) : real.peek(key, limit, windowMs, nowMs),
    close: () => real.close(),
  };
}

export interface SimulatedCharger {
  deviceId: string;
  hal: SimulatedHal;
  runtime: AgentRuntime;
}

export interface ChargerGroup {
  chargers: SimulatedCharger[];
  stop(): Promise<void>;
}

/**
 * One agent per entry of `hals` (each the simulated HAL's options beyond the defaults here: one connector,
 * vehicles by hand, no random faults, a firmware install of 300 ms), registered and assigned to `siteId`.
 */
export async function startChargers(
  tp: TestPlatform,
  opts: {
    siteId: string;
    updateKey: KeyObject;
    tag: string;
    hals: SimulatedHalOptions[];
    /** Per charger: how far its wall clock runs ahead of the system's (its timers stay real). */
    clockOffsetsMs?: number[];
  },
): Promise<ChargerGroup> {
  const started: Array<{ runtime: AgentRuntime; dispatcher: Agent; remove(): void }> = [];
  const stop = async () => {
    for (const s of started) {
      await s.runtime.stop();
      await s.dispatcher.close();
      s.remove();
    }
  };
  const chargers: SimulatedCharger[] = [];
  try {
    for (const [i, extra] of opts.hals.entries()) {
      const hal = createSimulatedHal({
        connectors: 1,
        seed: 100 + i,
        vehicles: 'manual',
        meanTimeBetweenFaultsMs: Number.POSITIVE_INFINITY,
        tickIntervalMs: 100,
        firmwareInstallMs: 300,
        ...extra,
      });
      const tmp = tempDir('fw-agent-');
      const dispatcher = new Agent({ connect: { ca: tp.ca } });
      const offset = opts.clockOffsetsMs?.[i];
      const runtime = await startAgent({
        ...(offset !== undefined ? { clock: offsetClock(() => offset) } : {}),
        config: {
          dataDir: tmp.dir,
          platformUrl: tp.url,
          sn: `FW-${opts.tag}-${i}-${process.pid}`,
          updateKeys: [opts.updateKey],
        },
        hal,
        logger: quietLogger(),
        dispatcher,
        tuning: {
          heartbeatIntervalMs: 500,
          pollWaitSeconds: 1,
          backoff: { baseMs: 50, capMs: 500 },
          flushPaceMs: 10,
          controlSafetyIntervalMs: 500,
        },
      });
      started.push({ runtime, dispatcher, remove: tmp.remove });
      const identity = await runtime.registered;
      if (!identity) throw new Error(`charger ${i} of ${opts.tag} did not register`);
      await tp.store.assignDevice(identity.deviceId, opts.siteId);
      chargers.push({ deviceId: identity.deviceId, hal, runtime });
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { chargers, stop };
}

/** A firmware image of `size` random bytes signed with `privateKey`, uploaded by the operator's client. */
export async function uploadSignedFirmware(
  tp: TestPlatform,
  token: string,
  privateKey: KeyObject,
  version: string,
  size = 64 * 1024,
): Promise<{ artifact_id: string; sha256: string; size: number }> {
  const file = randomBytes(size);
  const manifest = {
    kind: 'firmware' as const,
    version,
    target: '',
    sha256: createHash('sha256').update(file).digest('hex'),
    size: file.length,
  };
  const signature = sign(null, Buffer.from(artifactSigningText(manifest)), privateKey).toString('base64');
  const res = await tp.http.post(`/v1/operator/artifacts?kind=firmware&version=${version}`, {
    token,
    raw: file,
    contentType: 'application/octet-stream',
    headers: { 'x-artifact-signature': signature },
  });
  if (res.status !== 200) throw new Error(`upload: ${res.status} ${res.text}`);
  if (res.body.data.sha256 !== manifest.sha256) throw new Error('the platform measured another sha256');
  return res.body.data;
}

export interface UpdateDeviceView {
  device_id: string;
  batch: number;
  state: string;
  command_id?: string;
  version_before?: string;
  version_after?: string;
  reason?: string;
}

export interface UpdateView {
  update_id: string;
  status: string;
  reason?: string;
  progress: Record<string, number>;
  batches: Array<{ index: number; status: string; device_count: number }>;
  devices: UpdateDeviceView[];
}

/** The operator's view of an update (GET /v1/operator/updates/{id}). */
export async function getUpdate(tp: TestPlatform, token: string, updateId: string): Promise<UpdateView> {
  const res = await tp.http.get(`/v1/operator/updates/${updateId}`, { token });
  if (res.status !== 200) throw new Error(`GET update: ${res.status} ${res.text}`);
  return res.body.data as UpdateView;
}

/**
 * Runs the platform's update gate (as its 5-second timer would, only sooner) and reads the view, until `done`
 * accepts it or `timeoutMs` passes; returns the last view either way, for the assertions to name what is wrong.
 */
export function waitForUpdate(
  tp: TestPlatform,
  token: string,
  updateId: string,
  done: (view: UpdateView) => boolean,
  timeoutMs = 15_000,
): Promise<UpdateView> {
  return waitFor(
    async () => {
      await tp.platform.sweep();
      return getUpdate(tp, token, updateId);
    },
    done,
    timeoutMs,
    100,
  );
}

export const stateOf = (view: UpdateView, deviceId: string): string | undefined =>
  view.devices.find((d) => d.device_id === deviceId)?.state;

export const deviceOf = (view: UpdateView, deviceId: string): UpdateDeviceView | undefined =>
  view.devices.find((d) => d.device_id === deviceId);

export interface FirmwareReport {
  status: string;
  version?: string;
  message?: string;
  timestamp: string;
  update_id?: string;
  report_id?: string;
}

/** A charger's firmware reports about `updateId`, newest first, as the operator pages them. */
export async function firmwareHistory(
  tp: TestPlatform,
  token: string,
  deviceId: string,
  updateId: string,
): Promise<FirmwareReport[]> {
  const res = await tp.http.get(`/v1/operator/devices/${deviceId}/firmware?size=100`, { token });
  if (res.status !== 200) throw new Error(`GET firmware: ${res.status} ${res.text}`);
  return (res.body.data.items as FirmwareReport[]).filter((r) => r.update_id === updateId);
}
