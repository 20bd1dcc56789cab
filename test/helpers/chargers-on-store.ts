import type { RegisterInput, Store } from '../../platform/storage/store.js';
import type { TelemetryRecord } from '../../shared/index.js';
import type { Backend } from './backends.js';
import { registerOnStore } from './sealed-writes.js';
import { storePerTest } from './store-per-test.js';

/**
 * Operators, sites, chargers and telemetry made straight on a store, for the repository contract of the
 * directory, devices and telemetry (store-contract-directory, -devices, -device-tenancy, -telemetry).
 */

/** The contract's clock starts here on every test. */
export const T0 = Date.UTC(2030, 0, 15, 12);
/** The online window the liveness cases use. */
export const WINDOW_MS = 60_000;

export function charger(sn: string, extra: Partial<RegisterInput> = {}): RegisterInput {
  return { sn, model: 'M1', manufacturer: 'Acme', firmware_version: '1.0.0', ...extra };
}

export function record(
  connectorId: number,
  tsMs: number,
  extra: Partial<TelemetryRecord> = {},
): TelemetryRecord {
  return {
    timestamp: new Date(tsMs).toISOString(),
    connector_id: connectorId,
    state: 'charging',
    power: 7,
    ...extra,
  };
}

/** An operator with one site; `tick` moves the test's clock on after each. */
export async function operatorWithSiteOn(store: Store, tick: () => void, name = 'A') {
  const op = await store.createOperator(name);
  tick();
  const site = await store.createSite({
    operator_id: op.operator_id,
    name: `${name}-site`,
    timezone: 'UTC',
  });
  tick();
  return { op, site };
}

/** A charger registered under open registration, in `siteId` if given. */
export async function registeredOn(
  store: Store,
  sn: string,
  siteId?: string,
  extra: Partial<RegisterInput> = {},
) {
  const out = await registerOnStore(store, charger(sn, extra), {
    registration: 'open',
    defaultSiteId: siteId,
  });
  if (out.kind !== 'registered') throw new Error(`${sn}: ${out.kind}`);
  return out;
}

/** A store per test at T0 (storePerTest), with operatorWithSite and registered on it. */
export function chargersOnStore(backend: Backend) {
  const ctx = storePerTest(backend, T0);
  return Object.assign(ctx, {
    operatorWithSite: (name = 'A') => operatorWithSiteOn(ctx.store, () => ctx.tick(), name),
    registered: (sn: string, siteId?: string, extra: Partial<RegisterInput> = {}) =>
      registeredOn(ctx.store, sn, siteId, extra),
  });
}
