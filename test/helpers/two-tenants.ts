import {
  createTenant,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from './platform.js';

/** The set-up of the operator API tests: a platform with two tenants, each with one charger in its site. */
export interface TwoTenants {
  tp: TestPlatform;
  /** 'Alpha Energy', whose site holds `dev` (OP-SN-1). */
  tenant: Awaited<ReturnType<typeof createTenant>>;
  /** 'Beta Charging', whose site holds `otherDev` (OP-SN-2). */
  other: Awaited<ReturnType<typeof createTenant>>;
  dev: RegisteredDevice;
  otherDev: RegisteredDevice;
}

export async function startTwoTenants(): Promise<TwoTenants> {
  const tp = await startTestPlatform();
  const tenant = await createTenant(tp, 'Alpha Energy');
  const other = await createTenant(tp, 'Beta Charging');
  const dev = await registerDevice(tp, 'OP-SN-1', tenant.siteId);
  const otherDev = await registerDevice(tp, 'OP-SN-2', other.siteId);
  return { tp, tenant, other, dev, otherDev };
}
