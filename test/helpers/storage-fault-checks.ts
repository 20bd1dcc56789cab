import { closeSync, openSync, writeSync } from 'node:fs';
import Database from 'better-sqlite3';
import { expect } from 'vitest';
import type { ServeProcess } from './cli.js';
import { type Charger, TELEMETRY_EPOCH_MS } from './fault-chargers.js';
import { expectError, type HttpClient } from './platform.js';

/**
 * The writes and checks of storage-faults.test.ts: one write of each kind a charger or an operator makes, the
 * storage-fault contract each must be refused with (503/9001, Retry-After, nothing leaked), the reads that must
 * keep working, and the proof that nothing of a refused write had been stored.
 */

export const STORAGE_FULL = 'Storage is full; try again later';
/** A file system turned read-only under SQLite shows as read-only or as an I/O error, depending on the call. */
export const STORAGE_READ_ONLY = /^Storage is (read-only|unavailable); try again later$/;
/** A stack frame, a SQLite code or message, or a path in what a client or an operator's terminal shows. */
const LEAK = /\n\s+at |SQLITE_|SqliteError|database or disk|disk I\/O|\/tmp\//;

/** The platform's storage-fault log lines (pino JSON on stdout). */
export function storageFaultLogs(srv: ServeProcess): string[] {
  return srv
    .stdout()
    .split('\n')
    .filter((l) => l.includes('"storage_fault"'));
}

/** Fills the file system holding `path` until it has no byte left. */
export function fillDisk(path: string): number {
  const fd = openSync(path, 'w');
  let written = 0;
  try {
    for (const size of [1 << 20, 64 << 10, 4 << 10, 512, 1]) {
      const chunk = Buffer.alloc(size, 0x55);
      for (;;) {
        try {
          written += writeSync(fd, chunk);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
          break;
        }
      }
    }
  } finally {
    closeSync(fd);
  }
  return written;
}

export function integrityCheck(dbPath: string): unknown {
  const db = new Database(dbPath, { readonly: true, fileMustExist: true });
  try {
    return { integrity: db.pragma('integrity_check', { simple: true }), fk: db.pragma('foreign_key_check') };
  } finally {
    db.close();
  }
}

interface Write {
  path: string;
  token: string;
  json: unknown;
}

/** Builders of one write of each kind a charger or an operator makes, each with a fresh payload. */
export function writesOf(charger: Charger, opToken: string, commandId: string): Record<string, () => Write> {
  let n = 0;
  const device = (path: string, json: unknown): Write => ({ path, token: charger.token, json });
  const at = () => new Date(TELEMETRY_EPOCH_MS + ++n * 1000).toISOString();
  return {
    telemetry: () => device('/v1/device/telemetry', { timestamp: at(), connector_id: 1, state: 'idle' }),
    'telemetry batch': () =>
      device('/v1/device/telemetry/batch', {
        records: Array.from({ length: 50 }, () => ({
          timestamp: at(),
          connector_id: 2,
          state: 'charging',
          power: 7.4,
        })),
      }),
    heartbeat: () =>
      device('/v1/device/heartbeat', {
        timestamp: new Date().toISOString(),
        status: 'online',
        fault_code: 0,
      }),
    events: () =>
      device('/v1/device/events', { events: [{ event_id: `e-${++n}`, kind: 'boot', timestamp: at() }] }),
    'charging records': () =>
      device('/v1/device/charging-records', {
        records: [
          {
            record_id: `r-${++n}`,
            connector_id: 1,
            start_time: '2025-03-01T10:00:00Z',
            end_time: '2025-03-01T11:00:00Z',
            energy: 11,
          },
        ],
      }),
    'command status': () => device(`/v1/device/commands/${commandId}/status`, { status: 'accepted' }),
    'operator stop': () => ({
      path: `/v1/operator/devices/${charger.deviceId}/connectors/1/stop`,
      token: opToken,
      json: {},
    }),
  };
}

export const send = (http: HttpClient, w: Write) => http.post(w.path, { token: w.token, json: w.json });

/** Each write refused with the storage-fault contract; returns them, to be sent again later. */
export async function expectWritesRefused(
  http: HttpClient,
  writes: Record<string, () => Write>,
  message: string | RegExp,
): Promise<Array<[string, Write]>> {
  const refused: Array<[string, Write]> = [];
  for (const [name, make] of Object.entries(writes)) {
    const w = make();
    const res = await send(http, w);
    const body = expectError(res, 503, 9001);
    expect(Object.keys(body), name).toEqual(['code', 'message']);
    if (typeof message === 'string') expect(body.message, name).toBe(message);
    else expect(body.message, name).toMatch(message);
    expect(res.headers['retry-after'], name).toBe('30');
    expect(res.text, name).not.toMatch(LEAK);
    refused.push([name, w]);
  }
  return refused;
}

/**
 * The refused writes, sent again verbatim once storage works: each succeeds and is stored now for the first
 * time (never a duplicate), so nothing of a refused request had been stored.
 */
export async function expectRefusedWritesLandOnce(http: HttpClient, refused: Array<[string, Write]>) {
  for (const [name, w] of refused) {
    const res = await send(http, w);
    expect(res.status, `${name}: ${res.text}`).toBe(200);
    const data = res.body.data;
    if (name === 'telemetry batch') expect(data).toEqual({ accepted: 50, duplicates: 0 });
    if (name === 'events' || name === 'charging records')
      expect(data).toEqual({ accepted: 1, duplicates: 0 });
    if (name === 'command status') expect(data).toMatchObject({ status: 'accepted', changed: true });
    if (name === 'operator stop') expect(data.status).toBe('queued');
  }
}

/** Reads an operator and a charger make: all must keep working while writes are refused. */
export async function expectReadsWork(http: HttpClient, charger: Charger, opToken: string, records: number) {
  const device = await http.get(`/v1/operator/devices/${charger.deviceId}`, { token: opToken });
  expect(device.status, device.text).toBe(200);
  const list = await http.get(`/v1/operator/charging-records?device_id=${charger.deviceId}`, {
    token: opToken,
  });
  expect(list.status, list.text).toBe(200);
  expect(list.body.data.total).toBe(records);
  const events = await http.get(`/v1/operator/devices/${charger.deviceId}/events`, { token: opToken });
  expect(events.status, events.text).toBe(200);
  expect((await http.get('/healthz')).status).toBe(200);
}

/** A charger with one command delivered to it (for status reports), and a first acknowledged record. */
export async function prepareCharger(http: HttpClient, charger: Charger, opToken: string): Promise<string> {
  const stop = await http.post(`/v1/operator/devices/${charger.deviceId}/connectors/1/stop`, {
    token: opToken,
    json: {},
  });
  expect(stop.status, stop.text).toBe(200);
  const hb = await http.post('/v1/device/heartbeat', {
    token: charger.token,
    json: { timestamp: new Date().toISOString(), status: 'online', fault_code: 0 },
  });
  expect(hb.status, hb.text).toBe(200);
  expect(hb.body.data.commands.map((c: { command_id: string }) => c.command_id)).toContain(
    stop.body.data.command_id,
  );
  const rec = await http.post('/v1/device/charging-records', {
    token: charger.token,
    json: {
      records: [
        {
          record_id: 'before',
          connector_id: 1,
          start_time: '2025-02-01T10:00:00Z',
          end_time: '2025-02-01T11:00:00Z',
          energy: 5,
        },
      ],
    },
  });
  expect(rec.status, rec.text).toBe(200);
  return stop.body.data.command_id;
}
