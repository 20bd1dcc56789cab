import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  AGENT_SCHEMA_VERSION,
  type AgentStore,
  agentStoreFile,
  openAgentStore,
  type SessionRow,
} from '../../../agent/store/agent-store.js';
import { tempDir } from '../../helpers/agent.js';

const T0 = Date.parse('2026-03-01T10:00:00Z');

describe('agent store', () => {
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

  it('creates a private WAL database at the current schema version', () => {
    const file = agentStoreFile(tmp.dir);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(`${file}-wal`).mode & 0o777).toBe(0o600);
    expect(store.db.pragma('journal_mode', { simple: true })).toBe('wal');
    // 2 = FULL: every commit is on disk before the agent acts on it.
    expect(store.db.pragma('synchronous', { simple: true })).toBe(2);
    expect(store.db.pragma('user_version', { simple: true })).toBe(AGENT_SCHEMA_VERSION);
  });

  it('keeps identity, token and state across a reopen; a new identity drops the token', () => {
    store.saveIdentity({
      deviceId: 'dev_1',
      secret: 's3cret',
      sn: 'SN-1',
      platformUrl: 'https://p',
      registeredAt: '2026-03-01T10:00:00.000Z',
    });
    store.saveToken({
      accessToken: 'tok',
      expiresAt: '2026-03-02T10:00:00.000Z',
      obtainedAt: '2026-03-01T10:00:00.000Z',
    });
    store.setState('clock_skew', { ms: 1234, at: '2026-03-01T10:00:00.000Z' });
    store.close();
    store = openAgentStore(tmp.dir, { now: () => T0 });
    expect(store.getIdentity()?.secret).toBe('s3cret');
    expect(store.getToken()?.accessToken).toBe('tok');
    expect(store.getState('clock_skew')?.ms).toBe(1234);
    store.saveIdentity({ ...store.getIdentity()!, secret: 'n3w' });
    expect(store.getToken()).toBeUndefined();
  });

  it('keeps a pending secret beside the confirmed one until it is promoted or discarded, across a reopen', () => {
    store.saveIdentity({
      deviceId: 'dev_1',
      secret: 'old',
      sn: 'SN-1',
      platformUrl: 'https://p',
      registeredAt: '2026-03-01T10:00:00.000Z',
    });
    const token = {
      accessToken: 'tok',
      expiresAt: '2026-03-02T10:00:00.000Z',
      obtainedAt: '2026-03-01T10:00:00.000Z',
    };
    store.saveToken(token);
    store.savePendingSecret('new', '2026-03-05T00:00:00.000Z');
    store.close();
    store = openAgentStore(tmp.dir, { now: () => T0 });
    // Nothing else changes: the old secret and its token serve until the new secret has worked.
    expect(store.getIdentity()).toMatchObject({
      secret: 'old',
      pendingSecret: 'new',
      pendingSince: '2026-03-05T00:00:00.000Z',
    });
    expect(store.getToken()).toEqual(token);
    // A step naming another pending secret (a stale view) changes nothing.
    store.promotePendingSecret('other', '2026-03-05T00:01:00.000Z');
    store.discardPendingSecret('other');
    expect(store.getIdentity()).toMatchObject({ secret: 'old', pendingSecret: 'new' });
    store.promotePendingSecret('new', '2026-03-05T00:01:00.000Z');
    const promoted = store.getIdentity();
    expect(promoted).toMatchObject({ secret: 'new', secretRotatedAt: '2026-03-05T00:01:00.000Z' });
    expect(promoted?.pendingSecret).toBeUndefined();
    expect(promoted?.pendingSince).toBeUndefined();

    store.savePendingSecret('never-known', '2026-03-06T00:00:00.000Z');
    store.discardPendingSecret('never-known');
    expect(store.getIdentity()).toMatchObject({ secret: 'new', secretRotatedAt: '2026-03-05T00:01:00.000Z' });
    expect(store.getIdentity()?.pendingSecret).toBeUndefined();

    // A new registration replaces the whole identity, a pending secret included.
    store.savePendingSecret('pending', '2026-03-07T00:00:00.000Z');
    store.saveIdentity({ ...store.getIdentity()!, secret: 'registered' });
    expect(store.getIdentity()?.pendingSecret).toBeUndefined();
  });

  it('upgrades a schema-1 store in place, keeping its identity', () => {
    store.saveIdentity({
      deviceId: 'dev_1',
      secret: 's3cret',
      sn: 'SN-1',
      platformUrl: 'https://p',
      registeredAt: '2026-03-01T10:00:00.000Z',
    });
    store.close();
    const db = new Database(agentStoreFile(tmp.dir));
    db.exec(
      'ALTER TABLE identity DROP COLUMN pending_secret; ALTER TABLE identity DROP COLUMN pending_since; DROP TABLE updates',
    );
    db.pragma('user_version = 1');
    db.close();
    // A technician's read-only view of the old store reads it without the new columns.
    const old = openAgentStore(tmp.dir, { readonly: true });
    expect(old.getIdentity()).toMatchObject({ secret: 's3cret' });
    expect(old.getIdentity()?.pendingSecret).toBeUndefined();
    old.close();
    store = openAgentStore(tmp.dir, { now: () => T0 });
    expect(store.db.pragma('user_version', { simple: true })).toBe(AGENT_SCHEMA_VERSION);
    store.savePendingSecret('new', '2026-03-05T00:00:00.000Z');
    expect(store.getIdentity()).toMatchObject({ secret: 's3cret', pendingSecret: 'new' });
  });

  it('refuses a store written by a newer agent', () => {
    store.close();
    const db = new Database(agentStoreFile(tmp.dir));
    db.pragma(`user_version = ${AGENT_SCHEMA_VERSION + 1}`);
    db.close();
    expect(() => openAgentStore(tmp.dir)).toThrow(/newer than this agent/);
    store = openAgentStore(tmp.dir, { readonly: true });
  });

  it('de-duplicates commands by command_id across restarts', () => {
    const entry = {
      commandId: 'cmd_1',
      command: 'stop',
      params: { connector_id: 1 },
      expiry: '2026-03-01T11:00:00.000Z',
    };
    expect(store.journalInsert(entry, '2026-03-01T10:00:00.000Z')).toBe(true);
    expect(store.journalInsert(entry, '2026-03-01T10:00:01.000Z')).toBe(false);
    store.close();
    store = openAgentStore(tmp.dir, { now: () => T0 });
    expect(store.journalInsert(entry, '2026-03-01T10:00:02.000Z')).toBe(false);
    expect(store.journalUnfinished().map((e) => e.commandId)).toEqual(['cmd_1']);
  });

  it('records a command status and its reports in one transaction', () => {
    store.journalInsert(
      { commandId: 'cmd_2', command: 'x', params: {}, expiry: '2026-03-01T11:00:00.000Z' },
      'a',
    );
    expect(() =>
      store.recordCommandStatus('cmd_2', [{ status: 'accepted' }, { status: 'succeeded' }], 't', () => {
        throw new Error('effect failed');
      }),
    ).toThrow('effect failed');
    expect(store.journalGet('cmd_2')?.status).toBe('received');
    expect(store.outbox.size().items).toBe(0);
    store.recordCommandStatus('cmd_2', [{ status: 'accepted' }, { status: 'succeeded', reason: 'ok' }], 't');
    expect(store.journalGet('cmd_2')).toMatchObject({ status: 'succeeded', reason: 'ok' });
    expect(store.outbox.peek(10).map((i) => i.payload)).toEqual([
      { command_id: 'cmd_2', status: 'accepted', timestamp: 't' },
      { command_id: 'cmd_2', status: 'succeeded', reason: 'ok', timestamp: 't' },
    ]);
  });

  it('keys limits by control_id: a repeat replaces, a reversal shortens, nothing extends', () => {
    const base = {
      control_id: 'ctl_1',
      kind: 'power_limit' as const,
      power_limit_percent: 50,
      starts_at: '2026-03-01T10:00:00.000Z',
      ends_at: '2026-03-01T12:00:00.000Z',
      commandId: 'cmd_a',
      receivedAt: '2026-03-01T10:00:00.000Z',
    };
    store.upsertLimit(base);
    store.upsertLimit({ ...base, commandId: 'cmd_b', ends_at: '2026-03-01T10:30:00.000Z' });
    expect(store.listLimits()).toHaveLength(1);
    expect(store.listLimits()[0]).toMatchObject({ commandId: 'cmd_b', ends_at: '2026-03-01T10:30:00.000Z' });
    // The original arriving late (after its reversal) cannot stretch the control again.
    store.upsertLimit({ ...base, commandId: 'cmd_a' });
    expect(store.listLimits()[0]?.ends_at).toBe('2026-03-01T10:30:00.000Z');
    expect(store.pruneLimits('2026-03-01T11:00:00.000Z')).toBe(1);
  });

  it('stores schedules per connector and overrides per connector', () => {
    const schedule = {
      schedule_id: 'night',
      enabled: true,
      type: 'daily' as const,
      time_slots: [{ start: '22:00', end: '06:00', action: 'charge' as const }],
      timezone: 'Europe/Berlin',
    };
    store.upsertSchedule(1, { ...schedule, received_at: '2026-03-01T09:00:00.000Z' }, 'cmd_s');
    store.upsertSchedule(2, schedule, 'cmd_s2');
    expect(store.listSchedules(1)).toEqual([
      { connectorId: 1, schedule: { ...schedule, received_at: '2026-03-01T09:00:00.000Z' } },
    ]);
    expect(store.listSchedules()).toHaveLength(2);
    expect(store.deleteSchedule(1, 'night')).toBe(true);
    expect(store.deleteSchedule(1, 'night')).toBe(false);
    store.setOverride(1, { kind: 'stop', commandId: 'cmd_x', since: 't' });
    expect(store.listOverrides().get(1)).toEqual({ kind: 'stop', commandId: 'cmd_x', since: 't' });
    store.setOverride(1, undefined);
    expect(store.listOverrides().size).toBe(0);
  });

  it('closes a session once, queuing its charging record in the same transaction', () => {
    const session: SessionRow = {
      recordId: 'rec-1',
      connectorId: 1,
      startedAt: '2026-03-01T10:00:00.000Z',
      meterStart: 10,
      meterLast: 12,
      exportStart: 0,
      exportLast: 0,
      maxPowerKw: 11,
      minPowerKw: 0,
      updatedAt: '2026-03-01T10:10:00.000Z',
    };
    store.insertSession(session);
    expect(() => store.insertSession({ ...session, recordId: 'rec-2' })).toThrow(/UNIQUE/);
    const record = {
      record_id: 'rec-1',
      connector_id: 1,
      start_time: session.startedAt,
      end_time: session.updatedAt,
      energy: 2,
    };
    store.closeSession(session, session.updatedAt, record);
    store.closeSession(session, session.updatedAt, record);
    expect(store.outbox.peek(10, 'charging_record')).toHaveLength(1);
    expect(store.openSessions()).toEqual([]);
    expect(store.listSessions(5)[0]?.endedAt).toBe(session.updatedAt);
  });

  it('lets a read-only reader (the technician CLI) look while the agent writes', () => {
    store.setState('last_error', { at: 't', where: 'x', message: 'boom' });
    const reader = openAgentStore(tmp.dir, { readonly: true });
    expect(reader.getState('last_error')?.message).toBe('boom');
    store.setState('last_error', { at: 't2', where: 'x', message: 'bang' });
    expect(reader.getState('last_error')?.message).toBe('bang');
    expect(() => reader.setState('last_error', { at: 't', where: 'x', message: 'no' })).toThrow();
    reader.close();
  });

  it('can live in memory (simulated chargers): same schema, no file, counts what it enqueued', () => {
    const dir = join(tmp.dir, 'memory-charger');
    const mem = openAgentStore(dir, { memory: true, now: () => T0 });
    expect(existsSync(dir)).toBe(false);
    expect(mem.file).toBe(':memory:');
    expect(mem.db.pragma('user_version', { simple: true })).toBe(AGENT_SCHEMA_VERSION);
    expect(mem.db.pragma('page_size', { simple: true })).toBe(1024);
    mem.setState('last_error', { at: 't', where: 'x', message: 'boom' });
    mem.enqueueEvents([
      { event_id: 'e1', kind: 'boot', severity: 'info', timestamp: '2026-03-01T10:00:00.000Z' },
    ]);
    expect(mem.getState('last_error')?.message).toBe('boom');
    expect(mem.outbox.size().items).toBe(1);
    expect(mem.outbox.enqueuedCounts()).toEqual({
      telemetry: 0,
      event: 1,
      charging_record: 0,
      command_status: 0,
      firmware_status: 0,
    });
    mem.close();
    expect(() => openAgentStore(dir, { memory: true, readonly: true })).toThrow(/read-only/);
  });
});
