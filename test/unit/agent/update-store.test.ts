import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FINAL_PHASES, firmwareReportOf } from '../../../agent/core/update-progress.js';
import { type AgentStore, agentStoreFile, openAgentStore } from '../../../agent/store/agent-store.js';
import type { UpdateParams } from '../../../agent/store/update-store.js';
import { tempDir } from '../../helpers/agent.js';

const T0 = Date.parse('2026-03-01T10:00:00Z');
const params: UpdateParams = {
  update_id: 'upd-1',
  artifact_id: 'art-1',
  kind: 'firmware',
  version: '2.0.0',
  target: '',
  sha256: 'a'.repeat(64),
  size: 10,
  signature: 'x',
  install: 'when_idle',
};
const report = (status: 'download_scheduled' | 'downloading' | 'installed', n: number, progress?: number) =>
  firmwareReportOf({
    updateId: 'upd-1',
    reportId: `r-${n}`,
    phase: status,
    at: new Date(T0 + n).toISOString(),
    ...(progress !== undefined ? { progress } : {}),
  });

describe('update store', () => {
  let tmp: ReturnType<typeof tempDir>;
  let store: AgentStore;
  beforeEach(() => {
    tmp = tempDir();
    store = openAgentStore(tmp.dir, { now: () => T0 });
  });
  afterEach(() => {
    store.close();
    tmp.remove();
  });

  it('stores an update once, moves it with its reports queued in order, and keeps it across a reopen', () => {
    expect(
      store.updateInsert({ updateId: 'upd-1', commandId: 'cmd-1', params }, report('download_scheduled', 1)),
    ).toBe(true);
    expect(
      store.updateInsert({ updateId: 'upd-1', commandId: 'cmd-1', params }, report('download_scheduled', 2)),
    ).toBe(false);
    store.updateMove('upd-1', report('downloading', 3, 40));
    store.close();
    store = openAgentStore(tmp.dir, { now: () => T0 });
    expect(store.updateOfCommand('cmd-1')).toMatchObject({ phase: 'downloading', progress: 40, params });
    expect(store.updatesUnfinished(FINAL_PHASES).map((u) => u.updateId)).toEqual(['upd-1']);
    const queued = store.outbox.peek(10, 'firmware_status').map((i) => i.payload);
    expect(queued).toMatchObject([
      { status: 'download_scheduled', report_id: 'r-1' },
      { status: 'downloading', report_id: 'r-3', progress: 40 },
    ]);
    store.updateMove('upd-1', report('installed', 4), { reason: 'done' });
    expect(store.updatesUnfinished(FINAL_PHASES)).toEqual([]);
  });

  it('upgrades a schema-2 store: the outbox keeps its items and never reuses a seq', () => {
    store.enqueue([
      { kind: 'event', payload: { a: 1 } },
      { kind: 'event', payload: { a: 2 } },
    ]);
    const [first, second] = store.outbox.peek(2);
    store.outbox.ack([second!.seq]);
    store.close();
    // Back to schema 2: the outbox as it was (four kinds), no updates table.
    const db = new Database(agentStoreFile(tmp.dir));
    db.exec(`
      CREATE TABLE old_outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL CHECK (kind IN ('telemetry', 'event', 'charging_record', 'command_status')),
        payload TEXT NOT NULL, bytes INTEGER NOT NULL, created_at TEXT NOT NULL);
      INSERT INTO old_outbox SELECT * FROM outbox;
      UPDATE sqlite_sequence SET seq = (SELECT seq FROM sqlite_sequence WHERE name = 'outbox') WHERE name = 'old_outbox';
      DROP TABLE outbox; ALTER TABLE old_outbox RENAME TO outbox; DROP TABLE updates;
    `);
    db.pragma('user_version = 2');
    db.close();
    store = openAgentStore(tmp.dir, { now: () => T0 });
    expect(store.outbox.peek(10).map((i) => i.seq)).toEqual([first!.seq]);
    store.updateInsert({ updateId: 'upd-1', commandId: 'cmd-1', params }, report('download_scheduled', 1));
    const seqs = store.outbox.peek(10).map((i) => i.seq);
    expect(seqs).toHaveLength(2);
    expect(seqs[1]).toBeGreaterThan(second!.seq);
  });
});
