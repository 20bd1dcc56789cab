import { describe, expect, it } from 'vitest';
import { newId } from '../../platform/domain/ids.js';
import type { NewCommand, NewDiagnostics } from '../../platform/storage/store.js';
import { BACKENDS } from '../helpers/backends.js';
import { chargersOnStore, T0 } from '../helpers/chargers-on-store.js';

/**
 * The repository contract of diagnostics (DESIGN.md §20), the same cases on every backend: a request stored with
 * its command in one step; an upload's chunks stored by compare-and-set on `received` (a short last chunk
 * replaced when the next request completes it; a stale writer stores nothing); the archive finished or failed
 * once; listings newest first; retention takes old requests with their chunks.
 */
const DAY = 86_400_000;
const CHUNK = 16;

describe.each(BACKENDS)('store contract: diagnostics (%s)', (backend) => {
  const ctx = chargersOnStore(backend);

  async function chargerId(sn = 'SN-D'): Promise<string> {
    const { site } = await ctx.operatorWithSite(sn);
    return (await ctx.registered(sn, site.site_id)).device.device_id;
  }
  function request(deviceId: string, createdMs = T0): { row: NewDiagnostics; command: NewCommand } {
    const id = newId('diag');
    return {
      row: {
        diagnostics_id: id,
        device_id: deviceId,
        client_id: 'cli_x',
        start_ms: createdMs - DAY,
        end_ms: createdMs,
        chunk_bytes: CHUNK,
        created_ms: createdMs,
      },
      command: {
        device_id: deviceId,
        command: 'upload_diagnostics',
        params: { diagnostics_id: id },
        expiry_ms: createdMs + DAY,
        client_id: 'cli_x',
      },
    };
  }
  async function created(deviceId: string, createdMs = T0) {
    const r = request(deviceId, createdMs);
    const command = await ctx.store.createDiagnostics(r.row, r.command);
    return { id: r.row.diagnostics_id, command };
  }
  const bytes = (n: number, fill: number) => Buffer.alloc(n, fill);

  it('stores the request with its command in one step, each naming the other', async () => {
    const deviceId = await chargerId();
    const { id, command } = await created(deviceId);
    expect(command).toMatchObject({
      command: 'upload_diagnostics',
      status: 'queued',
      params: { diagnostics_id: id },
    });
    expect((await ctx.store.getCommand(command.command_id))?.command.status).toBe('queued');
    expect(await ctx.store.getDiagnostics(id)).toEqual({
      diagnostics_id: id,
      device_id: deviceId,
      client_id: 'cli_x',
      command_id: command.command_id,
      status: 'requested',
      start_ms: T0 - DAY,
      end_ms: T0,
      size: null,
      received: 0,
      sha256: null,
      reason: null,
      chunk_bytes: CHUNK,
      created_ms: T0,
      updated_ms: T0,
    });
    // The charger's poll finds it, as any command.
    expect((await ctx.store.takePendingCommands(deviceId, T0 + 1)).map((c) => c.command_id)).toEqual([
      command.command_id,
    ]);
    expect(await ctx.store.getDiagnostics('diag_missing')).toBeUndefined();
  });

  it('takes chunks only from the writer that holds `received`, and replaces a short last chunk', async () => {
    const { id } = await created(await chargerId());
    const size = 2 * CHUNK + 5;
    // Nothing stored before the upload begins, nor under another size.
    expect(await ctx.store.putDiagnosticsChunk(id, 0, bytes(CHUNK, 1), 0, T0 + 1)).toBe(false);
    const begun = await ctx.store.beginDiagnosticsUpload(id, { received: 0, size }, T0 + 1);
    expect(begun).toMatchObject({ status: 'uploading', size, received: 0, updated_ms: T0 + 1 });
    expect(
      await ctx.store.beginDiagnosticsUpload(id, { received: 0, size: size + 1 }, T0 + 1),
    ).toBeUndefined();

    expect(await ctx.store.putDiagnosticsChunk(id, 0, bytes(CHUNK, 1), 0, T0 + 2)).toBe(true);
    // A second writer that read `received` before: stores nothing.
    expect(await ctx.store.putDiagnosticsChunk(id, 0, bytes(CHUNK, 9), 0, T0 + 2)).toBe(false);
    expect(await ctx.store.putDiagnosticsChunk(id, 1, bytes(3, 2), CHUNK, T0 + 3)).toBe(true);
    expect((await ctx.store.getDiagnostics(id))?.received).toBe(CHUNK + 3);
    // The next request begins where the record ends and completes the short chunk.
    expect(await ctx.store.beginDiagnosticsUpload(id, { received: CHUNK, size }, T0 + 4)).toBeUndefined();
    expect(await ctx.store.beginDiagnosticsUpload(id, { received: CHUNK + 3, size }, T0 + 4)).toBeDefined();
    expect(await ctx.store.putDiagnosticsChunk(id, 1, bytes(CHUNK, 2), CHUNK + 3, T0 + 5)).toBe(true);
    expect(await ctx.store.putDiagnosticsChunk(id, 2, bytes(5, 3), 2 * CHUNK, T0 + 6)).toBe(true);
    expect(await ctx.store.getDiagnostics(id)).toMatchObject({ received: size, updated_ms: T0 + 6 });
    expect(await ctx.store.readDiagnosticsChunks(id, 0, 9)).toEqual([
      bytes(CHUNK, 1),
      bytes(CHUNK, 2),
      bytes(5, 3),
    ]);
    expect(await ctx.store.readDiagnosticsChunks(id, 1, 1)).toEqual([bytes(CHUNK, 2)]);
  });

  it('finishes once with every byte stored, fails only while open, and keeps what it ended with', async () => {
    const deviceId = await chargerId();
    const { id } = await created(deviceId);
    await ctx.store.beginDiagnosticsUpload(id, { received: 0, size: CHUNK + 1 }, T0 + 1);
    await ctx.store.putDiagnosticsChunk(id, 0, bytes(CHUNK, 1), 0, T0 + 1);
    // Not every byte yet.
    expect(await ctx.store.finishDiagnostics(id, 'ab'.repeat(32), T0 + 2)).toBeUndefined();
    await ctx.store.putDiagnosticsChunk(id, 1, bytes(1, 1), CHUNK, T0 + 2);
    const done = await ctx.store.finishDiagnostics(id, 'ab'.repeat(32), T0 + 3);
    expect(done).toMatchObject({
      status: 'available',
      sha256: 'ab'.repeat(32),
      size: CHUNK + 1,
      updated_ms: T0 + 3,
    });
    expect(await ctx.store.finishDiagnostics(id, 'cd'.repeat(32), T0 + 4)).toBeUndefined();
    expect(await ctx.store.failDiagnostics(id, 'too late', T0 + 4)).toBeUndefined();
    expect(await ctx.store.putDiagnosticsChunk(id, 1, bytes(1, 7), CHUNK + 1, T0 + 4)).toBe(false);
    expect(await ctx.store.getDiagnostics(id)).toEqual(done);

    const { id: other } = await created(deviceId);
    const failed = await ctx.store.failDiagnostics(other, 'disk full', T0 + 5);
    expect(failed).toMatchObject({ status: 'failed', reason: 'disk full', updated_ms: T0 + 5 });
    expect(await ctx.store.failDiagnostics(other, 'again', T0 + 6)).toBeUndefined();
    expect(await ctx.store.beginDiagnosticsUpload(other, { received: 0, size: 1 }, T0 + 6)).toBeUndefined();
    expect(await ctx.store.failDiagnostics('diag_missing', 'x', T0)).toBeUndefined();
  });

  it('lists a device’s requests newest first, ties by id descending, in pages', async () => {
    const deviceId = await chargerId();
    const otherId = await chargerId('SN-OTHER');
    const ids = [
      (await created(deviceId, T0)).id,
      (await created(deviceId, T0 + 1)).id,
      (await created(deviceId, T0 + 1)).id,
      (await created(deviceId, T0 + 2)).id,
    ];
    await created(otherId, T0 + 3);
    const [tieLow, tieHigh] = [ids[1]!, ids[2]!].sort();
    const expected = [ids[3], tieHigh, tieLow, ids[0]];
    const all = await ctx.store.listDeviceDiagnostics(deviceId, 1, 10);
    expect(all).toMatchObject({ total: 4, page: 1, size: 10 });
    expect(all.items.map((r) => r.diagnostics_id)).toEqual(expected);
    const second = await ctx.store.listDeviceDiagnostics(deviceId, 2, 3);
    expect(second.items.map((r) => r.diagnostics_id)).toEqual([ids[0]]);
    expect(await ctx.store.listDeviceDiagnostics('dev_none', 1, 10)).toEqual({
      total: 0,
      page: 1,
      size: 10,
      items: [],
    });
  });

  it('retention deletes requests older than 30 days with their chunks, in batches, and keeps the others', async () => {
    const deviceId = await chargerId();
    const old: string[] = [];
    for (let i = 0; i < 7; i++) {
      const { id } = await created(deviceId, T0 + i);
      await ctx.store.beginDiagnosticsUpload(id, { received: 0, size: CHUNK + 1 }, T0 + i);
      await ctx.store.putDiagnosticsChunk(id, 0, bytes(CHUNK, i), 0, T0 + i);
      old.push(id);
    }
    const { id: kept } = await created(deviceId, T0 + DAY);
    ctx.tick(30 * DAY + 10);
    await ctx.store.runMaintenance();
    for (const id of old) {
      expect(await ctx.store.getDiagnostics(id)).toBeUndefined();
      expect(await ctx.store.readDiagnosticsChunks(id, 0, 9)).toEqual([]);
    }
    expect(await ctx.store.getDiagnostics(kept)).toBeDefined();
    expect(ctx.store.maintenanceStats().pruned.diagnostics).toBe(7);
  });
});
