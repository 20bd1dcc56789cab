import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSqliteStore } from '../../platform/storage/backends.js';
import { DATABASE_FILE } from '../../platform/storage/sqlite/store.js';
import type { Store } from '../../platform/storage/store.js';
import { registerOnStore } from '../helpers/sealed-writes.js';

/**
 * Another connection holding the write lock (the WAL checkpointer's RESTART does, briefly) must make a write
 * wait, not fail: every write transaction takes the write lock first. A transaction that read first and then
 * upgraded failed at once with SQLITE_BUSY (seen as 500s under a data-volume load).
 */
let dir: string;
let store: Store;
let deviceId: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cp-locks-'));
  store = createSqliteStore(dir);
  const op = await store.createOperator('A');
  const site = await store.createSite({ operator_id: op.operator_id, name: 's', timezone: 'UTC' });
  const reg = await registerOnStore(
    store,
    { sn: 'SN-LOCK', model: 'M', manufacturer: 'X', firmware_version: '1' },
    { registration: 'open', defaultSiteId: site.site_id },
  );
  if (reg.kind !== 'registered') throw new Error(reg.kind);
  deviceId = reg.device.device_id;
});
afterAll(async () => {
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

/** A worker thread that takes the write lock, writes, and holds it `ms` before committing. */
function holdWriteLock(ms: number): Promise<void> {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(
    `const { workerData, parentPort } = require('node:worker_threads');
     const Database = require(workerData.driver);
     const db = new Database(workerData.path);
     db.exec('BEGIN IMMEDIATE');
     db.prepare("INSERT INTO settings (key, value) VALUES ('lock-test', 'x') ON CONFLICT (key) DO UPDATE SET value = value || 'x'").run();
     parentPort.postMessage('locked');
     Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, workerData.ms);
     db.exec('COMMIT');
     db.close();`,
    { eval: true, workerData: { driver, path: join(dir, DATABASE_FILE), ms } },
  );
  return new Promise((resolve, reject) => {
    worker.once('message', () => resolve());
    worker.once('error', reject);
  });
}

describe('writes while another connection holds the write lock', () => {
  it.each([
    {
      name: 'charging records (the insert reads the charger’s operator first)',
      write: (i: number) =>
        store.insertChargingRecords([
          {
            record_id: `lock-${i}`,
            device_id: deviceId,
            connector_id: 1,
            start_time: new Date(Date.UTC(2026, 0, 1, i)).toISOString(),
            end_time: new Date(Date.UTC(2026, 0, 1, i, 30)).toISOString(),
            energy: 1,
          },
        ]),
    },
    {
      name: 'a charger moved to another site (its records and counts move too)',
      write: async () => store.assignDevice(deviceId, (await store.getDevice(deviceId))!.site_id!),
    },
    {
      name: 'events',
      write: (i: number) =>
        store.insertEvents(
          deviceId,
          [
            {
              event_id: `e${i}`,
              kind: 'k',
              severity: 'info',
              connector_id: null,
              ts_ms: i,
              message: null,
              data: null,
            },
          ],
          i,
        ),
    },
  ])('$name: waits for the lock and succeeds', async ({ write }) => {
    for (let i = 0; i < 3; i++) {
      await holdWriteLock(150);
      await expect(write(i)).resolves.toBeTruthy();
    }
  });
});
