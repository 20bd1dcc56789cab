import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RegisterInput, Store } from '../../platform/storage/store.js';
import { BACKENDS, openTestStore, type TestStore } from '../helpers/backends.js';
import { recordReportOnStore, registerOnStore } from '../helpers/sealed-writes.js';

/**
 * The inventory's repository contract on every backend (DESIGN.md §19): versions stored at registration and set
 * later, the version filters of the device list, firmware reports stored once per report id with the versions
 * they imply, and a device's reports paged newest first.
 */
const T0 = Date.UTC(2030, 0, 15, 12);

describe.each(BACKENDS)('store contract: inventory and firmware reports (%s)', (backend) => {
  let ts: TestStore;
  let store: Store;
  let operatorId: string;
  let siteId: string;
  beforeEach(async () => {
    ts = await openTestStore(backend, { now: () => T0 });
    store = ts.store;
    operatorId = (await store.createOperator('A')).operator_id;
    siteId = (await store.createSite({ operator_id: operatorId, name: 'S', timezone: 'UTC' })).site_id;
  });
  afterEach(async () => {
    await ts.close();
  });

  async function registered(sn: string, extra: Partial<RegisterInput> = {}): Promise<string> {
    const out = await registerOnStore(
      store,
      { sn, model: 'M', manufacturer: 'X', firmware_version: '1.0.0', ...extra },
      { registration: 'open', defaultSiteId: siteId },
    );
    if (out.kind !== 'registered') throw new Error(out.kind);
    return out.device.device_id;
  }
  const versions = async (id: string) => {
    const d = await store.getDevice(id);
    return { firmware_version: d?.firmware_version, agent_version: d?.agent_version };
  };

  it('stores agent_version at registration (null when not declared) and sets versions one at a time', async () => {
    const a = await registered('SN-A', { agent_version: '0.1.0' });
    const b = await registered('SN-B');
    expect(await versions(a)).toEqual({ firmware_version: '1.0.0', agent_version: '0.1.0' });
    expect(await versions(b)).toEqual({ firmware_version: '1.0.0', agent_version: null });
    expect(await store.setDeviceVersions(b, { agent_version: '0.2.0' })).toBe(true);
    expect(await versions(b)).toEqual({ firmware_version: '1.0.0', agent_version: '0.2.0' });
    expect(await store.setDeviceVersions(b, { firmware_version: '2.0.0' })).toBe(true);
    expect(await versions(b)).toEqual({ firmware_version: '2.0.0', agent_version: '0.2.0' });
    expect(await store.setDeviceVersions(b, {})).toBe(true);
    expect(await versions(b)).toEqual({ firmware_version: '2.0.0', agent_version: '0.2.0' });
    expect(await store.setDeviceVersions('dev_missing', { agent_version: '1' })).toBe(false);
    expect(await store.getDeviceForOperators(a, [operatorId])).toMatchObject({ agent_version: '0.1.0' });
  });

  it('a charger registering again declares its versions anew', async () => {
    const id = await registered('SN-R', { agent_version: '0.1.0' });
    await store.resetDevice(id);
    expect(await registered('SN-R', { firmware_version: '1.1.0', agent_version: '0.2.0' })).toBe(id);
    expect(await versions(id)).toEqual({ firmware_version: '1.1.0', agent_version: '0.2.0' });
  });

  it('filters the device list by exact versions, with the other filters and paging', async () => {
    const a = await registered('SN-1', { firmware_version: '1.0.0', agent_version: '0.1.0' });
    const b = await registered('SN-2', { firmware_version: '2.0.0', agent_version: '0.1.0' });
    const c = await registered('SN-3', { firmware_version: '2.0.0' });
    const list = async (
      q: { firmware_version?: string; agent_version?: string; site_id?: string },
      size = 10,
    ) => {
      const page = await store.listDevices([operatorId], { ...q, page: 1, size }, 0);
      return { total: page.total, ids: page.items.map((d) => d.device_id) };
    };
    const sorted = (...ids: string[]) => [...ids].sort();
    expect(await list({ firmware_version: '2.0.0' })).toEqual({ total: 2, ids: sorted(b, c) });
    expect(await list({ agent_version: '0.1.0' })).toEqual({ total: 2, ids: sorted(a, b) });
    expect(await list({ firmware_version: '2.0.0', agent_version: '0.1.0', site_id: siteId })).toEqual({
      total: 1,
      ids: [b],
    });
    expect((await list({ firmware_version: '2.0.0' }, 1)).total).toBe(2);
    expect(await list({ firmware_version: '2' })).toEqual({ total: 0, ids: [] });
    expect(
      (await store.listDevices(['op_other'], { firmware_version: '2.0.0', page: 1, size: 10 }, 0)).total,
    ).toBe(0);
  });

  it('stores a report once per report id, with the versions given, and pages reports newest first', async () => {
    const id = await registered('SN-FW', { agent_version: '0.1.0' });
    const base = { status: 'installed', version: '2.0.0', ts_ms: T0 + 10 };
    expect(await store.recordFirmwareStatus(id, { ...base, report_id: 'r1', update_id: 'u1' }, T0, {})).toBe(
      true,
    );
    expect(await versions(id)).toEqual({ firmware_version: '1.0.0', agent_version: '0.1.0' });
    expect(
      await store.recordFirmwareStatus(id, { ...base, report_id: 'r2', ts_ms: T0 + 20 }, T0 + 1, {
        agent_version: '0.5.0',
      }),
    ).toBe(true);
    expect(await versions(id)).toEqual({ firmware_version: '1.0.0', agent_version: '0.5.0' });
    // The same id again: nothing stored, nothing set.
    expect(
      await store.recordFirmwareStatus(id, { ...base, report_id: 'r1', ts_ms: T0 + 30 }, T0 + 2, {
        firmware_version: '9.9.9',
      }),
    ).toBe(false);
    expect(await versions(id)).toEqual({ firmware_version: '1.0.0', agent_version: '0.5.0' });
    // Without a report id, each is stored; without an update behind it, installed is the firmware's (as before).
    expect(await recordReportOnStore(store, id, { status: 'idle', ts_ms: T0 + 5 }, T0 + 3)).toBe(true);
    expect(await recordReportOnStore(store, id, { status: 'idle', ts_ms: T0 + 5 }, T0 + 4)).toBe(true);
    expect(
      await recordReportOnStore(store, id, { status: 'installed', version: '3.0.0', ts_ms: T0 + 1 }, T0 + 5),
    ).toBe(true);
    expect(await versions(id)).toEqual({ firmware_version: '3.0.0', agent_version: '0.5.0' });

    const first = await store.listFirmwareStatus(id, 1, 2);
    expect(first.total).toBe(5);
    expect(first.items).toEqual([
      {
        status: 'installed',
        version: '2.0.0',
        progress: null,
        message: null,
        update_id: null,
        report_id: 'r2',
        ts_ms: T0 + 20,
        received_ms: T0 + 1,
      },
      {
        status: 'installed',
        version: '2.0.0',
        progress: null,
        message: null,
        update_id: 'u1',
        report_id: 'r1',
        ts_ms: T0 + 10,
        received_ms: T0,
      },
    ]);
    // Equal timestamps: the later arrival first.
    const second = await store.listFirmwareStatus(id, 2, 2);
    expect(second.items.map((r) => [r.status, r.received_ms])).toEqual([
      ['idle', T0 + 4],
      ['idle', T0 + 3],
    ]);
    expect((await store.listFirmwareStatus(id, 3, 2)).items.map((r) => r.version)).toEqual(['3.0.0']);
    expect(await store.listFirmwareStatus('dev_missing', 1, 10)).toEqual({
      total: 0,
      page: 1,
      size: 10,
      items: [],
    });
    // Report ids are per charger.
    const other = await registered('SN-FW-2');
    expect(await recordReportOnStore(store, other, { ...base, report_id: 'r1' }, T0)).toBe(true);
  });
});
