import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../../agent/clock.js';
import type { DeviceApi } from '../../../agent/link/platform-client.js';
import { PlatformError } from '../../../agent/link/platform-errors.js';
import { createUplink, offendingIndex } from '../../../agent/link/uplink.js';
import { type AgentStore, openAgentStore } from '../../../agent/store/agent-store.js';
import type { TelemetryRecord } from '../../../shared/device-api.js';
import { quietLogger, tempDir } from '../../helpers/agent.js';

const T0 = Date.parse('2026-06-01T00:00:00Z');
const telemetry = (i: number): TelemetryRecord => ({
  timestamp: new Date(T0 + i * 5_000).toISOString(),
  connector_id: 1,
  state: 'charging',
  power: 11,
});

type Call = { what: string; at: number; count: number; first?: unknown };

/** A DeviceApi that records calls and answers from a script (default: success). */
function fakeApi(script: (call: Call) => Error | undefined = () => undefined) {
  const calls: Call[] = [];
  const answer = async <T>(call: Call, value: T): Promise<T> => {
    calls.push(call);
    const error = script(call);
    if (error) throw error;
    return value;
  };
  const api: DeviceApi = {
    downloadArtifact: () => Promise.reject(new Error('no downloads here')),
    diagnosticsState: () => Promise.reject(new Error('no diagnostics here')),
    uploadDiagnostics: () => Promise.reject(new Error('no diagnostics here')),
    heartbeat: async () => ({ commands: [], unusable: 0, serverTime: new Date().toISOString() }),
    pollCommands: async () => ({ commands: [], unusable: 0, serverTime: new Date().toISOString() }),
    reportCommandStatus: (id, report) =>
      answer(
        { what: 'status', at: Date.now(), count: 1, first: `${id}:${report.status}` },
        { command_id: id, status: 'accepted', changed: true },
      ),
    sendTelemetry: (r) =>
      answer({ what: 'telemetry', at: Date.now(), count: 1, first: r.timestamp }, { accepted: 1 }),
    sendTelemetryBatch: (rs) =>
      answer(
        { what: 'batch', at: Date.now(), count: rs.length, first: rs[0]?.timestamp },
        { accepted: rs.length, duplicates: 0 },
      ),
    sendEvents: (es) =>
      answer(
        { what: 'events', at: Date.now(), count: es.length, first: es[0]?.event_id },
        { accepted: es.length, duplicates: 0 },
      ),
    sendChargingRecords: (rs) =>
      answer(
        { what: 'records', at: Date.now(), count: rs.length, first: rs[0]?.record_id },
        { accepted: rs.length, duplicates: 0 },
      ),
    reportFirmwareStatus: async (r) => ({ status: r.status }),
    rotateSecret: async () => ({ device_id: 'd', device_secret: 's', expires_in: 1 }),
  };
  return { api, calls };
}

describe('uplink and outbox replay', () => {
  let tmp: ReturnType<typeof tempDir>;
  let store: AgentStore;
  beforeEach(() => {
    vi.useFakeTimers({ now: T0, toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    tmp = tempDir();
    store = openAgentStore(tmp.dir);
  });
  afterEach(() => {
    store.close();
    tmp.remove();
    vi.useRealTimers();
  });

  it('replays oldest first: telemetry in batches of 500, statuses one by one, records and events batched', async () => {
    store.enqueue(
      Array.from({ length: 600 }, (_, i) => ({ kind: 'telemetry' as const, payload: telemetry(i) })),
    );
    store.journalInsert({ commandId: 'cmd_1', command: 'stop', params: {}, expiry: 'x' }, 'x');
    store.recordCommandStatus('cmd_1', [{ status: 'accepted' }, { status: 'succeeded' }], 'x');
    store.enqueue([{ kind: 'charging_record', payload: { record_id: 'rec-1' } }]);
    store.enqueue(
      Array.from({ length: 450 }, (_, i) => ({ kind: 'telemetry' as const, payload: telemetry(600 + i) })),
    );
    store.enqueueEvents([{ event_id: 'ev-1', kind: 'boot', severity: 'info', timestamp: 'x' }]);
    const { api, calls } = fakeApi();
    const uplink = createUplink({
      store,
      clock: systemClock,
      logger: quietLogger(),
      api: () => api,
      paceMs: 0,
    });

    const outcomes = [];
    for (;;) {
      const o = await uplink.flushOnce();
      outcomes.push(o.kind);
      if (o.kind === 'empty') break;
    }
    expect(calls.map((c) => [c.what, c.count, c.first])).toEqual([
      ['batch', 500, telemetry(0).timestamp],
      // The telemetry within the next 500 items (skipping the 3 others): order within a kind is kept.
      ['batch', 497, telemetry(500).timestamp],
      ['status', 1, 'cmd_1:accepted'],
      ['status', 1, 'cmd_1:succeeded'],
      ['records', 1, 'rec-1'],
      ['batch', 53, telemetry(997).timestamp],
      ['events', 1, 'ev-1'],
    ]);
    expect(store.outbox.size().items).toBe(0);
    expect(uplink.stats().delivered).toEqual({
      telemetry: 1050,
      event: 1,
      charging_record: 1,
      command_status: 2,
      firmware_status: 0,
    });
  });

  it('sends a burst of reports at once and paces a long replay at one request per paceMs', async () => {
    store.journalInsert({ commandId: 'cmd_1', command: 'stop', params: {}, expiry: 'x' }, 'x');
    store.recordCommandStatus('cmd_1', [{ status: 'accepted' }, { status: 'succeeded' }], 'x');
    // 3,000 telemetry records: six batches of 500 after the two statuses.
    store.enqueue(
      Array.from({ length: 3_000 }, (_, i) => ({ kind: 'telemetry' as const, payload: telemetry(i) })),
    );
    const { api, calls } = fakeApi();
    const uplink = createUplink({
      store,
      clock: systemClock,
      logger: quietLogger(),
      api: () => api,
      paceMs: 200,
      paceBurst: 3,
    });
    const abort = new AbortController();
    const running = uplink.run(abort.signal);
    await vi.advanceTimersByTimeAsync(0);
    // The burst: both statuses and the first batch went out without waiting.
    expect(calls.map((c) => [c.what, c.at - T0])).toEqual([
      ['status', 0],
      ['status', 0],
      ['batch', 0],
    ]);
    await vi.advanceTimersByTimeAsync(2_000);
    abort.abort();
    await running;
    // Then one request per 200 ms, never faster.
    const later = calls.slice(3).map((c) => c.at - T0);
    expect(later).toEqual([200, 400, 600, 800, 1_000]);
    expect(store.outbox.size().items).toBe(0);
  });

  it('backs off with capped exponential delays and never sooner than retry_after', async () => {
    store.enqueue([{ kind: 'telemetry', payload: telemetry(0) }]);
    let failures = 0;
    const { api, calls } = fakeApi(() => {
      failures += 1;
      if (failures === 1)
        return new PlatformError('rate_limited', '429', { status: 429, retryAfterSeconds: 30 });
      if (failures <= 6) return new PlatformError('network', 'ECONNREFUSED');
      return undefined;
    });
    const uplink = createUplink({
      store,
      clock: systemClock,
      logger: quietLogger(),
      api: () => api,
      random: () => 0.999,
      backoff: { baseMs: 1_000, capMs: 8_000 },
      paceMs: 0,
    });
    const abort = new AbortController();
    const running = uplink.run(abort.signal);
    await vi.advanceTimersByTimeAsync(120_000);
    abort.abort();
    await running;
    const gaps = calls.slice(1).map((c, i) => c.at - calls[i]!.at);
    // 429: the server's 30 s plus jitter below one base step; then full-jitter exponential (max of each range).
    expect(gaps[0]).toBeGreaterThanOrEqual(30_000);
    expect(gaps[0]).toBeLessThan(31_000);
    expect(gaps.slice(1)).toEqual([1_998, 3_996, 7_992, 7_992, 7_992]);
    expect(store.outbox.size().items).toBe(0);
    expect(store.getState('last_error')?.where).toBe('flush');
  });

  it('drops what the platform refuses for good, and only the offending record of a batch', async () => {
    store.enqueue(
      Array.from({ length: 5 }, (_, i) => ({ kind: 'telemetry' as const, payload: telemetry(i) })),
    );
    store.journalInsert({ commandId: 'cmd_gone', command: 'stop', params: {}, expiry: 'x' }, 'x');
    store.recordCommandStatus('cmd_gone', [{ status: 'succeeded' }], 'x');
    let refusedBatch = false;
    const { api, calls } = fakeApi((call) => {
      if (call.what === 'batch' && !refusedBatch) {
        refusedBatch = true;
        return new PlatformError('rejected', '400', {
          status: 400,
          code: 1001,
          details: { field: 'records.3.power' },
        });
      }
      if (call.what === 'status')
        return new PlatformError('conflict', 'Command is already expired', { status: 409, code: 4001 });
      return undefined;
    });
    const uplink = createUplink({
      store,
      clock: systemClock,
      logger: quietLogger(),
      api: () => api,
      paceMs: 0,
    });
    while ((await uplink.flushOnce()).kind !== 'empty');
    expect(calls.map((c) => [c.what, c.count])).toEqual([
      ['batch', 5],
      ['batch', 4],
      ['status', 1],
    ]);
    expect(uplink.stats().refused).toMatchObject({ telemetry: 1, command_status: 1 });
    expect(
      offendingIndex(new PlatformError('rejected', 'x', { details: { field: 'events.12' } }), 'events'),
    ).toBe(12);
  });

  it('sends live telemetry straight out while healthy and queues it (one transaction per tick) otherwise', async () => {
    let down = false;
    const { api, calls } = fakeApi(() => (down ? new PlatformError('network', 'ECONNRESET') : undefined));
    const uplink = createUplink({
      store,
      clock: systemClock,
      logger: quietLogger(),
      api: () => api,
      paceMs: 0,
    });
    await uplink.sendTelemetry([telemetry(0)]);
    await uplink.sendTelemetry([telemetry(1), { ...telemetry(1), connector_id: 2 }]);
    expect(calls.map((c) => c.what)).toEqual(['telemetry', 'batch']);
    expect(store.outbox.size().items).toBe(0);

    down = true;
    await uplink.sendTelemetry([telemetry(2)]);
    expect(store.outbox.size().items).toBe(1);
    // With a backlog, live records queue behind it (order kept) without trying the network.
    const before = calls.length;
    await uplink.sendTelemetry([telemetry(3)]);
    expect(calls.length).toBe(before);
    expect(store.outbox.size().items).toBe(2);

    const offline = createUplink({ store, clock: systemClock, logger: quietLogger(), api: () => undefined });
    await offline.sendTelemetry([telemetry(4)]);
    expect(store.outbox.size().items).toBe(3);
    expect(uplink.stats()).toMatchObject({ telemetryProduced: 5, telemetryQueued: 2 });
  });
});
