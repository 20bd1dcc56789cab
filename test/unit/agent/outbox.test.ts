import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  groupByKind,
  type OutboxKind,
  planDrops,
  type QueuedItem,
} from '../../../agent/core/outbox-policy.js';
import { createOutbox, migrateOutbox, type OutboxItemInput } from '../../../agent/store/outbox.js';

describe('planDrops', () => {
  const item = (seq: number, kind: OutboxKind, bytes = 10): QueuedItem => ({ seq, kind, bytes });

  it('drops nothing within the cap', () => {
    const items = [item(1, 'telemetry'), item(2, 'event')];
    const plan = planDrops({ items: 2, bytes: 20 }, { maxItems: 2, maxBytes: 20 }, groupByKind(items));
    expect(plan.drop).toEqual([]);
    expect(plan.overCap).toBe(false);
  });

  it('drops the oldest telemetry first, then the oldest events, never records or statuses', () => {
    const items = [
      item(1, 'event'),
      item(2, 'charging_record'),
      item(3, 'telemetry'),
      item(4, 'command_status'),
      item(5, 'telemetry'),
      item(6, 'event'),
      item(7, 'telemetry'),
    ];
    const usage = { items: 7, bytes: 70 };
    expect(planDrops(usage, { maxItems: 5, maxBytes: 1_000 }, groupByKind(items)).drop).toEqual([3, 5]);
    const deeper = planDrops(usage, { maxItems: 3, maxBytes: 1_000 }, groupByKind(items));
    expect(deeper.drop).toEqual([3, 5, 7, 1]);
    expect(deeper.droppedByKind).toEqual({ telemetry: 3, event: 1 });
    expect(deeper.overCap).toBe(false);
    const impossible = planDrops(usage, { maxItems: 1, maxBytes: 1_000 }, groupByKind(items));
    expect(impossible.drop).toEqual([3, 5, 7, 1, 6]);
    expect(impossible.overCap).toBe(true);
    expect(impossible.usage).toEqual({ items: 2, bytes: 20 });
  });

  it('enforces the byte cap', () => {
    const items = [item(1, 'telemetry', 100), item(2, 'telemetry', 5), item(3, 'telemetry', 5)];
    const plan = planDrops({ items: 3, bytes: 110 }, { maxItems: 100, maxBytes: 50 }, groupByKind(items));
    expect(plan.drop).toEqual([1]);
    expect(plan.usage.bytes).toBe(10);
  });

  it('consumes the candidates lazily', () => {
    let pulled = 0;
    function* telemetry() {
      for (let seq = 1; seq <= 1_000; seq++) {
        pulled++;
        yield item(seq, 'telemetry');
      }
    }
    const plan = planDrops(
      { items: 1_000, bytes: 10_000 },
      { maxItems: 998, maxBytes: 1e9 },
      { telemetry: telemetry() },
    );
    expect(plan.drop).toEqual([1, 2]);
    expect(pulled).toBe(2);
  });
});

describe('SQLite outbox', () => {
  let dir: string;
  let file: string;
  const opened: Database.Database[] = [];

  function open(cap = { maxItems: 1_000, maxBytes: 1_000_000 }) {
    const db = new Database(file);
    opened.push(db);
    migrateOutbox(db);
    return createOutbox(db, { cap, now: () => new Date('2026-01-14T12:00:00Z') });
  }

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'outbox-test-'));
    file = path.join(dir, 'agent.db');
  });
  afterEach(() => {
    for (const db of opened.splice(0)) if (db.open) db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const telemetry = (n: number): OutboxItemInput => ({ kind: 'telemetry', payload: { n } });

  it('keeps insertion order, filters by kind and acks', () => {
    const outbox = open();
    const { seqs } = outbox.enqueue([
      telemetry(1),
      { kind: 'event', payload: { type: 'vehicle_plugged' } },
      telemetry(2),
      { kind: 'charging_record', payload: { record_id: 'r1' }, createdAt: new Date('2026-01-14T11:00:00Z') },
    ]);
    expect(seqs).toHaveLength(4);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    const all = outbox.peek(10);
    expect(all.map((i) => i.kind)).toEqual(['telemetry', 'event', 'telemetry', 'charging_record']);
    expect(all[0]).toMatchObject({ payload: { n: 1 }, createdAt: '2026-01-14T12:00:00.000Z', bytes: 7 });
    expect(all[3]?.createdAt).toBe('2026-01-14T11:00:00.000Z');
    expect(outbox.peek(1).map((i) => i.seq)).toEqual([seqs[0]]);
    expect(outbox.peek(10, 'telemetry').map((i) => i.payload)).toEqual([{ n: 1 }, { n: 2 }]);

    expect(outbox.ack([seqs[0] as number, seqs[2] as number, 999_999])).toBe(2);
    expect(outbox.peek(10).map((i) => i.kind)).toEqual(['event', 'charging_record']);
    expect(outbox.size()).toEqual({ items: 2, bytes: all[1]!.bytes + all[3]!.bytes });
  });

  it('tells whether anything waits, also after an enqueue whose transaction was rolled back', () => {
    const db = new Database(file);
    opened.push(db);
    migrateOutbox(db);
    const outbox = createOutbox(db);
    expect(outbox.isEmpty()).toBe(true);
    const { seqs } = outbox.enqueue([telemetry(1), telemetry(2)]);
    expect(outbox.isEmpty()).toBe(false);
    outbox.ack([seqs[0]!]);
    expect(outbox.isEmpty()).toBe(false);
    outbox.ack([seqs[1]!]);
    expect(outbox.isEmpty()).toBe(true);
    expect(() =>
      db.transaction(() => {
        outbox.enqueue([telemetry(3)]);
        throw new Error('the rest of the transaction failed');
      })(),
    ).toThrow(/failed/);
    expect(outbox.isEmpty()).toBe(true);
    outbox.enqueue([telemetry(4)]);
    expect(outbox.isEmpty()).toBe(false);
  });

  it('never reuses a seq after everything was acked', () => {
    const outbox = open();
    const first = outbox.enqueue([telemetry(1)]).seqs[0] as number;
    outbox.ack([first]);
    const second = outbox.enqueue([telemetry(2)]).seqs[0] as number;
    expect(second).toBeGreaterThan(first);
  });

  it('enforces the cap by dropping the oldest telemetry, then events, and counts the drops', () => {
    const outbox = open({ maxItems: 4, maxBytes: 1_000_000 });
    outbox.enqueue([
      { kind: 'charging_record', payload: { record_id: 'r1' } },
      telemetry(1),
      { kind: 'event', payload: { e: 1 } },
      { kind: 'command_status', payload: { command_id: 'c1' } },
    ]);
    const r1 = outbox.enqueue([telemetry(2), telemetry(3)]);
    expect(r1.droppedByKind).toEqual({ telemetry: 2 });
    expect(outbox.peek(10, 'telemetry').map((i) => i.payload)).toEqual([{ n: 3 }]);

    const r2 = outbox.enqueue([{ kind: 'charging_record', payload: { record_id: 'r2' } }]);
    expect(r2.droppedByKind).toEqual({ telemetry: 1 });
    const r3 = outbox.enqueue([{ kind: 'command_status', payload: { command_id: 'c2' } }]);
    expect(r3.droppedByKind).toEqual({ event: 1 });
    expect(r3.overCap).toBe(false);

    // Only never-dropped kinds left: the outbox grows past the cap rather than lose them.
    const r4 = outbox.enqueue([{ kind: 'charging_record', payload: { record_id: 'r3' } }, telemetry(4)]);
    expect(r4.droppedByKind).toEqual({ telemetry: 1 });
    expect(r4.overCap).toBe(true);
    expect(outbox.size().items).toBe(5);
    expect(outbox.peek(10).map((i) => i.kind)).toEqual([
      'charging_record',
      'command_status',
      'charging_record',
      'command_status',
      'charging_record',
    ]);
    expect(outbox.droppedCounts()).toEqual({
      telemetry: 4,
      event: 1,
      charging_record: 0,
      command_status: 0,
      firmware_status: 0,
    });
  });

  it('enforces the byte cap', () => {
    const outbox = open({ maxItems: 1_000, maxBytes: 100 });
    for (let n = 0; n < 20; n++) outbox.enqueue([telemetry(n)]);
    const { bytes, items } = outbox.size();
    expect(bytes).toBeLessThanOrEqual(100);
    expect(items).toBeGreaterThan(5);
    const kept = outbox.peek(100).map((i) => (i.payload as { n: number }).n);
    expect(kept.at(-1)).toBe(19);
    expect(kept).toEqual([...kept].sort((a, b) => a - b));
  });

  it('enqueues a batch in one transaction: a bad item leaves nothing behind', () => {
    const outbox = open();
    expect(() => outbox.enqueue([telemetry(1), { kind: 'telemetry', payload: undefined }])).toThrow(
      /not JSON/,
    );
    expect(outbox.size().items).toBe(0);
  });

  it('survives closing and reopening the database file', () => {
    const outbox = open({ maxItems: 2, maxBytes: 1_000_000 });
    outbox.enqueue([telemetry(1), telemetry(2), telemetry(3), { kind: 'event', payload: { e: 'x' } }]);
    opened[0]?.close();

    const reopened = open({ maxItems: 2, maxBytes: 1_000_000 });
    expect(reopened.peek(10).map((i) => i.payload)).toEqual([{ n: 3 }, { e: 'x' }]);
    expect(reopened.droppedCounts().telemetry).toBe(2);
    const next = reopened.enqueue([telemetry(4)]);
    expect(next.droppedByKind).toEqual({ telemetry: 1 });
    expect(reopened.peek(10).map((i) => i.payload)).toEqual([{ e: 'x' }, { n: 4 }]);
  });
});
