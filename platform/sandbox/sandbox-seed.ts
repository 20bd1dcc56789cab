import type { ChargingRecord, TelemetryRecord } from '../../shared/index.js';
import { toTimestamp } from '../../shared/index.js';
import { newId } from '../domain/ids.js';
import { createClient } from '../services/client-secrets.js';
import { registerCharger } from '../services/registration-service.js';
import type { PlatformKeys } from '../storage/platform-keys.js';
import type { Store } from '../storage/store.js';

/**
 * Synthetic data for `--env sandbox` (spec: "the test environment uses synthetic data"): two operators so that
 * tenancy can be seen, sites, chargers with history, charging records, and one ready-to-use API client.
 * Seeded once per data directory; later starts reuse it.
 */
export interface SandboxInfo {
  operatorId: string;
  defaultSiteId: string;
  clientId: string;
  clientSecret: string;
  exampleDeviceId: string;
}

const SEEDED = 'sandbox.seeded';
const SEEDING = 'sandbox.seeding';

/** Small deterministic PRNG so every sandbox looks alike. */
function mulberry32(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SEED_STEP_MS = 5 * 60_000;
const SEED_STEP_HOURS = SEED_STEP_MS / 3_600_000;
const SEED_SAMPLES = 86_400_000 / SEED_STEP_MS;

const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;

export async function ensureSandbox(store: Store, keys: PlatformKeys, nowMs: number): Promise<SandboxInfo> {
  const existing = await store.getSetting(SEEDED);
  if (existing) {
    const info = JSON.parse(existing) as Omit<SandboxInfo, 'clientSecret'>;
    const client = await store.getClient(info.clientId);
    if (!client) throw new Error('sandbox client is missing from the data directory');
    return { ...info, clientSecret: keys.openSecret(client.secret_sealed) };
  }

  // Seeding takes many writes; a start interrupted half-way leaves this marker without SEEDED.
  if (await store.getSetting(SEEDING)) {
    throw new Error(
      'an earlier sandbox start was interrupted while seeding: remove the data directory and start again',
    );
  }
  await store.setSetting(SEEDING, toTimestamp(nowMs));
  const rand = mulberry32(20261122);
  const operator = await store.createOperator('Sandbox Energy');
  const depot = await store.createSite({
    operator_id: operator.operator_id,
    name: 'Sandbox Depot',
    timezone: 'Europe/Berlin',
  });
  const harbour = await store.createSite({
    operator_id: operator.operator_id,
    name: 'Sandbox Harbour',
    timezone: 'Europe/Amsterdam',
  });
  const other = await store.createOperator('Other Tenant Ltd');
  const otherSite = await store.createSite({
    operator_id: other.operator_id,
    name: 'Other Tenant Yard',
    timezone: 'America/New_York',
  });

  const fleet = [
    { site: depot.site_id, model: 'SimCharger AC22', power: 22, v2g: false },
    { site: depot.site_id, model: 'SimCharger AC22', power: 22, v2g: false },
    { site: depot.site_id, model: 'SimCharger DC50 V2G', power: 50, v2g: true },
    { site: harbour.site_id, model: 'SimCharger AC11', power: 11, v2g: false },
    { site: harbour.site_id, model: 'SimCharger DC50 V2G', power: 50, v2g: true },
    { site: otherSite.site_id, model: 'SimCharger AC22', power: 22, v2g: false },
  ];
  const deviceIds: string[] = [];
  const records: ChargingRecord[] = [];
  for (const [i, spec] of fleet.entries()) {
    const outcome = await registerCharger(
      { store, keys },
      {
        sn: `SANDBOX-${String(i + 1).padStart(4, '0')}`,
        model: spec.model,
        manufacturer: 'Sandbox Systems',
        firmware_version: '1.4.2',
        connectors: [1, 2].map((connector_id) => ({
          connector_id,
          max_power_kw: spec.power,
          v2g_capable: spec.v2g,
        })),
      },
      { registration: 'open', defaultSiteId: spec.site },
    );
    if (outcome.kind !== 'registered') throw new Error(`sandbox seed: ${outcome.kind}`);
    const deviceId = outcome.device.device_id;
    deviceIds.push(deviceId);

    // 24 hours of telemetry every 5 minutes per connector (the energy rollups integrate gaps of at most 5 minutes,
    // domain/energy.ts), ending idle (the seeded chargers are offline).
    for (const connector_id of [1, 2]) {
      const telemetry: TelemetryRecord[] = [];
      let soc = 20 + Math.floor(rand() * 30);
      let energy = 0;
      for (let k = SEED_SAMPLES; k >= 0; k--) {
        const ts = nowMs - k * SEED_STEP_MS;
        const charging = rand() < 0.45 && soc < 95;
        const discharging = !charging && spec.v2g && rand() < 0.1 && soc > 40;
        const power = charging
          ? round(spec.power * (0.6 + 0.4 * rand()))
          : discharging
            ? -round(spec.power * 0.5)
            : 0;
        if (charging) {
          energy = round(energy + power * SEED_STEP_HOURS, 3);
          soc = Math.min(100, soc + Math.round((power * SEED_STEP_HOURS) / 0.6));
        } else if (discharging) {
          soc = Math.max(0, soc + Math.round((power * SEED_STEP_HOURS) / 0.6));
        } else if (rand() < 0.1) {
          energy = 0;
          soc = 15 + Math.floor(rand() * 40);
        }
        const voltage = round(225 + rand() * 10, 1);
        const temperature = round(18 + rand() * 15, 1);
        if (k === 0) {
          // The last report before the charger went offline ends its session: an offline charger's connectors
          // read `unavailable` (DESIGN.md §7), and their last readings must not show power still flowing.
          telemetry.push({
            timestamp: toTimestamp(ts),
            connector_id,
            state: 'idle',
            voltage,
            current: 0,
            power: 0,
            energy_delivered: 0,
            temperature,
          });
          continue;
        }
        telemetry.push({
          timestamp: toTimestamp(ts),
          connector_id,
          state: charging ? 'charging' : discharging ? 'discharging' : 'idle',
          voltage,
          current: round((power * 1000) / voltage / 3, 1),
          power,
          energy_delivered: energy,
          soc,
          temperature,
        });
      }
      await store.recordTelemetry(deviceId, telemetry, nowMs);
    }

    // Ten sessions per charger over the last week.
    for (let s = 0; s < 10; s++) {
      const start = nowMs - Math.floor(rand() * 7 * 86_400_000) - 3_600_000;
      const hours = 0.5 + rand() * 4;
      const avg = round(spec.power * (0.5 + 0.4 * rand()));
      const energy = round(avg * hours, 3);
      const meterStart = round(1000 + rand() * 20_000, 3);
      const socStart = 10 + Math.floor(rand() * 40);
      records.push({
        record_id: newId('rec'),
        device_id: deviceId,
        connector_id: 1 + Math.floor(rand() * 2),
        start_time: toTimestamp(start),
        end_time: toTimestamp(start + hours * 3_600_000),
        energy,
        max_power: round(Math.min(spec.power, avg * 1.2)),
        avg_power: avg,
        cost: round(energy * 0.35),
        meter_start: meterStart,
        meter_end: round(meterStart + energy, 3),
        vehicle_info: {
          vin: `WSANDBOX${String(i * 10 + s).padStart(9, '0')}`,
          soc_start: socStart,
          soc_end: Math.min(100, socStart + 40),
        },
      });
    }
  }
  await store.insertChargingRecords(records);

  const { client, secret } = await createClient(
    { store, keys },
    {
      operator_ids: [operator.operator_id],
      scopes: ['read', 'write'],
    },
  );
  const info = {
    operatorId: operator.operator_id,
    defaultSiteId: depot.site_id,
    clientId: client.client_id,
    exampleDeviceId: deviceIds[0]!,
  };
  await store.setSetting(SEEDED, JSON.stringify(info));
  return { ...info, clientSecret: secret };
}
