import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { StoredSchedule } from '../../../agent/core/schedule-engine.js';
import { type AgentStore, openAgentStore } from '../../../agent/store/agent-store.js';
import { timeZonesCheck } from '../../../agent/technician/diag/time-zone-checks.js';
import { tempDir } from '../../helpers/agent.js';
import { writeTzif } from '../../helpers/tzif-writer.js';

const schedule = (id: string, timezone: string): StoredSchedule => ({
  schedule_id: id,
  type: 'daily',
  enabled: true,
  time_slots: [{ start: '01:00', end: '05:00', action: 'charge' }],
  timezone,
});

describe('diag time_zones', () => {
  let tmp: ReturnType<typeof tempDir>;
  let store: AgentStore;
  let zones: string;
  beforeEach(() => {
    tmp = tempDir();
    store = openAgentStore(path.join(tmp.dir, 'data'));
    zones = path.join(tmp.dir, 'zoneinfo');
    mkdirSync(path.join(zones, 'Europe'), { recursive: true });
    writeFileSync(path.join(zones, 'UTC'), writeTzif({ types: [{ utoff: 0 }] }));
    writeFileSync(
      path.join(zones, 'Europe/Berlin'),
      writeTzif({ types: [{ utoff: 3600 }], footer: 'CET-1' }),
    );
    writeFileSync(path.join(zones, 'Europe/Paris'), 'not a zone file');
    writeFileSync(path.join(zones, 'tzdata.zi'), '# version 2031x\n');
  });
  afterEach(() => {
    store.close();
    tmp.remove();
  });

  it('passes when every zone of the stored schedules is in the database, naming its release', () => {
    store.upsertSchedule(1, schedule('a', 'Europe/Berlin'), 'cmd_1');
    store.upsertSchedule(2, schedule('b', 'Europe/Berlin'), 'cmd_2');
    const outcome = timeZonesCheck({ dataDir: tmp.dir, timeoutMs: 1000, store }, zones);
    expect(outcome).toMatchObject({
      status: 'pass',
      hint: null,
      data: { release: '2031x', zones: [{ zone: 'Europe/Berlin', source: 'tz_database' }] },
    });
    expect(outcome.detail).toContain(`Europe/Berlin from ${zones} (release 2031x; Node's ICU: `);
  });

  it('warns, with a hint, for a zone the database lacks or holds unreadable (the agent then uses ICU)', () => {
    store.upsertSchedule(1, schedule('a', 'Europe/Berlin'), 'cmd_1');
    store.upsertSchedule(1, schedule('b', 'Europe/Paris'), 'cmd_2');
    store.upsertSchedule(2, schedule('c', 'America/New_York'), 'cmd_3');
    const outcome = timeZonesCheck({ dataDir: tmp.dir, timeoutMs: 1000, store }, zones);
    expect(outcome.status).toBe('warn');
    expect(outcome.detail).toMatch(/America\/New_York \(ENOENT.*\), Europe\/Paris \(not a TZif file/);
    expect(outcome.hint).toMatch(/tzdata.*TZDIR/);
    expect(outcome.data?.zones).toEqual([
      { zone: 'America/New_York', source: 'icu' },
      { zone: 'Europe/Berlin', source: 'tz_database' },
      { zone: 'Europe/Paris', source: 'icu' },
    ]);
  });

  it('without schedules: passes with a database, warns without one', () => {
    expect(timeZonesCheck({ dataDir: tmp.dir, timeoutMs: 1000, store }, zones).status).toBe('pass');
    const none = timeZonesCheck({ dataDir: tmp.dir, timeoutMs: 1000 }, path.join(tmp.dir, 'nowhere'));
    expect(none).toMatchObject({ status: 'warn', data: { release: null, zones: [] } });
    expect(none.detail).toMatch(/no tz database at/);
  });
});
