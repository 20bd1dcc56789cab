import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CommandRow, Store } from '../../platform/storage/store.js';
import { BACKENDS, openTestStore, type TestStore } from '../helpers/backends.js';
import { cmd, control, T0 } from '../helpers/command-rows.js';
import { recordReportOnStore, registerOnStore } from '../helpers/sealed-writes.js';

/**
 * The contract of CommandRepository (a device's commands) and DeviceHistoryRepository, the same cases on every
 * backend: what one backend does, the other must do too (orders included). Each test gets a fresh store; the
 * clock is passed explicitly to the repository methods.
 */

describe.each(BACKENDS)('command and history repositories on %s', (backend) => {
  let ts: TestStore;
  let store: Store;
  let t = T0;
  beforeEach(async () => {
    t = T0;
    ts = await openTestStore(backend, { now: () => t });
    store = ts.store;
  });
  afterEach(async () => {
    await ts.close();
  });

  describe('a device’s commands', () => {
    /** Newest first: creation time, then command id, both descending (byte-wise, as `<` compares them). */
    const newestFirst = (a: CommandRow, b: CommandRow) =>
      b.created_ms - a.created_ms || (a.command_id < b.command_id ? 1 : -1);
    const ids = (page: { items: Array<{ command: CommandRow }> }) =>
      page.items.map((i) => i.command.command_id);

    it('lists only that device’s commands, newest first (equal times by id), each as getCommand answers it', async () => {
      const rows: CommandRow[] = [];
      // Out of creation order, with ties: neither insertion nor id order gives the expected one by chance.
      for (const at of [T0 + 2_000, T0, T0 + 5_000, T0 + 2_000]) {
        rows.push(...(await store.enqueueCommands([cmd('dev_1'), cmd('dev_1', { command: 'start' })], at)));
      }
      // Another client's command and a flexibility control's are the device's commands too.
      rows.push(...(await store.enqueueCommands([cmd('dev_1', { client_id: 'cli_other' })], T0 + 1_000)));
      rows.push(
        ...(await store.createControl(control('ctl_1'), [
          cmd('dev_1', { control_id: 'ctl_1', command: 'set_power_limit' }),
        ])),
      );
      await store.enqueueCommands([cmd('dev_2'), cmd('dev_10')], T0 + 9_000);
      const [moved] = rows;
      await store.takePendingCommands('dev_1', T0 + 6_000);
      await store.reportCommandStatus(
        'dev_1',
        moved?.command_id ?? '',
        { status: 'failed', reason: 'no EV' },
        T0 + 7_000,
      );

      const all = await store.listDeviceCommands('dev_1', { page: 1, size: 100 });
      expect(all).toMatchObject({ total: 10, page: 1, size: 100 });
      expect(ids(all)).toEqual([...rows].sort(newestFirst).map((r) => r.command_id));
      for (const item of all.items) expect(item).toEqual(await store.getCommand(item.command.command_id));
      const failed = all.items.find((i) => i.command.command_id === moved?.command_id);
      expect(failed?.command).toMatchObject({ status: 'failed', reason: 'no EV', updated_ms: T0 + 7_000 });
      expect(failed?.history.map((h) => [h.status, h.at_ms, h.reason])).toEqual([
        ['queued', T0 + 2_000, null],
        ['delivered', T0 + 6_000, null],
        ['failed', T0 + 7_000, 'no EV'],
      ]);
      expect(all.items.find((i) => i.command.control_id === 'ctl_1')?.command.command).toBe(
        'set_power_limit',
      );

      expect(await store.listDeviceCommands('dev_unknown', { page: 1, size: 20 })).toEqual({
        total: 0,
        page: 1,
        size: 20,
        items: [],
      });
    });

    it('pages without gaps or repeats, and filters by status (counting only those)', async () => {
      const rows: CommandRow[] = [];
      for (let i = 0; i < 7; i++) {
        // Pairs of equal times: page edges fall between commands created together.
        rows.push(...(await store.enqueueCommands([cmd('dev_1')], T0 + Math.floor(i / 2) * 1_000)));
      }
      await store.enqueueCommands([cmd('dev_2')], T0);
      const expected = [...rows].sort(newestFirst).map((r) => r.command_id);
      const pages = [];
      for (let page = 1; page <= 4; page++)
        pages.push(await store.listDeviceCommands('dev_1', { page, size: 2 }));
      expect(pages.map((p) => [p.total, p.page, p.size, p.items.length])).toEqual([
        [7, 1, 2, 2],
        [7, 2, 2, 2],
        [7, 3, 2, 2],
        [7, 4, 2, 1],
      ]);
      expect(pages.flatMap(ids)).toEqual(expected);
      expect((await store.listDeviceCommands('dev_1', { page: 5, size: 2 })).items).toEqual([]);

      // Statuses move: delivered (all), one accepted, one succeeded, one cancelled before delivery.
      const [a, b, c, d] = rows as [CommandRow, CommandRow, CommandRow, CommandRow];
      await store.cancelCommand(d.command_id, T0 + 5_000);
      await store.takePendingCommands('dev_1', T0 + 6_000);
      await store.reportCommandStatus('dev_1', a.command_id, { status: 'accepted' }, T0 + 7_000);
      await store.reportCommandStatus('dev_1', b.command_id, { status: 'succeeded' }, T0 + 7_000);
      await store.reportCommandStatus('dev_1', c.command_id, { status: 'accepted' }, T0 + 7_000);
      const of = (status: CommandRow['status'], page = 1, size = 20) =>
        store.listDeviceCommands('dev_1', { status, page, size });
      const accepted = await of('accepted');
      expect(accepted.total).toBe(2);
      expect(ids(accepted)).toEqual([a, c].sort(newestFirst).map((r) => r.command_id));
      expect(accepted.items.every((i) => i.command.status === 'accepted')).toBe(true);
      expect(ids(await of('succeeded'))).toEqual([b.command_id]);
      expect(ids(await of('cancelled'))).toEqual([d.command_id]);
      const delivered = await of('delivered', 2, 2);
      expect(delivered).toMatchObject({ total: 3, page: 2, size: 2 });
      expect(ids(delivered)).toEqual(
        rows
          .filter((r) => ![a, b, c, d].includes(r))
          .sort(newestFirst)
          .slice(2)
          .map((r) => r.command_id),
      );
      expect(await of('queued')).toEqual({ total: 0, page: 1, size: 20, items: [] });
    });
  });

  describe('device history', () => {
    const event = (id: string, tsMs: number, extra: Record<string, unknown> = {}) => ({
      event_id: id,
      kind: 'fault',
      severity: 'warning',
      connector_id: null,
      ts_ms: tsMs,
      message: null,
      data: null,
      ...extra,
    });

    it('accepts new events, counts duplicates (stored or repeated in the upload)', async () => {
      const first = await store.insertEvents(
        'dev_1',
        [event('e1', T0), event('e2', T0 + 1), event('e1', T0 + 2)],
        T0 + 10,
      );
      expect(first).toEqual({ accepted: 2, duplicates: 1 });
      expect(await store.insertEvents('dev_1', [event('e2', T0 + 5), event('e3', T0 + 3)], T0 + 20)).toEqual({
        accepted: 1,
        duplicates: 1,
      });
      // The same event id from another charger is another event.
      expect(await store.insertEvents('dev_2', [event('e1', T0)], T0)).toEqual({
        accepted: 1,
        duplicates: 0,
      });
      expect(await store.insertEvents('dev_2', [], T0)).toEqual({ accepted: 0, duplicates: 0 });
      const page = await store.listEvents('dev_1', 1, 10);
      expect(page.total).toBe(3);
      // The first upload's e1 was kept, not the repeat.
      expect(page.items.find((e) => e.event_id === 'e1')).toMatchObject({ ts_ms: T0, received_ms: T0 + 10 });
      expect(page.items.find((e) => e.event_id === 'e2')).toMatchObject({ ts_ms: T0 + 1 });
    });

    it('lists newest first, equal times latest stored first, with every field', async () => {
      const data = { code: 'E42', values: [1.5, 2], ok: false };
      await store.insertEvents(
        'dev_1',
        [
          event('old', T0),
          event('tie_1', T0 + 5),
          event('tie_2', T0 + 5, { connector_id: 2, message: 'm', data, severity: 'error' }),
          event('new', T0 + 9),
        ],
        T0 + 100,
      );
      await store.insertEvents('dev_1', [event('tie_3', T0 + 5)], T0 + 200);
      await store.insertEvents('dev_2', [event('elsewhere', T0 + 50)], T0 + 200);
      const ids = async (page: number) =>
        (await store.listEvents('dev_1', page, 2)).items.map((e) => e.event_id);
      expect(await ids(1)).toEqual(['new', 'tie_3']);
      expect(await ids(2)).toEqual(['tie_2', 'tie_1']);
      expect(await ids(3)).toEqual(['old']);
      const second = await store.listEvents('dev_1', 2, 2);
      expect(second).toMatchObject({ total: 5, page: 2, size: 2 });
      expect(second.items[0]).toMatchObject({
        device_id: 'dev_1',
        event_id: 'tie_2',
        kind: 'fault',
        severity: 'error',
        connector_id: 2,
        ts_ms: T0 + 5,
        message: 'm',
        data,
        received_ms: T0 + 100,
      });
      expect(second.items[1]).toMatchObject({ connector_id: null, message: null, data: null });
    });

    it('records firmware reports; an installed version becomes the charger’s firmware', async () => {
      const op = await store.createOperator('Op');
      const site = await store.createSite({ operator_id: op.operator_id, name: 'S', timezone: 'UTC' });
      const reg = await registerOnStore(
        store,
        { sn: 'SN-FW', model: 'M', manufacturer: 'X', firmware_version: '1.0.0' },
        { registration: 'open', defaultSiteId: site.site_id },
      );
      if (reg.kind !== 'registered') throw new Error(reg.kind);
      const id = reg.device.device_id;
      const firmware = async () => (await store.getDevice(id))?.firmware_version;
      await recordReportOnStore(
        store,
        id,
        { status: 'downloading', version: '2.0.0', progress: 40, ts_ms: T0 },
        T0,
      );
      expect(await firmware()).toBe('1.0.0');
      await recordReportOnStore(store, id, { status: 'installed', ts_ms: T0 + 1 }, T0 + 1);
      expect(await firmware()).toBe('1.0.0');
      await recordReportOnStore(
        store,
        id,
        { status: 'installed', version: '2.0.0', message: 'ok', ts_ms: T0 + 2 },
        T0 + 2,
      );
      expect(await firmware()).toBe('2.0.0');
      // A report for an unknown charger is stored without failing.
      await recordReportOnStore(store, 'dev_unknown', { status: 'installed', version: '3', ts_ms: T0 }, T0);
    });
  });
});
