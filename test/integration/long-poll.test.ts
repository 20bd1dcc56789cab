import { performance } from 'node:perf_hooks';
import { Agent, request as undiciRequest } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTenant,
  expectError,
  type HttpResult,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';

/**
 * GET /v1/device/commands?wait=SECONDS (DESIGN.md §5, §9): the fast path for commands. Real timers throughout
 * (the notifier waits with setTimeout); the fake clock is never moved in this file.
 */

let tp: TestPlatform;
const latencies: number[] = [];

beforeAll(async () => {
  tp = await startTestPlatform();
});
afterAll(async () => {
  if (latencies.length > 0) {
    console.log(
      `long-poll wake-up latency (operator request sent → poll answered): ${latencies
        .map((ms) => `${ms.toFixed(1)} ms`)
        .join(', ')}`,
    );
  }
  await tp?.stop();
});

let counter = 0;
function sn(): string {
  counter += 1;
  return `LP-${process.pid}-${counter}-${Math.random().toString(36).slice(2, 8)}`;
}
async function setup() {
  counter += 1;
  const t = await createTenant(tp, `long-poll-${counter}`);
  const d = await registerDevice(tp, sn(), t.siteId);
  return { t, d };
}

interface Pending {
  command_id: string;
  command: string;
  params: Record<string, unknown>;
  expiry: string;
}

function poll(d: RegisteredDevice, query: string): Promise<HttpResult> {
  return tp.http.get(`/v1/device/commands${query}`, { token: d.token });
}
async function timed<T>(fn: () => Promise<T>): Promise<{ result: T; ms: number }> {
  const start = performance.now();
  const result = await fn();
  return { result, ms: performance.now() - start };
}
function stop(t: { token: string }, d: RegisteredDevice, connector = 1): Promise<HttpResult> {
  return tp.http.post(`/v1/operator/devices/${d.deviceId}/connectors/${connector}/stop`, {
    token: t.token,
    json: {},
  });
}
const waiting = () => tp.platform.context.notifier.connectedDevices();
/** Resolves once `n` chargers hold an open long poll on the platform. */
async function untilWaiting(n: number): Promise<void> {
  const deadline = performance.now() + 2_000;
  while (waiting() !== n) {
    if (performance.now() > deadline) throw new Error(`expected ${n} waiting polls, have ${waiting()}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('GET /v1/device/commands?wait=', () => {
  it('answers at once when commands are pending, even with the longest wait', async () => {
    const { t, d } = await setup();
    const queued = await stop(t, d);
    expect(queued.status).toBe(200);
    const { result: res, ms } = await timed(() => poll(d, '?wait=30'));
    expect(res.status).toBe(200);
    expect(res.body.code).toBe(0);
    expect(res.body.data).toEqual({
      commands: [
        {
          command_id: queued.body.data.command_id,
          command: 'stop',
          params: { connector_id: 1, reason: 'user_request' },
          expiry: expect.any(String),
        },
      ],
      server_time: expect.any(String),
    });
    expect(ms).toBeLessThan(500);
    expect(waiting()).toBe(0);
  });

  it('answers at once and empty with wait=0 or without wait', async () => {
    const { d } = await setup();
    for (const query of ['?wait=0', '']) {
      const { result: res, ms } = await timed(() => poll(d, query));
      expect(res.status).toBe(200);
      expect(res.body.data.commands).toEqual([]);
      expect(new Date(res.body.data.server_time).toISOString()).toBe(res.body.data.server_time);
      expect(ms).toBeLessThan(500);
    }
  });

  it('is woken by a stop queued while it waits: answers well under a second after the enqueue', async () => {
    for (let i = 0; i < 3; i++) {
      const { t, d } = await setup();
      const pending = timed(() => poll(d, '?wait=10'));
      await untilWaiting(1);
      const sent = performance.now();
      const queued = await stop(t, d, 1 + (i % 2));
      expect(queued.status).toBe(200);
      const { result: res } = await pending;
      const latency = performance.now() - sent;
      latencies.push(latency);
      expect(res.status).toBe(200);
      expect(res.body.data.commands.map((c: Pending) => c.command_id)).toEqual([queued.body.data.command_id]);
      expect(latency).toBeLessThan(1_000);
      expect(waiting()).toBe(0);
      // Delivered by the poll: the operator sees it.
      const view = await tp.http.get(`/v1/operator/commands/${queued.body.data.command_id}`, {
        token: t.token,
      });
      expect(view.body.data.status).toBe('delivered');
    }
  });

  it('is woken by a flexibility control and by a schedule', async () => {
    const { t, d } = await setup();
    let pending = timed(() => poll(d, '?wait=10'));
    await untilWaiting(1);
    let sent = performance.now();
    const flex = await tp.http.post('/v1/operator/control/flexibility', {
      token: t.token,
      json: {
        target_type: 'site',
        target_ids: [t.siteId],
        command: 'pause_charging',
        params: { duration: 600 },
      },
    });
    expect(flex.status).toBe(200);
    let res = (await pending).result;
    latencies.push(performance.now() - sent);
    expect(res.body.data.commands.map((c: Pending) => c.command)).toEqual(['pause_charging']);
    expect(performance.now() - sent).toBeLessThan(1_000);

    // Report it, so that the next poll has nothing pending and waits again.
    const id = res.body.data.commands[0].command_id as string;
    const ack = await tp.http.post(`/v1/device/commands/${id}/status`, {
      token: d.token,
      json: { status: 'succeeded' },
    });
    expect(ack.status).toBe(200);

    pending = timed(() => poll(d, '?wait=10'));
    await untilWaiting(1);
    sent = performance.now();
    const sched = await tp.http.post(`/v1/operator/devices/${d.deviceId}/connectors/1/schedule`, {
      token: t.token,
      json: {
        schedule_id: 'night',
        type: 'daily',
        time_slots: [{ start: '22:00', end: '06:00' }],
        timezone: 'Europe/Berlin',
      },
    });
    expect(sched.status).toBe(200);
    res = (await pending).result;
    latencies.push(performance.now() - sent);
    expect(res.body.data.commands.map((c: Pending) => c.command)).toEqual(['set_schedule']);
    expect(performance.now() - sent).toBeLessThan(1_000);
  });

  it('answers empty after about `wait` seconds when nothing is queued', async () => {
    const { d } = await setup();
    const { result: res, ms } = await timed(() => poll(d, '?wait=1'));
    console.log(`long poll wait=1 with nothing queued answered after ${ms.toFixed(1)} ms`);
    expect(res.status).toBe(200);
    expect(res.body.data.commands).toEqual([]);
    expect(ms).toBeGreaterThanOrEqual(900);
    expect(ms).toBeLessThan(3_000);
    expect(waiting()).toBe(0);
  });

  it('is not woken by a command for another charger', async () => {
    const { t, d } = await setup();
    const neighbour = await registerDevice(tp, sn(), t.siteId);
    const pending = timed(() => poll(d, '?wait=1'));
    await untilWaiting(1);
    const queued = await stop(t, neighbour);
    expect(queued.status).toBe(200);
    const { result: res, ms } = await pending;
    expect(res.body.data.commands).toEqual([]);
    expect(ms).toBeGreaterThanOrEqual(900);
    // The neighbour's command is still waiting for the neighbour.
    const theirs = await poll(neighbour, '?wait=0');
    expect(theirs.body.data.commands.map((c: Pending) => c.command_id)).toEqual([
      queued.body.data.command_id,
    ]);
  });

  it('wakes every poll the same charger holds open', async () => {
    const { t, d } = await setup();
    const first = poll(d, '?wait=10');
    const second = poll(d, '?wait=10');
    // Both polls wait on the same device entry (counted once).
    await untilWaiting(1);
    await new Promise((r) => setTimeout(r, 50));
    const sent = performance.now();
    const queued = await stop(t, d);
    const [a, b] = await Promise.all([first, second]);
    expect(performance.now() - sent).toBeLessThan(1_000);
    for (const res of [a, b]) {
      expect(res.status).toBe(200);
      expect(res.body.data.commands.map((c: Pending) => c.command_id)).toEqual([queued.body.data.command_id]);
    }
  });

  it.each([
    ['?wait=31', 'wait', '31'],
    ['?wait=-1', 'wait', '-1'],
    ['?wait=abc', 'wait', 'abc'],
    ['?wait=1.5', 'wait', '1.5'],
    ['?wait=', 'wait', ''],
    ['?wait=1&wait=2', 'wait', '[array of 2]'],
    ['?timeout=5', 'timeout', '5'],
  ])('refuses %s: 400/1001 naming the field, at once', async (query, field, value) => {
    const { d } = await setup();
    const { result: res, ms } = await timed(() => poll(d, query));
    const body = expectError(res, 400, 1001);
    expect(body.details).toEqual({ field, value });
    expect(ms).toBeLessThan(500);
    expect(waiting()).toBe(0);
  });

  it('accepts wait=30, the maximum', async () => {
    const { t, d } = await setup();
    expect((await stop(t, d)).status).toBe(200);
    const res = await poll(d, '?wait=30');
    expect(res.status).toBe(200);
    expect(res.body.data.commands).toHaveLength(1);
  });

  it('needs a device token: 401/2001 without one or with an operator token', async () => {
    const { t } = await setup();
    expectError(await tp.http.get('/v1/device/commands?wait=1'), 401, 2001);
    expectError(await tp.http.get('/v1/device/commands?wait=1', { token: t.token }), 401, 2001);
    expect(waiting()).toBe(0);
  });

  it('a client disconnecting mid-poll does not break later polls', async () => {
    const { t, d } = await setup();
    const dispatcher = new Agent({ connect: { ca: tp.ca } });
    try {
      const aborter = new AbortController();
      const abandoned = undiciRequest(`${tp.url}/v1/device/commands?wait=20`, {
        method: 'GET',
        headers: { authorization: `Bearer ${d.token}` },
        dispatcher,
        signal: aborter.signal,
      });
      await untilWaiting(1);
      aborter.abort();
      await expect(abandoned).rejects.toThrow();
      // The platform notices the disconnect and drops the waiter, long before its 20 s.
      await untilWaiting(0);

      // A command queued now waits for the next poll; that poll answers at once.
      const queued = await stop(t, d);
      expect(queued.status).toBe(200);
      const { result: res, ms } = await timed(() => poll(d, '?wait=10'));
      expect(res.status).toBe(200);
      expect(res.body.data.commands.map((c: Pending) => c.command_id)).toEqual([queued.body.data.command_id]);
      expect(ms).toBeLessThan(500);
      const ack = await tp.http.post(`/v1/device/commands/${queued.body.data.command_id}/status`, {
        token: d.token,
        json: { status: 'succeeded' },
      });
      expect(ack.status).toBe(200);

      // And a later poll is still woken by the next command.
      const pending = timed(() => poll(d, '?wait=10'));
      await untilWaiting(1);
      const sent = performance.now();
      const next = await stop(t, d, 2);
      const woken = (await pending).result;
      latencies.push(performance.now() - sent);
      expect(woken.body.data.commands.map((c: Pending) => c.command_id)).toEqual([next.body.data.command_id]);
      expect(performance.now() - sent).toBeLessThan(1_000);
    } finally {
      await dispatcher.close();
    }
  });

  it('a command woken into a poll whose client vanishes at that moment is delivered again on the next poll', async () => {
    const { t, d } = await setup();
    const dispatcher = new Agent({ connect: { ca: tp.ca } });
    try {
      const aborter = new AbortController();
      const abandoned = undiciRequest(`${tp.url}/v1/device/commands?wait=20`, {
        method: 'GET',
        headers: { authorization: `Bearer ${d.token}` },
        dispatcher,
        signal: aborter.signal,
      });
      abandoned.catch(() => undefined);
      await untilWaiting(1);
      // The enqueue wakes the poll and the client goes away in the same instant: whether the answer was
      // written or not, the command must still reach the charger (at least once).
      const queuing = stop(t, d);
      aborter.abort();
      const queued = await queuing;
      expect(queued.status).toBe(200);
      await untilWaiting(0);
      const res = await poll(d, '?wait=5');
      expect(res.body.data.commands.map((c: Pending) => c.command_id)).toEqual([queued.body.data.command_id]);
      const again = await poll(d, '?wait=5');
      expect(again.body.data.commands.map((c: Pending) => c.command_id)).toEqual([
        queued.body.data.command_id,
      ]);
    } finally {
      await dispatcher.close();
    }
  });
});
