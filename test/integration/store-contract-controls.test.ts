import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Store } from '../../platform/storage/store.js';
import { BACKENDS, openTestStore, type TestStore } from '../helpers/backends.js';
import { cmd, commandReads, control, MINUTE, schedule, T0 } from '../helpers/command-rows.js';

/**
 * The contract of CommandRepository for flexibility controls and charging schedules, the same cases on every
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
  const { warm, historyOf } = commandReads(() => store);

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
});
