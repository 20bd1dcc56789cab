import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CommandRow, ControlRow, NewCommand, Store } from '../../platform/storage/store.js';
import type { ChargingSchedule } from '../../shared/index.js';
import { BACKENDS, openTestStore, type TestStore } from '../helpers/backends.js';
import { recordReportOnStore, registerOnStore } from '../helpers/sealed-writes.js';

/**
 * The contract of CommandRepository and DeviceHistoryRepository, the same cases on every backend: what one
 * backend does, the other must do too (orders included). Each test gets a fresh store; the clock is passed
 * explicitly to the repository methods, so `t` only matters where the store reads it itself.
 */

const T0 = Date.UTC(2026, 0, 1);
const MINUTE = 60_000;

function cmd(deviceId: string, extra: Partial<NewCommand> = {}): NewCommand {
  return {
    device_id: deviceId,
    command: 'stop',
    params: { connector_id: 1, reason: 'user_request' },
    expiry_ms: T0 + 10 * MINUTE,
    ...extra,
  };
}

function schedule(scheduleId: string, start = '00:00'): ChargingSchedule {
  return {
    schedule_id: scheduleId,
    enabled: true,
    type: 'daily',
    time_slots: [{ start, end: '06:00', action: 'charge' }],
    timezone: 'UTC',
  };
}

function control(controlId: string, endsMs = T0 + 30 * MINUTE): ControlRow {
  return {
    control_id: controlId,
    client_id: 'cli_test',
    target_type: 'site',
    target_ids: ['site_a', 'site_b'],
    command: 'set_power_limit',
    params: { power_limit_kw: 7.5, nested: { list: [1, 'two', null] } },
    status: 'executing',
    created_ms: T0,
    ends_ms: endsMs,
    operator_ids: ['op_a'],
  };
}

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

  /**
   * Opens enough pooled connections that concurrent calls really overlap on PostgreSQL (instead of being
   * staggered by connection set-up), so that a missing lock shows as a double change.
   */
  const warm = () => Promise.all(Array.from({ length: 8 }, () => store.countCommandsByStatus()));
  const statusOf = async (commandId: string) => (await store.getCommand(commandId))?.command.status;
  const historyOf = async (commandId: string) =>
    (await store.getCommand(commandId))?.history.map((h) => [h.status, h.at_ms, h.reason]);

  describe('enqueue and take', () => {
    it('queues commands with their first history entry', async () => {
      expect(await store.enqueueCommands([], T0)).toEqual([]);
      const [a, b] = await store.enqueueCommands(
        [cmd('dev_1'), cmd('dev_2', { command: 'start', control_id: 'ctl_x', client_id: 'cli_y' })],
        T0,
      );
      expect(a?.command_id).not.toBe(b?.command_id);
      expect(b).toEqual({
        command_id: expect.stringMatching(/^cmd_/),
        device_id: 'dev_2',
        command: 'start',
        params: { connector_id: 1, reason: 'user_request' },
        status: 'queued',
        expiry_ms: T0 + 10 * MINUTE,
        created_ms: T0,
        updated_ms: T0,
        control_id: 'ctl_x',
        client_id: 'cli_y',
        reason: null,
      });
      const stored = await store.getCommand(b?.command_id ?? '');
      expect(stored?.command).toEqual(b);
      expect(stored?.history).toEqual([{ status: 'queued', at_ms: T0, reason: null }]);
      expect(await store.getCommand('cmd_missing')).toBeUndefined();
    });

    it('delivers queued commands once, in creation order, and keeps returning them until they end', async () => {
      // Each insert an earlier command: neither insertion order nor (random) id order is creation order.
      const rows: CommandRow[] = [];
      for (const at of [T0 + 2_000, T0 + 1_500, T0 + 1_200, T0 + 1_000]) {
        rows.push(...(await store.enqueueCommands([cmd('dev_1')], at)));
      }
      const inOrder = rows.map((r) => r.command_id).reverse();
      const early = rows[3];
      await store.enqueueCommands([cmd('dev_other')], T0);
      const delivered: string[] = [];
      const first = await store.takePendingCommands('dev_1', T0 + 3_000, (c) => {
        expect(c.status).toBe('delivered');
        expect(c.updated_ms).toBe(T0 + 3_000);
        delivered.push(c.command_id);
      });
      expect(first.map((p) => p.command_id)).toEqual(inOrder);
      expect(first[0]).toEqual({
        command_id: early?.command_id,
        command: 'stop',
        params: { connector_id: 1, reason: 'user_request' },
        expiry: new Date(T0 + 10 * MINUTE).toISOString(),
      });
      expect(delivered).toEqual(inOrder);
      expect(await statusOf(early?.command_id ?? '')).toBe('delivered');
      expect(await historyOf(early?.command_id ?? '')).toEqual([
        ['queued', T0 + 1_000, null],
        ['delivered', T0 + 3_000, null],
      ]);

      const again: string[] = [];
      const second = await store.takePendingCommands('dev_1', T0 + 4_000, (c) => again.push(c.command_id));
      expect(second.map((p) => p.command_id)).toEqual(inOrder);
      expect(again).toEqual([]);
      expect(await historyOf(early?.command_id ?? '')).toHaveLength(2);
      // Another charger's command was never touched.
      expect(await store.countCommandsByStatus()).toEqual({ delivered: 4, queued: 1 });
    });

    it('never delivers before a command existed, nor after its expiry', async () => {
      const [c] = await store.enqueueCommands([cmd('dev_1')], T0 + 5_000);
      const [gone] = await store.enqueueCommands([cmd('dev_1', { expiry_ms: T0 + 6_000 })], T0 + 5_000);
      const seen: number[] = [];
      // The poll read its clock before the command was queued.
      await store.takePendingCommands('dev_1', T0 + 4_000, (d) => seen.push(d.updated_ms));
      expect(seen).toEqual([T0 + 5_000, T0 + 5_000]);
      expect(await historyOf(c?.command_id ?? '')).toEqual([
        ['queued', T0 + 5_000, null],
        ['delivered', T0 + 5_000, null],
      ]);
      const later = await store.takePendingCommands('dev_1', T0 + 6_000);
      expect(later.map((p) => p.command_id)).toEqual([c?.command_id]);
      expect(later.map((p) => p.command_id)).not.toContain(gone?.command_id);
    });

    it('does not deliver an expired queued command, and concurrent polls deliver each command once', async () => {
      const [expired] = await store.enqueueCommands([cmd('dev_1', { expiry_ms: T0 + 1_000 })], T0);
      const fresh = await store.enqueueCommands([cmd('dev_1'), cmd('dev_1'), cmd('dev_1')], T0);
      const delivered: string[] = [];
      await warm();
      const polls = await Promise.all(
        Array.from({ length: 4 }, () =>
          store.takePendingCommands('dev_1', T0 + 1_000, (c) => delivered.push(c.command_id)),
        ),
      );
      expect(delivered.sort()).toEqual(fresh.map((c) => c.command_id).sort());
      for (const p of polls) expect(p).toHaveLength(3);
      expect(await statusOf(expired?.command_id ?? '')).toBe('queued');
      expect(await store.takePendingCommands('dev_none', T0)).toEqual([]);
    });
  });

  describe('status reports', () => {
    it('moves forward only, keeps the last reason, and ignores repeats and late reports', async () => {
      const [c] = await store.enqueueCommands([cmd('dev_1')], T0);
      const id = c?.command_id ?? '';
      await store.takePendingCommands('dev_1', T0 + 1);
      const accepted = await store.reportCommandStatus(
        'dev_1',
        id,
        { status: 'accepted', reason: 'r1' },
        T0 + 2,
      );
      expect(accepted).toEqual({
        outcome: 'ok',
        changed: true,
        command: { ...c, status: 'accepted', updated_ms: T0 + 2, reason: 'r1' },
      });
      const repeat = await store.reportCommandStatus('dev_1', id, { status: 'accepted' }, T0 + 3);
      expect(repeat).toMatchObject({
        outcome: 'ok',
        changed: false,
        command: { status: 'accepted', updated_ms: T0 + 2 },
      });
      // No reason given: the previous one stays.
      const done = await store.reportCommandStatus('dev_1', id, { status: 'succeeded' }, T0 + 4);
      expect(done).toMatchObject({
        outcome: 'ok',
        changed: true,
        command: { status: 'succeeded', reason: 'r1' },
      });
      const late = await store.reportCommandStatus('dev_1', id, { status: 'failed', reason: 'x' }, T0 + 5);
      expect(late).toMatchObject({ outcome: 'ok', changed: false, command: { status: 'succeeded' } });
      const stored = await store.getCommand(id);
      expect(stored?.command).toMatchObject({ status: 'succeeded', reason: 'r1', updated_ms: T0 + 4 });
      expect(stored?.history.map((h) => [h.status, h.at_ms, h.reason])).toEqual([
        ['queued', T0, null],
        ['delivered', T0 + 1, null],
        ['accepted', T0 + 2, 'r1'],
        ['succeeded', T0 + 4, null],
      ]);
    });

    it('answers not_found for an unknown command or another charger’s, conflict once the platform ended it', async () => {
      const [c, other] = await store.enqueueCommands([cmd('dev_1'), cmd('dev_1')], T0);
      expect(await store.reportCommandStatus('dev_1', 'cmd_nope', { status: 'accepted' }, T0)).toEqual({
        outcome: 'not_found',
      });
      expect(
        await store.reportCommandStatus('dev_2', c?.command_id ?? '', { status: 'accepted' }, T0),
      ).toEqual({
        outcome: 'not_found',
      });
      expect(await statusOf(c?.command_id ?? '')).toBe('queued');
      await store.cancelCommand(c?.command_id ?? '', T0 + 1);
      expect(
        await store.reportCommandStatus('dev_1', c?.command_id ?? '', { status: 'succeeded' }, T0 + 2),
      ).toEqual({
        outcome: 'conflict',
        status: 'cancelled',
      });
      await store.expireCommands(T0 + 10 * MINUTE);
      expect(
        await store.reportCommandStatus(
          'dev_1',
          other?.command_id ?? '',
          { status: 'accepted' },
          T0 + 11 * MINUTE,
        ),
      ).toEqual({ outcome: 'conflict', status: 'expired' });
    });

    it('a final status may skip accepted; concurrent identical reports change the command once', async () => {
      const [c] = await store.enqueueCommands([cmd('dev_1')], T0);
      const id = c?.command_id ?? '';
      await warm();
      const outcomes = await Promise.all(
        Array.from({ length: 4 }, () =>
          store.reportCommandStatus('dev_1', id, { status: 'rejected', reason: 'busy' }, T0 + 1),
        ),
      );
      expect(outcomes.filter((o) => o.outcome === 'ok' && o.changed)).toHaveLength(1);
      expect(outcomes.every((o) => o.outcome === 'ok')).toBe(true);
      expect(await historyOf(id)).toEqual([
        ['queued', T0, null],
        ['rejected', T0 + 1, 'busy'],
      ]);
    });
  });

  describe('cancel and expire', () => {
    it('cancels only queued commands, once', async () => {
      const [c, d] = await store.enqueueCommands([cmd('dev_1'), cmd('dev_2')], T0);
      await store.takePendingCommands('dev_2', T0 + 1);
      await warm();
      const results = await Promise.all([
        store.cancelCommand(c?.command_id ?? '', T0 + 2),
        store.cancelCommand(c?.command_id ?? '', T0 + 2),
      ]);
      expect(results.filter((r) => r === 'conflict')).toHaveLength(1);
      const row = results.find((r) => typeof r !== 'string');
      // The returned row: new status and time (SQLite returns the reason the row had before).
      expect(row).toMatchObject({ command_id: c?.command_id, status: 'cancelled', updated_ms: T0 + 2 });
      const stored = await store.getCommand(c?.command_id ?? '');
      expect(stored?.command).toMatchObject({ status: 'cancelled', reason: 'cancelled by operator' });
      expect(stored?.history.at(-1)).toEqual({
        status: 'cancelled',
        at_ms: T0 + 2,
        reason: 'cancelled by operator',
      });
      expect(await store.cancelCommand(d?.command_id ?? '', T0 + 3)).toBe('conflict');
      expect(await store.cancelCommand('cmd_nope', T0 + 3)).toBe('not_found');
      expect(await store.takePendingCommands('dev_1', T0 + 3)).toEqual([]);
    });

    it('expires queued and delivered commands past their expiry, in expiry order, once', async () => {
      // Stored out of expiry order: neither insertion nor (random) id order gives the expected one by chance.
      const [late, early, accepted, future, mid2, mid1] = await store.enqueueCommands(
        [
          cmd('dev_1', { expiry_ms: T0 + 2_000 }),
          cmd('dev_2', { expiry_ms: T0 + 1_000 }),
          cmd('dev_3', { expiry_ms: T0 + 1_000 }),
          cmd('dev_1', { expiry_ms: T0 + 9_000 }),
          cmd('dev_4', { expiry_ms: T0 + 1_500 }),
          cmd('dev_5', { expiry_ms: T0 + 1_200 }),
        ],
        T0,
      );
      await store.takePendingCommands('dev_1', T0 + 1);
      await store.takePendingCommands('dev_3', T0 + 1);
      await store.reportCommandStatus('dev_3', accepted?.command_id ?? '', { status: 'accepted' }, T0 + 2);
      const expired = await store.expireCommands(T0 + 2_000);
      expect(expired.map((r) => r.command_id)).toEqual([early, mid1, mid2, late].map((c) => c?.command_id));
      expect(expired[3]).toMatchObject({ status: 'expired', updated_ms: T0 + 2_000, device_id: 'dev_1' });
      expect(await historyOf(late?.command_id ?? '')).toEqual([
        ['queued', T0, null],
        ['delivered', T0 + 1, null],
        ['expired', T0 + 2_000, 'no report before expiry'],
      ]);
      expect((await store.getCommand(early?.command_id ?? ''))?.command.reason).toBe(
        'no report before expiry',
      );
      expect(await statusOf(accepted?.command_id ?? '')).toBe('accepted');
      expect(await statusOf(future?.command_id ?? '')).toBe('delivered');
      expect(await store.expireCommands(T0 + 2_000)).toEqual([]);
      expect(await store.countCommandsByStatus()).toEqual({ expired: 4, accepted: 1, delivered: 1 });
    });
  });

  describe('controls', () => {
    it('stores a control with its commands, listed by charger byte-wise', async () => {
      const ctl = control('ctl_1');
      const rows = await store.createControl(ctl, [
        cmd('dev_a', { control_id: 'ctl_1', command: 'set_power_limit' }),
        cmd('dev_B', { control_id: 'ctl_1', command: 'set_power_limit' }),
      ]);
      expect(rows.map((r) => [r.device_id, r.status, r.created_ms, r.control_id])).toEqual([
        ['dev_a', 'queued', T0, 'ctl_1'],
        ['dev_B', 'queued', T0, 'ctl_1'],
      ]);
      const found = await store.getControl('ctl_1');
      expect(found?.control).toEqual(ctl);
      // Upper case sorts before lower case byte-wise (SQLite's BINARY), whatever the server's collation.
      expect(found?.commands).toEqual([
        { device_id: 'dev_B', command_id: rows[1]?.command_id, status: 'queued' },
        { device_id: 'dev_a', command_id: rows[0]?.command_id, status: 'queued' },
      ]);
      expect(await store.getControl('ctl_missing')).toBeUndefined();
      expect((await store.createControl(control('ctl_empty'), [])).length).toBe(0);
      expect((await store.getControl('ctl_empty'))?.commands).toEqual([]);
    });

    it('cancels a control once: its queued commands are cancelled and the reversals queued', async () => {
      const [seen, unseen] = await store.createControl(control('ctl_1'), [
        cmd('dev_1', { control_id: 'ctl_1' }),
        cmd('dev_2', { control_id: 'ctl_1' }),
      ]);
      await store.takePendingCommands('dev_1', T0 + 1);
      const reversal = cmd('dev_1', { command: 'set_power_limit', params: { power_limit_kw: null } });
      await warm();
      const results = await Promise.all([
        store.cancelControl('ctl_1', [reversal], T0 + 2),
        store.cancelControl('ctl_1', [reversal], T0 + 2),
      ]);
      const winner = results.find((r) => r.cancelled.length > 0);
      expect(results.filter((r) => r.cancelled.length === 0 && r.queued.length === 0)).toHaveLength(1);
      expect(winner?.cancelled).toEqual([
        { ...unseen, status: 'cancelled', reason: 'control cancelled', updated_ms: T0 + 2 },
      ]);
      expect(winner?.queued).toMatchObject([
        { device_id: 'dev_1', command: 'set_power_limit', status: 'queued', created_ms: T0 + 2 },
      ]);
      const found = await store.getControl('ctl_1');
      expect(found?.control.status).toBe('cancelled');
      expect(found?.commands.map((c) => [c.command_id, c.status])).toEqual([
        [seen?.command_id, 'delivered'],
        [unseen?.command_id, 'cancelled'],
      ]);
      expect(await historyOf(unseen?.command_id ?? '')).toEqual([
        ['queued', T0, null],
        ['cancelled', T0 + 2, 'control cancelled'],
      ]);
      expect(await store.countCommandsByStatus()).toEqual({ delivered: 1, cancelled: 1, queued: 1 });
    });

    it('completes executing controls whose window has ended', async () => {
      await store.createControl(control('ctl_1', T0 + MINUTE), []);
      await store.createControl(control('ctl_2', T0 + 2 * MINUTE), []);
      await store.createControl(control('ctl_3', T0 + MINUTE), []);
      await store.cancelControl('ctl_3', [], T0 + 1);
      expect(await store.completeControls(T0 + MINUTE - 1)).toEqual([]);
      expect((await store.completeControls(T0 + MINUTE)).map((c) => c.status)).toEqual(['completed']);
      expect((await store.getControl('ctl_1'))?.control.status).toBe('completed');
      expect((await store.getControl('ctl_2'))?.control.status).toBe('executing');
      expect((await store.getControl('ctl_3'))?.control.status).toBe('cancelled');
      expect(await store.completeControls(T0 + MINUTE)).toEqual([]);
      expect(await store.cancelControl('ctl_1', [cmd('dev_1')], T0 + 2 * MINUTE)).toEqual({
        cancelled: [],
        queued: [],
      });
    });
  });

  describe('schedules', () => {
    const save = (id: string, connectorId = 1, atMs = T0, start = '00:00') =>
      store.saveSchedule(
        { device_id: 'dev_1', connector_id: connectorId, schedule: schedule(id, start), updated_ms: atMs },
        cmd('dev_1', { command: 'set_schedule', params: { connector_id: connectorId, schedule_id: id } }),
      );

    it('saves (replacing by id) with a queued command, and pages byte-wise by schedule id', async () => {
      const queued = await save('s_b');
      expect(queued).toMatchObject({ command: 'set_schedule', status: 'queued', created_ms: T0 });
      expect(await store.getCommand(queued.command_id)).toBeDefined();
      await save('S_c');
      await save('s_a');
      await save('s_z', 2);
      await save('s_b', 1, T0 + 5, '01:00');
      const first = await store.listSchedules('dev_1', 1, 1, 2);
      expect(first.total).toBe(3);
      expect(first.items.map((s) => s.schedule_id)).toEqual(['S_c', 's_a']);
      const second = await store.listSchedules('dev_1', 1, 2, 2);
      expect(second).toEqual({ total: 3, page: 2, size: 2, items: [schedule('s_b', '01:00')] });
      expect((await store.listSchedules('dev_1', 1, 3, 2)).items).toEqual([]);
      expect((await store.listSchedules('dev_1', 3, 1, 10)).total).toBe(0);
      expect(await store.countCommandsByStatus()).toEqual({ queued: 5 });
    });

    it('deletes a stored schedule with a queued command, and queues nothing when there is none', async () => {
      await save('s_a');
      const del = cmd('dev_1', {
        command: 'delete_schedule',
        params: { connector_id: 1, schedule_id: 's_a' },
      });
      expect(await store.deleteSchedule('dev_1', 2, 's_a', del, T0 + 1)).toBeUndefined();
      const queued = await store.deleteSchedule('dev_1', 1, 's_a', del, T0 + 1);
      expect(queued).toMatchObject({ command: 'delete_schedule', status: 'queued', created_ms: T0 + 1 });
      expect(await store.deleteSchedule('dev_1', 1, 's_a', del, T0 + 2)).toBeUndefined();
      expect((await store.listSchedules('dev_1', 1, 1, 10)).total).toBe(0);
      expect(await store.countCommandsByStatus()).toEqual({ queued: 2 });
    });
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
