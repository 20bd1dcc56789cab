import { expect } from 'vitest';
import { createTenant, type HttpResult, type RegisteredDevice, type TestPlatform } from './platform.js';

/**
 * The calls of the further-endpoints tests (DESIGN.md §9; further-endpoints and its -commands, -energy,
 * -records, -telemetry-and-firmware parts) on the platform that `platform()` returns (each file starts its own in
 * beforeAll): tenants, serial numbers, an operator's GET, a charger's heartbeat and telemetry batch. The fake
 * clock only moves forward.
 */

export type Tenant = Awaited<ReturnType<typeof createTenant>>;

// biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
export async function okData(res: Promise<HttpResult>): Promise<any> {
  const r = await res;
  if (r.status !== 200) throw new Error(`expected 200, got ${r.status} ${r.text}`);
  expect(r.body.code).toBe(0);
  expect(r.body.message).toBe('success');
  return r.body.data;
}
export const isoAt = (ms: number) => new Date(ms).toISOString();
export const byId = (a: RegisteredDevice, b: RegisteredDevice) => (a.deviceId < b.deviceId ? -1 : 1);

export function furtherCalls(platform: () => TestPlatform) {
  const advance = (ms: number): void => platform().advance(ms);
  const platformNow = (): number => platform().now();
  const isoNow = () => isoAt(platformNow());

  let counter = 0;
  function sn(): string {
    counter += 1;
    return `FE-${process.pid}-${counter}-${Math.random().toString(36).slice(2, 8)}`;
  }
  async function tenant() {
    counter += 1;
    return createTenant(platform(), `further-${counter}`);
  }

  const get = (t: Tenant, path: string) => platform().http.get(path, { token: t.token });
  const heartbeat = (d: RegisteredDevice, status = 'online') =>
    platform().http.post('/v1/device/heartbeat', {
      token: d.token,
      json: { timestamp: isoNow(), status, fault_code: 0 },
    });
  const batch = (d: RegisteredDevice, records: unknown[]) =>
    platform().http.post('/v1/device/telemetry/batch', { token: d.token, json: { records } });
  // biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
  const deviceView = async (t: Tenant, d: RegisteredDevice): Promise<any> =>
    okData(get(t, `/v1/operator/devices/${d.deviceId}`));

  return { advance, platformNow, isoNow, sn, tenant, get, heartbeat, batch, deviceView };
}
