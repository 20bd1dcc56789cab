import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { NewEnrolment, Store } from '../../platform/storage/store.js';
import { BACKENDS, openTestStore, type TestStore } from '../helpers/backends.js';
import { registerOnStore } from '../helpers/sealed-writes.js';
import { storePerTest } from '../helpers/store-per-test.js';

/**
 * The contract of EnrolmentRepository on every backend (DESIGN.md §18): groups are kept as given, listed oldest
 * first, at most one active group per CA, and a revoked group leaves the active list but stays listed.
 */
const T0 = Date.UTC(2030, 0, 15, 12);

describe.each(BACKENDS)('enrolment repository on %s', (backend) => {
  const ctx = storePerTest(backend, T0);

  async function group(fingerprint: string, extra: Partial<NewEnrolment> = {}) {
    const op = await ctx.store.createOperator(`op-${fingerprint}`);
    const input: NewEnrolment = {
      operator_id: op.operator_id,
      site_id: null,
      name: `group ${fingerprint}`,
      ca_pem: `-----BEGIN CERTIFICATE-----\n${fingerprint}\n-----END CERTIFICATE-----\n`,
      ca_fingerprint: fingerprint,
      ...extra,
    };
    ctx.tick(1);
    return { input, created: await ctx.store.createEnrolment(input) };
  }

  it('keeps a group as given and lists groups oldest first', async () => {
    const op = await ctx.store.createOperator('Depot operator');
    const site = await ctx.store.createSite({ operator_id: op.operator_id, name: 'Depot', timezone: 'UTC' });
    const a = await group('AA:01', { operator_id: op.operator_id, site_id: site.site_id });
    const b = await group('BB:02');
    expect(a.created).toEqual({
      ...a.input,
      enrolment_id: expect.stringMatching(/^enr_[0-9a-f]{20}$/),
      status: 'active',
      created_ms: T0 + 1,
    });
    if (a.created === 'duplicate_ca' || b.created === 'duplicate_ca') throw new Error('not created');
    expect(await ctx.store.getEnrolment(a.created.enrolment_id)).toEqual(a.created);
    expect(await ctx.store.listEnrolments()).toEqual([a.created, b.created]);
    expect(await ctx.store.activeEnrolments()).toEqual([a.created, b.created]);
    expect(await ctx.store.getEnrolment('enr_missing')).toBeUndefined();
  });

  it('refuses a second active group with the same CA, and takes it again once the first is revoked', async () => {
    const first = await group('CC:03');
    expect(await group('CC:03')).toMatchObject({ created: 'duplicate_ca' });
    if (first.created === 'duplicate_ca') throw new Error('not created');
    const id = first.created.enrolment_id;

    expect(await ctx.store.revokeEnrolment(id)).toBe(true);
    expect(await ctx.store.getEnrolment(id)).toMatchObject({ status: 'revoked' });
    expect(await ctx.store.activeEnrolments()).toEqual([]);
    expect((await ctx.store.listEnrolments()).map((g) => g.status)).toEqual(['revoked']);

    const again = await group('CC:03');
    expect(again.created).toMatchObject({ status: 'active', ca_fingerprint: 'CC:03' });
    expect((await ctx.store.activeEnrolments()).map((g) => g.ca_fingerprint)).toEqual(['CC:03']);
    expect(await ctx.store.listEnrolments()).toHaveLength(2);
  });

  it('answers false when revoking a group that does not exist', async () => {
    expect(await ctx.store.revokeEnrolment('enr_missing')).toBe(false);
  });
});

describe.each(BACKENDS)('registration under attested on %s', (backend) => {
  let ts: TestStore;
  let store: Store;
  beforeEach(async () => {
    ts = await openTestStore(backend, { now: () => T0 });
    store = ts.store;
  });
  afterEach(async () => {
    await ts.close();
  });
  const charger = (sn: string) => ({ sn, model: 'M1', manufacturer: 'Acme', firmware_version: '1.0.0' });

  it('registers only with an enrolment vouching for it, into the site given, whatever the allowlist says', async () => {
    const op = await store.createOperator('A');
    const site = await store.createSite({ operator_id: op.operator_id, name: 'Depot', timezone: 'UTC' });
    await store.allowSerial('SN-ALLOWED');
    // The allowlist is no credential here.
    expect(await registerOnStore(store, charger('SN-ALLOWED'), { registration: 'attested' })).toEqual({
      kind: 'not_allowed',
    });
    const policy = {
      registration: 'attested' as const,
      defaultSiteId: site.site_id,
      enrolment: { enrolment_id: 'enr_1', operator_id: op.operator_id },
    };
    const first = await registerOnStore(store, charger('SN-1'), policy);
    expect(first).toMatchObject({ kind: 'registered', device: { sn: 'SN-1', site_id: site.site_id } });
    expect(await registerOnStore(store, charger('SN-1'), policy)).toEqual({ kind: 'already_registered' });
    if (first.kind !== 'registered') throw new Error('not registered');

    // After a reset: the serial alone does not register it again; with the enrolment it keeps its device id.
    await store.resetDevice(first.device.device_id);
    expect(await registerOnStore(store, charger('SN-1'), { registration: 'attested' })).toEqual({
      kind: 'not_allowed',
    });
    // Another operator's group cannot take the reset charger, its device id and history over.
    const other = await store.createOperator('B');
    const otherSite = await store.createSite({
      operator_id: other.operator_id,
      name: 'B depot',
      timezone: 'UTC',
    });
    expect(
      await registerOnStore(store, charger('SN-1'), {
        registration: 'attested',
        defaultSiteId: otherSite.site_id,
        enrolment: { enrolment_id: 'enr_2', operator_id: other.operator_id },
      }),
    ).toEqual({ kind: 'other_operator' });
    const again = await registerOnStore(store, charger('SN-1'), policy);
    expect(again).toMatchObject({ kind: 'registered', device: { device_id: first.device.device_id } });
  });

  it('a reset charger in no site may be enrolled by any operator’s group, into that group’s site', async () => {
    const op = await store.createOperator('A');
    const first = await registerOnStore(store, charger('SN-LOOSE'), {
      registration: 'attested',
      enrolment: { enrolment_id: 'enr_1', operator_id: op.operator_id },
    });
    if (first.kind !== 'registered') throw new Error('not registered');
    expect(first.device.site_id).toBeNull();
    await store.resetDevice(first.device.device_id);
    const site = await store.createSite({ operator_id: op.operator_id, name: 'Depot', timezone: 'UTC' });
    const again = await registerOnStore(store, charger('SN-LOOSE'), {
      registration: 'attested',
      defaultSiteId: site.site_id,
      enrolment: { enrolment_id: 'enr_1', operator_id: op.operator_id },
    });
    expect(again).toMatchObject({ kind: 'registered', device: { site_id: site.site_id } });
  });
});
