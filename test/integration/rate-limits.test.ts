import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTenant,
  expectError,
  type HttpResult,
  operatorToken,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';
import { rateItem, rateLimitExpectations } from '../helpers/rate-limit-headers.js';
import { createClientOf } from '../helpers/sealed-writes.js';

/**
 * Every row of the spec's Limits table (DESIGN.md §8): 429/5001 exactly one past the bound, the answer's shape
 * and headers, recovery once the window has passed (fake clock), and budgets per client_id / device_id —
 * never per address: every request here comes from 127.0.0.1. The budgets by address that guard the
 * unauthenticated routes (DESIGN.md §18) are credential-lockout.test.ts'; their items share the headers of the
 * token endpoints, so the assertions here pick their class's item from the list.
 */

let tp: TestPlatform;
/** The 429s this suite caused, by limiter class, are compared with GET /metrics at the end. */
const { refusals, expectRateLimited, expectAllowed } = rateLimitExpectations();

beforeAll(async () => {
  tp = await startTestPlatform();
});
afterAll(async () => {
  await tp.stop();
});

/** A client of an existing operator, created without spending a token issuance. */
async function extraClient(operatorId: string) {
  const { client, secret } = await createClientOf(tp, {
    operator_ids: [operatorId],
    scopes: ['read', 'write'],
  });
  return { clientId: client.client_id, clientSecret: secret };
}

let ts = Date.UTC(2025, 5, 1);
const nextTs = () => {
  ts += 1_000;
  return new Date(ts).toISOString();
};
const telemetry = () => ({ timestamp: nextTs(), connector_id: 1, state: 'charging', power: 7.2, soc: 40 });
const heartbeat = () => ({ timestamp: new Date().toISOString(), status: 'online', fault_code: 0 });

describe('operator queries: 60 per minute per client_id', () => {
  it('refuses the 61st read of the minute, whatever the token or endpoint, and recovers after the window', async () => {
    const t = await createTenant(tp, 'Query Tenant');
    const dev = await registerDevice(tp, 'RL-Q-1', t.siteId);
    // A second token of the same client shares the budget: it is the client's, not the token's.
    const token2 = await operatorToken(tp.http, t.clientId, t.clientSecret);
    const paths = [
      `/v1/operator/devices/${dev.deviceId}`,
      '/v1/operator/devices',
      '/v1/operator/sites',
      '/v1/operator/charging-records?size=5',
      `/v1/operator/sites/${t.siteId}`,
      '/v1/operator/devices/dev_unknown', // a 404 counts too
    ];
    for (let i = 0; i < 60; i++) {
      const path = paths[i % paths.length]!;
      const res = await tp.http.get(path, { token: i % 2 ? token2 : t.token });
      expectAllowed(res, path.endsWith('dev_unknown') ? 404 : 200, 'operatorQuery', 59 - i);
      expect(res.headers['ratelimit-policy']).toBe('"operatorQuery";q=60;w=60');
    }
    const refused = await tp.http.get(`/v1/operator/devices/${dev.deviceId}`, { token: token2 });
    expectRateLimited(refused, 'operatorQuery', 60, 60);
    expectRateLimited(await tp.http.get('/v1/operator/sites', { token: t.token }), 'operatorQuery', 60, 60);

    // Another client of the same operator, from the same address, has its own budget.
    const peer = await extraClient(t.operatorId);
    const peerToken = await operatorToken(tp.http, peer.clientId, peer.clientSecret);
    expectAllowed(await tp.http.get('/v1/operator/sites', { token: peerToken }), 200, 'operatorQuery', 59);
    // Writes have their own budget.
    const stop = await tp.http.post(`/v1/operator/devices/${dev.deviceId}/connectors/1/stop`, {
      token: t.token,
      json: {},
    });
    expectAllowed(stop, 200, 'operatorControl', 59);

    tp.advance(60_000);
    expectAllowed(await tp.http.get('/v1/operator/sites', { token: t.token }), 200, 'operatorQuery', 59);
  });

  it('does not count requests that fail authentication against anyone', async () => {
    const t = await createTenant(tp, 'Query Unauth');
    for (let i = 0; i < 70; i++) {
      expectError(await tp.http.get('/v1/operator/sites', { token: 'garbage' }), 401, 2001);
    }
    expectAllowed(await tp.http.get('/v1/operator/sites', { token: t.token }), 200, 'operatorQuery', 59);
  });
});

describe('operator control: 60 single-connector commands per minute per client_id', () => {
  it('shares one budget between stop, start, discharge and schedule and refuses the 61st', async () => {
    const t = await createTenant(tp, 'Control Tenant');
    const dev = await registerDevice(tp, 'RL-C-1', t.siteId);
    const base = `/v1/operator/devices/${dev.deviceId}/connectors`;
    const schedule = {
      schedule_id: 'night',
      enabled: true,
      type: 'daily',
      time_slots: [{ start: '22:00', end: '06:00', power_limit: 11, action: 'charge' }],
      target_soc: 80,
      effective_from: '2025-01-01T00:00:00Z',
      effective_until: '2035-01-01T00:00:00Z',
      timezone: 'Europe/Berlin',
    };
    const calls: Array<[string, unknown]> = [
      [`${base}/1/stop`, { reason: 'user_request' }],
      [`${base}/1/start`, {}],
      [`${base}/2/discharge`, { discharge_power: 7, duration: 600, min_soc: 30 }],
      [`${base}/1/schedule`, schedule],
    ];
    // The window opens with the first command: the checks below are timed from it, not from the end of a loop
    // that a loaded machine may take seconds over.
    const windowOpened = tp.now();
    for (let i = 0; i < 60; i++) {
      const [path, json] = calls[i % calls.length]!;
      expectAllowed(await tp.http.post(path, { token: t.token, json }), 200, 'operatorControl', 59 - i);
    }
    const refused = await tp.http.post(`${base}/1/stop`, { token: t.token, json: {} });
    const retry = expectRateLimited(refused, 'operatorControl', 60, 60);
    expect(retry).toBeGreaterThan(50); // the window started moments ago

    // Reads and batch control are separate budgets.
    expectAllowed(
      await tp.http.get(`/v1/operator/devices/${dev.deviceId}`, { token: t.token }),
      200,
      'operatorQuery',
      59,
    );
    const flex = await tp.http.post('/v1/operator/control/flexibility', {
      token: t.token,
      json: { target_type: 'all', command: 'pause_charging', params: { duration: 60 } },
    });
    expectAllowed(flex, 200, 'operatorBatchControl', 29);

    tp.advance(Math.max(0, windowOpened + 58_000 - tp.now())); // 58 s into the window: still refused
    expectRateLimited(
      await tp.http.post(`${base}/1/stop`, { token: t.token, json: {} }),
      'operatorControl',
      60,
      60,
    );
    // The window has ended (it opened with the first answer, within a second of windowOpened).
    tp.advance(Math.max(0, windowOpened + 61_000 - tp.now()));
    expectAllowed(
      await tp.http.post(`${base}/1/stop`, { token: t.token, json: {} }),
      200,
      'operatorControl',
      59,
    );
  });
});

describe('operator batch control: 30 per minute per client_id', () => {
  it('refuses the 31st flexibility request (cancellations count too) and recovers', async () => {
    const t = await createTenant(tp, 'Batch Tenant');
    await registerDevice(tp, 'RL-B-1', t.siteId);
    const flex = (json: unknown) =>
      tp.http.post('/v1/operator/control/flexibility', { token: t.token, json });
    const body = {
      target_type: 'site',
      target_ids: [t.siteId],
      command: 'set_power_limit',
      params: { power_limit_percent: 50, duration: 900 },
    };
    let controlId = '';
    for (let i = 0; i < 29; i++) {
      const res = await flex(body);
      expectAllowed(res, 200, 'operatorBatchControl', 29 - i);
      controlId = res.body.data.control_id;
    }
    const cancel = await tp.http.delete(`/v1/operator/control/${controlId}`, { token: t.token });
    expectAllowed(cancel, 200, 'operatorBatchControl', 0);
    expectRateLimited(await flex(body), 'operatorBatchControl', 30, 60);

    const peer = await extraClient(t.operatorId);
    const peerToken = await operatorToken(tp.http, peer.clientId, peer.clientSecret);
    const peerRes = await tp.http.post('/v1/operator/control/flexibility', { token: peerToken, json: body });
    expectAllowed(peerRes, 200, 'operatorBatchControl', 29);

    tp.advance(60_000);
    expectAllowed(await flex(body), 200, 'operatorBatchControl', 29);
  });
});

describe('token issuance: 10 per minute per client_id, spent only by callers that know the secret', () => {
  const path = '/v1/operator/oauth/token';
  const ask = (clientId: string, secret: string) =>
    tp.http.post(path, {
      json: { client_id: clientId, client_secret: secret, grant_type: 'client_credentials' },
    });

  it('refuses the 11th token of the minute; wrong secrets do not spend it; other clients are unaffected', async () => {
    const t = await createTenant(tp, 'Token Tenant');
    tp.advance(60_000); // createTenant spent one issuance; start from a fresh window
    const victim = await extraClient(t.operatorId);
    const bystander = await extraClient(t.operatorId);

    for (let i = 0; i < 10; i++) {
      const ok = await ask(victim.clientId, victim.clientSecret);
      expectAllowed(ok, 200, 'operatorToken', 9 - i);
      if (i >= 5) continue;
      // Wrong secrets count against this address's failures for the client (DESIGN.md §18), not its issuance.
      const wrong = await ask(victim.clientId, 'definitely-not-the-secret');
      expectError(wrong, 401, 2001);
      expectAllowed(wrong, 401, 'operatorTokenFailures', 9 - i);
      expect(rateItem(wrong, 'ratelimit', 'operatorToken')).toBeUndefined();
    }
    expectRateLimited(await ask(victim.clientId, victim.clientSecret), 'operatorToken', 10, 60);
    // Other ways of presenting the same client_id are the same budget.
    const basic = Buffer.from(`${victim.clientId}:${victim.clientSecret}`).toString('base64');
    const viaBasic = await tp.http.post(path, {
      raw: 'grant_type=client_credentials',
      contentType: 'application/x-www-form-urlencoded',
      headers: { authorization: `Basic ${basic}` },
    });
    expectRateLimited(viaBasic, 'operatorToken', 10, 60);

    // Same operator, same address, different client_id: unaffected.
    expectAllowed(await ask(bystander.clientId, bystander.clientSecret), 200, 'operatorToken', 9);

    tp.advance(60_000);
    const again = await ask(victim.clientId, victim.clientSecret);
    expectAllowed(again, 200, 'operatorToken', 9);
    expect(again.body.token_type).toBe('Bearer');
  });

  it('throttles guesses against an unknown client_id without touching real ones', async () => {
    const t = await createTenant(tp, 'Token Guess');
    for (let i = 0; i < 10; i++) expectError(await ask('cli_guess', `guess-${i}`), 401, 2001);
    expectRateLimited(await ask('cli_guess', 'guess-10'), 'operatorTokenFailures', 10, 60);
    expectAllowed(await ask(t.clientId, t.clientSecret), 200, 'operatorToken', 8);
  });
});

describe('charger realtime: 10 heartbeats and telemetry per second per device', () => {
  it('refuses the 11th in a second and recovers after it', async () => {
    const t = await createTenant(tp, 'Realtime Tenant');
    const dev = await registerDevice(tp, 'RL-R-1', t.siteId);
    const peer = await registerDevice(tp, 'RL-R-2', t.siteId);
    tp.advance(1_000);
    for (let i = 0; i < 10; i++) {
      const res =
        i % 2
          ? await tp.http.post('/v1/device/telemetry', { token: dev.token, json: telemetry() })
          : await tp.http.post('/v1/device/heartbeat', { token: dev.token, json: heartbeat() });
      expectAllowed(res, 200, 'deviceRealtime', 9 - i);
      expect(res.headers['ratelimit-policy']).toBe('"deviceRealtime";q=10;w=1');
    }
    const refused = await tp.http.post('/v1/device/telemetry', { token: dev.token, json: telemetry() });
    expect(expectRateLimited(refused, 'deviceRealtime', 10, 1)).toBe(1);
    expectRateLimited(
      await tp.http.post('/v1/device/heartbeat', { token: dev.token, json: heartbeat() }),
      'deviceRealtime',
      10,
      1,
    );

    // Another charger at the same address is unaffected; reporting is a separate budget.
    expectAllowed(
      await tp.http.post('/v1/device/heartbeat', { token: peer.token, json: heartbeat() }),
      200,
      'deviceRealtime',
      9,
    );
    const event = await tp.http.post('/v1/device/events', {
      token: dev.token,
      json: { events: [{ event_id: 'rt-ev-1', kind: 'boot', timestamp: nextTs() }] },
    });
    expectAllowed(event, 200, 'deviceReporting', 59);

    tp.advance(1_000);
    expectAllowed(
      await tp.http.post('/v1/device/telemetry', { token: dev.token, json: telemetry() }),
      200,
      'deviceRealtime',
      9,
    );

    // Exact under concurrency too: of 15 simultaneous requests in a fresh second, 10 pass.
    tp.advance(1_000);
    const burst = await Promise.all(
      Array.from({ length: 15 }, () =>
        tp.http.post('/v1/device/heartbeat', { token: peer.token, json: heartbeat() }),
      ),
    );
    expect(burst.filter((r) => r.status === 200)).toHaveLength(10);
    for (const r of burst.filter((x) => x.status !== 200)) expectRateLimited(r, 'deviceRealtime', 10, 1);
  });
});

describe('charger reporting: 60 events, command statuses and charging records per minute per device', () => {
  it('refuses the 61st report of the minute and recovers after the window', async () => {
    const t = await createTenant(tp, 'Reporting Tenant');
    const dev = await registerDevice(tp, 'RL-P-1', t.siteId);
    const peer = await registerDevice(tp, 'RL-P-2', t.siteId);
    const stop = await tp.http.post(`/v1/operator/devices/${dev.deviceId}/connectors/1/stop`, {
      token: t.token,
      json: {},
    });
    const commandId = stop.body.data.command_id as string;
    tp.advance(60_000);

    const reports: Array<() => Promise<HttpResult>> = [
      () =>
        tp.http.post('/v1/device/events', {
          token: dev.token,
          json: { events: [{ event_id: `ev-${nextTs()}`, kind: 'vehicle_plugged', timestamp: nextTs() }] },
        }),
      () => {
        const start = nextTs();
        return tp.http.post('/v1/device/charging-records', {
          token: dev.token,
          json: {
            records: [
              {
                record_id: `rec-${start}`,
                connector_id: 1,
                start_time: start,
                end_time: nextTs(),
                energy: 3,
              },
            ],
          },
        });
      },
      () =>
        tp.http.post(`/v1/device/commands/${commandId}/status`, {
          token: dev.token,
          json: { status: 'accepted' },
        }),
    ];
    for (let i = 0; i < 60; i++) {
      const res = await reports[i % reports.length]!();
      expectAllowed(res, 200, 'deviceReporting', 59 - i);
      expect(res.headers['ratelimit-policy']).toBe('"deviceReporting";q=60;w=60');
    }
    for (const report of reports) expectRateLimited(await report(), 'deviceReporting', 60, 60);
    // An unknown command's status report is refused before it is looked up.
    expectRateLimited(
      await tp.http.post('/v1/device/commands/cmd_unknown/status', {
        token: dev.token,
        json: { status: 'failed' },
      }),
      'deviceReporting',
      60,
      60,
    );

    // Another device is unaffected; realtime traffic is a separate budget.
    const peerEvent = await tp.http.post('/v1/device/events', {
      token: peer.token,
      json: { events: [{ event_id: 'peer-1', kind: 'boot', timestamp: nextTs() }] },
    });
    expectAllowed(peerEvent, 200, 'deviceReporting', 59);
    expectAllowed(
      await tp.http.post('/v1/device/heartbeat', { token: dev.token, json: heartbeat() }),
      200,
      'deviceRealtime',
      9,
    );

    tp.advance(60_000);
    expectAllowed(await reports[0]!(), 200, 'deviceReporting', 59);
  });
});

describe('GET /metrics', () => {
  it('counts the refusals of every class that was hit', async () => {
    const res = await tp.metrics();
    expect(res.status).toBe(200);
    const counted = new Map<string, number>();
    for (const m of res.text.matchAll(
      /^charger_platform_rate_limit_refusals_total\{class="(\w+)",instance="[^"]+"\} (\d+)$/gm,
    )) {
      counted.set(m[1]!, Number(m[2]));
    }
    expect([...refusals.keys()].sort()).toEqual([
      'deviceRealtime',
      'deviceReporting',
      'operatorBatchControl',
      'operatorControl',
      'operatorQuery',
      'operatorToken',
      'operatorTokenFailures',
    ]);
    expect(Object.fromEntries(counted)).toEqual(Object.fromEntries(refusals));
  });
});
