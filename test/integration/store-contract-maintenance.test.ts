import { describe, expect, it } from 'vitest';
import { availabilityAfter } from '../../platform/domain/maintenance.js';
import type { NewCommand } from '../../platform/storage/store.js';
import { BACKENDS } from '../helpers/backends.js';
import { chargersOnStore, record, T0 } from '../helpers/chargers-on-store.js';

/**
 * The repository contract of remote maintenance (DESIGN.md §20), the same cases on every backend: a command's
 * reported result, a connector's availability set by the report that finishes a `set_availability`, and each
 * charger's reported configuration (the newest wins).
 */

describe.each(BACKENDS)('store contract: remote maintenance (%s)', (backend) => {
  const ctx = chargersOnStore(backend);
  const { operatorWithSite, registered } = ctx;

  /** A registered charger with connectors 1 and 2 (2 V2G-capable). */
  async function chargerId(sn = 'SN-M'): Promise<string> {
    const { site } = await operatorWithSite(sn);
    const connectors = [
      { connector_id: 1, max_power_kw: 11, v2g_capable: false },
      { connector_id: 2, max_power_kw: 22, v2g_capable: true },
    ];
    return (await registered(sn, site.site_id, { connectors })).device.device_id;
  }
  const command = (deviceId: string, kind: NewCommand['command'], params: Record<string, unknown>) => ({
    device_id: deviceId,
    command: kind,
    params,
    expiry_ms: T0 + 3_600_000,
  });
  const queue = async (c: NewCommand) => (await ctx.store.enqueueCommands([c], T0))[0]!.command_id;
  const availableOf = async (deviceId: string) =>
    (await ctx.store.listConnectors(deviceId)).map((c) => [c.connector_id, c.available]);

  describe('a command’s result', () => {
    it('is null until a report that moves the command carries one, then kept by later reports without', async () => {
      const id = await chargerId();
      const commandId = await queue(command(id, 'unlock_connector', { connector_id: 1 }));
      expect((await ctx.store.getCommand(commandId))?.command.result).toBeNull();
      const delivered: Array<unknown> = [];
      await ctx.store.takePendingCommands(id, T0 + 1, (c) => delivered.push(c.result));
      expect(delivered).toEqual([null]);

      const result = { lock: 'released', readings: [1.5, null, { nested: true }], text: 'é ✓' };
      const accepted = await ctx.store.reportCommandStatus(
        id,
        commandId,
        { status: 'accepted', result },
        T0 + 2,
      );
      expect(accepted).toMatchObject({
        outcome: 'ok',
        changed: true,
        command: { status: 'accepted', result },
      });
      expect((await ctx.store.getCommand(commandId))?.command.result).toEqual(result);

      // A repeat does not move the command: its result is not taken.
      const repeat = await ctx.store.reportCommandStatus(
        id,
        commandId,
        { status: 'accepted', result: { other: 1 } },
        T0 + 3,
      );
      expect(repeat).toMatchObject({ outcome: 'ok', changed: false, command: { result } });
      // A report that moves it without a result keeps the one stored.
      const done = await ctx.store.reportCommandStatus(id, commandId, { status: 'succeeded' }, T0 + 4);
      expect(done).toMatchObject({ outcome: 'ok', changed: true, command: { status: 'succeeded', result } });
      const stored = await ctx.store.getCommand(commandId);
      expect(stored?.command).toMatchObject({ status: 'succeeded', result, updated_ms: T0 + 4 });
      const page = await ctx.store.listDeviceCommands(id, { page: 1, size: 10 });
      expect(page.items.map((i) => i.command.result)).toEqual([result]);
    });

    it('a report that moves it with a new result replaces the earlier one', async () => {
      const id = await chargerId();
      const commandId = await queue(command(id, 'reset', { mode: 'immediate', target: 'agent' }));
      await ctx.store.reportCommandStatus(id, commandId, { status: 'accepted', result: { step: 1 } }, T0 + 1);
      await ctx.store.reportCommandStatus(id, commandId, { status: 'failed', result: { step: 2 } }, T0 + 2);
      expect((await ctx.store.getCommand(commandId))?.command).toMatchObject({
        status: 'failed',
        result: { step: 2 },
      });
    });
  });

  describe('a connector’s availability', () => {
    it('is true for every connector until a set_availability succeeds, then what its params said', async () => {
      const id = await chargerId();
      expect(await availableOf(id)).toEqual([
        [1, true],
        [2, true],
      ]);
      const off = await queue(command(id, 'set_availability', { connector_id: 2, available: false }));
      await ctx.store.reportCommandStatus(id, off, { status: 'accepted' }, T0 + 1, availabilityAfter);
      expect(await availableOf(id)).toEqual([
        [1, true],
        [2, true],
      ]);
      await ctx.store.reportCommandStatus(id, off, { status: 'succeeded' }, T0 + 2, availabilityAfter);
      expect(await availableOf(id)).toEqual([
        [1, true],
        [2, false],
      ]);
      expect((await ctx.store.getConnector(id, 2))?.available).toBe(false);
      expect((await ctx.store.listConnectorsOf([id])).map((c) => c.available)).toEqual([true, false]);

      // A repeat of the report does not apply it again; a failed one does not apply it at all.
      const on = await queue(command(id, 'set_availability', { connector_id: 2, available: true }));
      await ctx.store.reportCommandStatus(id, on, { status: 'failed' }, T0 + 3, availabilityAfter);
      await ctx.store.reportCommandStatus(id, off, { status: 'succeeded' }, T0 + 4, () => ({
        connector_id: 1,
        available: false,
      }));
      expect(await availableOf(id)).toEqual([
        [1, true],
        [2, false],
      ]);
      const again = await queue(command(id, 'set_availability', { connector_id: 2, available: true }));
      await ctx.store.reportCommandStatus(id, again, { status: 'succeeded' }, T0 + 5, availabilityAfter);
      expect(await availableOf(id)).toEqual([
        [1, true],
        [2, true],
      ]);
    });

    it('is kept beside the live state, for a connector learned from telemetry too', async () => {
      const id = await chargerId();
      await ctx.store.recordTelemetry(id, [record(3, T0, { state: 'charging', power: 9 })], T0);
      const off = await queue(command(id, 'set_availability', { connector_id: 3, available: false }));
      await ctx.store.reportCommandStatus(id, off, { status: 'succeeded' }, T0 + 1, availabilityAfter);
      expect(await ctx.store.getConnector(id, 3)).toMatchObject({
        connector_id: 3,
        available: false,
        state: 'charging',
        power: 9,
        last_telemetry_ms: T0,
      });
      // Newer telemetry moves the live state and leaves the availability alone.
      await ctx.store.recordTelemetry(id, [record(3, T0 + 5_000, { state: 'idle', power: 0 })], T0 + 5_000);
      expect(await ctx.store.getConnector(id, 3)).toMatchObject({ available: false, state: 'idle' });
      expect(await availableOf(id)).toEqual([
        [1, true],
        [2, true],
        [3, false],
      ]);
    });
  });

  describe('the reported configuration', () => {
    it('is none until reported; the newest report wins, a late or same-instant one is not kept', async () => {
      const id = await chargerId();
      const other = await chargerId('SN-OTHER');
      expect(await ctx.store.getConfiguration(id)).toBeUndefined();
      const first = {
        values: { log_level: 'info', telemetry_interval_seconds: 5, flag: true },
        reported_at_ms: T0,
      };
      expect(await ctx.store.recordConfiguration(id, first)).toBe(true);
      expect(await ctx.store.getConfiguration(id)).toEqual(first);

      const newer = { values: { log_level: 'debug' }, reported_at_ms: T0 + 1_000 };
      expect(await ctx.store.recordConfiguration(id, newer)).toBe(true);
      expect(await ctx.store.recordConfiguration(id, { ...first, reported_at_ms: T0 + 500 })).toBe(false);
      expect(
        await ctx.store.recordConfiguration(id, {
          values: { log_level: 'warn' },
          reported_at_ms: T0 + 1_000,
        }),
      ).toBe(false);
      expect(await ctx.store.getConfiguration(id)).toEqual(newer);
      // Each charger its own.
      expect(await ctx.store.getConfiguration(other)).toBeUndefined();
      expect(await ctx.store.recordConfiguration(other, first)).toBe(true);
      expect(await ctx.store.getConfiguration(other)).toEqual(first);
      expect(await ctx.store.getConfiguration(id)).toEqual(newer);
    });
  });
});
