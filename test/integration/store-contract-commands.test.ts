import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CommandRow, Store } from '../../platform/storage/store.js';
import { BACKENDS, openTestStore, type TestStore } from '../helpers/backends.js';
import { cmd, commandReads, MINUTE, T0 } from '../helpers/command-rows.js';

/**
 * The contract of CommandRepository, the same cases on every backend: what one backend does, the other
 * must do too (orders included). Here: enqueueing and taking, status reports, cancellation and expiry; controls
 * and schedules are in store-contract-controls, a device's commands and history in store-contract-history. Each
 * test gets a fresh store; the clock is passed explicitly to the repository methods, so `t` only matters where
 * the store reads it itself.
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
  const { warm, statusOf, historyOf } = commandReads(() => store);

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
        result: null,
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
});
