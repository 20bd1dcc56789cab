import { createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { MockAgent, Pool } from 'undici';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AgentFatalError, EXIT_IDENTITY_REFUSED } from '../../../agent/agent-errors.js';
import type { Clock } from '../../../agent/clock.js';
import { checkCommand } from '../../../agent/core/command-checks.js';
import { createDeviceCredentials, renewMarginMs } from '../../../agent/link/device-credentials.js';
import {
  ANSWER_MAX_BYTES,
  createPlatformClient,
  KEEP_ALIVE_MS,
  type PlatformClient,
  type TokenSource,
} from '../../../agent/link/platform-client.js';
import { failureOf, PlatformError, parseRetryAfter } from '../../../agent/link/platform-errors.js';
import { type AgentStore, openAgentStore } from '../../../agent/store/agent-store.js';
import { DEFAULT_CONNECTION_LIMITS } from '../../../platform/http/connection-limits.js';
import { ensureSelfSignedCertificate } from '../../../platform/http/tls.js';
import { signRequest } from '../../../shared/request-signing.js';
import { quietLogger, tempDir } from '../../helpers/agent.js';

const BASE = 'https://platform.test';
const ok = (data: unknown) => ({ code: 0, message: 'success', data });
const err = (code: number, message: string, details?: Record<string, unknown>) => ({
  code,
  message,
  ...(details ? { details } : {}),
});
const json = { headers: { 'content-type': 'application/json' } };
const SERVER_TIME = '2026-05-01T12:00:00.000Z';

function mockPlatform() {
  const agent = new MockAgent();
  agent.disableNetConnect();
  return { agent, pool: agent.get(BASE) };
}

function countingTokens(): TokenSource & { renewals: number } {
  const source = {
    renewals: 0,
    current: 't1',
    async token() {
      return source.current;
    },
    async renew() {
      source.renewals += 1;
      source.current = `t${source.renewals + 1}`;
      return source.current;
    },
  };
  return source;
}

async function caught(promise: Promise<unknown>): Promise<PlatformError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof PlatformError) return error;
    throw error;
  }
  throw new Error('expected a PlatformError');
}

describe('failure classification', () => {
  it('classifies statuses and honours retry_after from the body, then the header', () => {
    const now = Date.parse('2026-05-01T12:00:00Z');
    const limited = failureOf(
      429,
      err(5001, 'Too many requests', { retry_after_seconds: 7 }),
      { 'retry-after': '3' },
      now,
    );
    expect(limited).toMatchObject({
      kind: 'rate_limited',
      retryable: true,
      code: 5001,
      retryAfterSeconds: 7,
    });
    expect(failureOf(429, undefined, { 'retry-after': '3' }, now).retryAfterSeconds).toBe(3);
    expect(failureOf(503, undefined, {}, now)).toMatchObject({ kind: 'server', retryable: true });
    expect(failureOf(400, err(1001, 'bad', { field: 'x' }), {}, now)).toMatchObject({
      kind: 'rejected',
      retryable: false,
    });
    expect(failureOf(409, err(4001, 'conflict'), {}, now)).toMatchObject({
      kind: 'conflict',
      retryable: false,
    });
    expect(failureOf(401, err(2002, 'expired'), {}, now)).toMatchObject({ kind: 'unauthorized', code: 2002 });
    expect(parseRetryAfter('Fri, 01 May 2026 12:00:10 GMT', now)).toBe(10);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
  });
});

describe('platform client against a mocked platform', () => {
  let mock: ReturnType<typeof mockPlatform>;
  let client: PlatformClient;
  beforeEach(() => {
    mock = mockPlatform();
    client = createPlatformClient({ baseUrl: BASE, dispatcher: mock.agent, timeoutMs: 2_000 });
  });
  afterEach(async () => {
    await mock.agent.close();
  });

  it('parses a heartbeat; a command with an unknown name is kept for refusal, one without an id is counted', async () => {
    mock.pool.intercept({ path: '/v1/device/heartbeat', method: 'POST' }).reply(
      200,
      ok({
        commands: [
          { command_id: 'cmd_1', command: 'stop', params: { connector_id: 1 }, expiry: SERVER_TIME },
          { command_id: 'cmd_2', command: 'reboot', params: {}, expiry: SERVER_TIME },
          { command: 'stop' },
        ],
        server_time: SERVER_TIME,
      }),
      json,
    );
    const api = client.withTokens(countingTokens());
    const answer = await api.heartbeat({ timestamp: SERVER_TIME, status: 'online', fault_code: 0 });
    expect(answer.commands.map((c) => c.command)).toEqual(['stop', 'reboot']);
    expect(answer.unusable).toBe(1);
    expect(answer.serverTime).toBe(SERVER_TIME);
  });

  it('turns malformed answers into retryable errors, never crashes', async () => {
    const api = client.withTokens(countingTokens());
    mock.pool
      .intercept({ path: '/v1/device/heartbeat', method: 'POST' })
      .reply(200, '<html>captive portal</html>');
    expect(
      await caught(api.heartbeat({ timestamp: SERVER_TIME, status: 'online', fault_code: 0 })),
    ).toMatchObject({
      kind: 'malformed',
      retryable: true,
    });
    mock.pool
      .intercept({ path: '/v1/device/heartbeat', method: 'POST' })
      .reply(200, ok({ commands: 'nope' }), json);
    expect(
      (await caught(api.heartbeat({ timestamp: SERVER_TIME, status: 'online', fault_code: 0 }))).message,
    ).toMatch(/malformed answer \(data.commands/);
    mock.pool.intercept({ path: '/v1/device/telemetry', method: 'POST' }).reply(502, 'Bad Gateway');
    expect(
      await caught(api.sendTelemetry({ timestamp: SERVER_TIME, connector_id: 1, state: 'idle' })),
    ).toMatchObject({
      kind: 'server',
      status: 502,
      retryable: true,
    });
  });

  it('reports a network failure as retryable', async () => {
    mock.pool
      .intercept({ path: '/v1/device/token', method: 'POST' })
      .replyWithError(new Error('ECONNREFUSED'));
    expect(await caught(client.exchangeToken('dev_1', 's'))).toMatchObject({
      kind: 'network',
      retryable: true,
    });
  });

  it('on 401 code 2002 renews the token and retries once', async () => {
    const tokens = countingTokens();
    const api = client.withTokens(tokens);
    mock.pool
      .intercept({ path: '/v1/device/telemetry', method: 'POST', headers: { authorization: 'Bearer t1' } })
      .reply(401, err(2002, 'Access token expired'), json);
    mock.pool
      .intercept({ path: '/v1/device/telemetry', method: 'POST', headers: { authorization: 'Bearer t2' } })
      .reply(200, ok({ accepted: 1 }), json);
    expect(await api.sendTelemetry({ timestamp: SERVER_TIME, connector_id: 1, state: 'idle' })).toEqual({
      accepted: 1,
    });
    expect(tokens.renewals).toBe(1);
  });

  it('retries only once: a second 401 is an error', async () => {
    const tokens = countingTokens();
    const api = client.withTokens(tokens);
    mock.pool
      .intercept({ path: '/v1/device/telemetry', method: 'POST' })
      .reply(401, err(2002, 'expired'), json)
      .times(2);
    expect(
      await caught(api.sendTelemetry({ timestamp: SERVER_TIME, connector_id: 1, state: 'idle' })),
    ).toMatchObject({
      kind: 'unauthorized',
      code: 2002,
    });
    expect(tokens.renewals).toBe(1);
  });

  it('signs authenticated writes when asked, over the exact bytes sent; never GETs', async () => {
    const signed = createPlatformClient({
      baseUrl: BASE,
      dispatcher: mock.agent,
      signing: () => ({ secret: 'dev-secret', timestampSeconds: 1_777_000_000 }),
    }).withTokens(countingTokens());
    let seen: { headers: Record<string, string>; body: string } | undefined;
    mock.pool.intercept({ path: '/v1/device/telemetry', method: 'POST' }).reply((opts) => {
      seen = { headers: opts.headers as Record<string, string>, body: String(opts.body) };
      return { statusCode: 200, data: ok({ accepted: 1 }), responseOptions: json };
    });
    await signed.sendTelemetry({ timestamp: SERVER_TIME, connector_id: 1, state: 'idle' });
    expect(seen?.headers['x-timestamp']).toBe('1777000000');
    expect(seen?.headers['x-signature']).toBe(
      signRequest('dev-secret', 'POST', '/v1/device/telemetry', 1_777_000_000, seen?.body ?? ''),
    );
    let pollHeaders: Record<string, string> | undefined;
    mock.pool.intercept({ path: '/v1/device/commands?wait=0', method: 'GET' }).reply((opts) => {
      pollHeaders = opts.headers as Record<string, string>;
      return { statusCode: 200, data: ok({ commands: [], server_time: SERVER_TIME }), responseOptions: json };
    });
    await signed.pollCommands(0);
    expect(pollHeaders?.['x-signature']).toBeUndefined();
  });

  it('carries retry_after of a 429', async () => {
    const api = client.withTokens(countingTokens());
    mock.pool
      .intercept({ path: '/v1/device/events', method: 'POST' })
      .reply(429, err(5001, 'Too many requests', { retry_after_seconds: 12 }), {
        headers: { 'retry-after': '12' },
      });
    const error = await caught(
      api.sendEvents([{ event_id: 'e1', kind: 'boot', severity: 'info', timestamp: SERVER_TIME }]),
    );
    expect(error).toMatchObject({ kind: 'rate_limited', retryAfterSeconds: 12, retryable: true });
  });
});

/** Issue 6 (agent-fuzz.test.ts found these): what is not the platform's word is never taken as a refusal. */
describe('regressions: answers that are not the platform speaking', () => {
  const now = Date.parse('2026-05-01T12:00:00Z');

  it('takes a 4xx as permanent only with an envelope code documented for its status; a 3xx or a page is malformed', () => {
    for (const [status, body] of [
      [404, undefined],
      [400, '<html>proxy</html>'],
      [302, undefined],
      [409, err(404, 'Not Found')],
      [400, err(5001, 'Too many requests')],
      [403, err(4001, 'conflict')],
    ] as const) {
      expect(failureOf(status, body, {}, now), `${status} ${JSON.stringify(body)}`).toMatchObject({
        kind: 'malformed',
        retryable: true,
      });
    }
    expect(failureOf(401, undefined, {}, now)).toMatchObject({ kind: 'malformed', retryable: true });
    expect(failureOf(413, err(1002, 'too large'), {}, now)).toMatchObject({
      kind: 'rejected',
      retryable: false,
    });
    expect(failureOf(404, err(3001, 'not found'), {}, now)).toMatchObject({
      kind: 'not_found',
      retryable: false,
    });
    expect(failureOf(502, undefined, {}, now)).toMatchObject({ kind: 'server', retryable: true });
  });

  it('answers a command with a usable id whatever its name and expiry: they are refused, not ignored', async () => {
    const mock = mockPlatform();
    const client = createPlatformClient({ baseUrl: BASE, dispatcher: mock.agent, timeoutMs: 2_000 });
    mock.pool.intercept({ path: '/v1/device/heartbeat', method: 'POST' }).reply(
      200,
      ok({
        commands: [
          { command_id: 'cmd_n', command: 5, params: {}, expiry: SERVER_TIME },
          { command_id: 'cmd_e', command: 'stop', params: { connector_id: 1 } },
          { command_id: 'bad id', command: 'stop', params: {}, expiry: SERVER_TIME },
        ],
        server_time: SERVER_TIME,
      }),
      json,
    );
    const answer = await client
      .withTokens(countingTokens())
      .heartbeat({ timestamp: SERVER_TIME, status: 'online', fault_code: 0 });
    expect(answer.unusable).toBe(1);
    expect(answer.commands).toEqual([
      { command_id: 'cmd_n', command: '<number>', params: {}, expiry: SERVER_TIME },
      { command_id: 'cmd_e', command: 'stop', params: { connector_id: 1 }, expiry: '' },
    ]);
    const ctx = {
      now: Date.parse(SERVER_TIME) - 60_000,
      connectors: [{ connectorId: 1, ratedPowerKw: 22, v2gCapable: false }],
    };
    expect(checkCommand(answer.commands[0]!, ctx)).toEqual({
      ok: false,
      reason: 'unsupported command "<number>"',
    });
    expect(checkCommand(answer.commands[1]!, ctx)).toEqual({ ok: false, reason: 'invalid expiry' });
    await mock.agent.close();
  });

  it('bounds a whole request by its timeout: an answer trickling in forever fails as a network error', async () => {
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"code":0,');
      const tick = setInterval(() => res.write(' '), 50);
      res.on('close', () => clearInterval(tick));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const client = createPlatformClient({ baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 300 });
    const started = Date.now();
    const error = await caught(client.exchangeToken('dev_1', 's'));
    expect(error).toMatchObject({ kind: 'network', retryable: true });
    expect(Date.now() - started).toBeLessThan(2_000);
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('gives up at its deadline a request that never got a connection, and does not send it when one frees up', async () => {
    // A real pool of one connection, held by a first request the server answers only when told to.
    const seen: string[] = [];
    let answerFirst: (() => void) | undefined;
    const server = createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      answerFirst = () => res.writeHead(503, { 'content-type': 'application/json' }).end('{}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const baseUrl = `http://127.0.0.1:${port}`;
    const pool = new Pool(baseUrl, { connections: 1 });
    const patient = createPlatformClient({ baseUrl, dispatcher: pool, timeoutMs: 10_000 });
    const hasty = createPlatformClient({ baseUrl, dispatcher: pool, timeoutMs: 100 });
    try {
      const first = caught(patient.exchangeToken('dev_1', 's'));
      await vi.waitFor(() => expect(seen).toHaveLength(1));

      const started = Date.now();
      const error = await caught(hasty.exchangeToken('dev_2', 's'));
      expect(error).toMatchObject({ kind: 'network', retryable: true });
      expect(error.message).toMatch(/no complete answer within 100 ms/);
      expect(Date.now() - started).toBeLessThan(1_000);

      // The connection frees up after all: the request given up is not sent on it.
      answerFirst?.();
      expect(await first).toMatchObject({ status: 503 });
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(seen).toEqual(['POST /v1/device/token']);
    } finally {
      await pool.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('does not pass a refused token exchange off as a refusal of the request that needed the token', async () => {
    const mock = mockPlatform();
    const client = createPlatformClient({ baseUrl: BASE, dispatcher: mock.agent, timeoutMs: 2_000 });
    const refused = failureOf(403, err(2003, 'Forbidden'), {}, now);
    const api = client.withTokens({
      token: async () => {
        throw refused;
      },
      renew: async () => {
        throw refused;
      },
    });
    const error = await caught(
      api.sendChargingRecords([
        {
          record_id: 'rec-1',
          connector_id: 1,
          start_time: SERVER_TIME,
          end_time: SERVER_TIME,
          energy: 1,
        },
      ]),
    );
    // `unauthorized` is what the uplink retries instead of dropping the batch.
    expect(error).toMatchObject({ kind: 'unauthorized', status: 403, code: 2003 });
    expect(error.cause).toBe(refused);
    await mock.agent.close();
  });
});

describe('device credentials: registration and token lifecycle', () => {
  let tmp: ReturnType<typeof tempDir>;
  let store: AgentStore;
  let mock: ReturnType<typeof mockPlatform>;
  let now: number;
  const clock: Clock = {
    now: () => now,
    setTimeout: (callback) => setTimeout(callback, 0),
    clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
  };
  const registration = () => ({
    sn: 'SN-1',
    model: 'M',
    manufacturer: 'Acme',
    firmware_version: '1.0',
    connectors: [{ connector_id: 1, max_power_kw: 22, v2g_capable: false }],
  });
  function credentials() {
    const client = createPlatformClient({ baseUrl: BASE, dispatcher: mock.agent, now: () => now });
    return createDeviceCredentials({
      store,
      client,
      clock,
      logger: quietLogger(),
      sn: 'SN-1',
      platformUrl: BASE,
      registration,
      random: () => 0.5,
      backoff: { baseMs: 10, capMs: 100 },
    });
  }
  const registered = (secret = 'secret-1') =>
    ok({ device_id: 'dev_1', device_secret: secret, expires_in: 86_400 });
  const token = (value: string, ttl = 86_400) =>
    ok({ access_token: value, token_type: 'Bearer', expires_in: ttl });

  beforeEach(() => {
    tmp = tempDir();
    store = openAgentStore(tmp.dir);
    mock = mockPlatform();
    now = Date.parse('2026-05-01T12:00:00Z');
  });
  afterEach(async () => {
    store.close();
    tmp.remove();
    await mock.agent.close();
  });

  it('registers once, retrying a platform that is down, and stores the identity before anything else', async () => {
    mock.pool.intercept({ path: '/v1/device/register', method: 'POST' }).reply(503, err(9001, 'down'), json);
    mock.pool.intercept({ path: '/v1/device/register', method: 'POST' }).reply(200, registered(), json);
    const creds = credentials();
    const identity = await creds.ensureRegistered();
    expect(identity).toMatchObject({ deviceId: 'dev_1', secret: 'secret-1', sn: 'SN-1' });
    expect(store.getIdentity()?.secret).toBe('secret-1');
    expect(store.getState('last_error')?.where).toBe('register');
    // Stored: a restart does not register again (no interceptor left would fail the test).
    expect(await credentials().ensureRegistered()).toMatchObject({ deviceId: 'dev_1' });
  });

  it('409: fatal, telling the technician to have the operator reset the device', async () => {
    mock.pool
      .intercept({ path: '/v1/device/register', method: 'POST' })
      .reply(409, err(4001, 'already registered'), json);
    const error = await credentials()
      .ensureRegistered()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AgentFatalError);
    expect(error).toMatchObject({ exitCode: EXIT_IDENTITY_REFUSED });
    expect((error as AgentFatalError).hint).toMatch(/operator to reset/);
  });

  it('403: fatal, not on the allowlist', async () => {
    mock.pool
      .intercept({ path: '/v1/device/register', method: 'POST' })
      .reply(403, err(2003, 'not allowed'), json);
    const error = (await credentials()
      .ensureRegistered()
      .catch((e: unknown) => e)) as AgentFatalError;
    expect(error.message).toMatch(/allowlist/);
    expect(error.hint).toMatch(/devices allow --sn SN-1/);
  });

  it('refuses a data directory that belongs to another charger', async () => {
    store.saveIdentity({ deviceId: 'dev_9', secret: 's', sn: 'OTHER', platformUrl: BASE, registeredAt: 'x' });
    await expect(credentials().ensureRegistered()).rejects.toThrow(/belongs to charger OTHER/);
  });

  it('keeps a token while fresh and renews it ahead of its expiry', async () => {
    store.saveIdentity({
      deviceId: 'dev_1',
      secret: 'secret-1',
      sn: 'SN-1',
      platformUrl: BASE,
      registeredAt: 'x',
    });
    mock.pool.intercept({ path: '/v1/device/token', method: 'POST' }).reply(200, token('tok-1'), json);
    const creds = credentials();
    expect(await creds.token()).toBe('tok-1');
    expect(store.getToken()?.accessToken).toBe('tok-1');
    now += 20 * 3_600_000;
    expect(await credentials().token()).toBe('tok-1'); // reused from the store across a restart
    now += 3 * 3_600_000 + 1; // within the last hour of 24
    mock.pool.intercept({ path: '/v1/device/token', method: 'POST' }).reply(200, token('tok-2'), json);
    expect(await creds.token()).toBe('tok-2');
    expect(renewMarginMs(86_400_000)).toBe(3_600_000);
    expect(renewMarginMs(60_000)).toBe(6_000);
  });

  it('registers again when the platform no longer accepts the secret (operator reset)', async () => {
    store.saveIdentity({
      deviceId: 'dev_1',
      secret: 'old',
      sn: 'SN-1',
      platformUrl: BASE,
      registeredAt: 'x',
    });
    mock.pool
      .intercept({ path: '/v1/device/token', method: 'POST', body: (b) => b.includes('"old"') })
      .reply(401, err(2001, 'Invalid device credentials'), json);
    mock.pool
      .intercept({ path: '/v1/device/register', method: 'POST' })
      .reply(200, registered('fresh'), json);
    mock.pool
      .intercept({ path: '/v1/device/token', method: 'POST', body: (b) => b.includes('"fresh"') })
      .reply(200, token('tok-new'), json);
    expect(await credentials().renew()).toBe('tok-new');
    expect(store.getIdentity()).toMatchObject({ deviceId: 'dev_1', secret: 'fresh' });
  });

  it('rotates the secret: stores the new one, then gets a token with it', async () => {
    store.saveIdentity({
      deviceId: 'dev_1',
      secret: 'old',
      sn: 'SN-1',
      platformUrl: BASE,
      registeredAt: 'x',
    });
    mock.pool
      .intercept({ path: '/v1/device/token', method: 'POST', body: (b) => b.includes('"old"') })
      .reply(200, token('tok-old'), json);
    mock.pool
      .intercept({
        path: '/v1/device/secret/rotate',
        method: 'POST',
        headers: { authorization: 'Bearer tok-old' },
      })
      .reply(200, registered('rotated'), json);
    mock.pool
      .intercept({ path: '/v1/device/token', method: 'POST', body: (b) => b.includes('"rotated"') })
      .reply(200, token('tok-rotated'), json);
    const creds = credentials();
    const client = createPlatformClient({ baseUrl: BASE, dispatcher: mock.agent, now: () => now });
    await creds.rotateSecret(client.withTokens(creds));
    expect(store.getIdentity()).toMatchObject({ secret: 'rotated', secretRotatedAt: expect.any(String) });
    expect(await creds.token()).toBe('tok-rotated');
  });

  it('does not register again while a rotation is in flight (its answer may be the way back in)', async () => {
    store.saveIdentity({
      deviceId: 'dev_1',
      secret: 'old',
      sn: 'SN-1',
      platformUrl: BASE,
      registeredAt: 'x',
    });
    store.saveToken({
      accessToken: 'tok-old',
      expiresAt: '2026-05-02T12:00:00.000Z',
      obtainedAt: '2026-05-01T12:00:00.000Z',
    });
    mock.pool
      .intercept({ path: '/v1/device/secret/rotate', method: 'POST' })
      .reply(200, registered('rotated'), json)
      .delay(150);
    mock.pool
      .intercept({ path: '/v1/device/token', method: 'POST', body: (b) => b.includes('"old"') })
      .reply(401, err(2001, 'Invalid device credentials'), json);
    mock.pool
      .intercept({ path: '/v1/device/token', method: 'POST', body: (b) => b.includes('"rotated"') })
      .reply(200, token('tok-rotated'), json)
      .times(2);
    const creds = credentials();
    const client = createPlatformClient({ baseUrl: BASE, dispatcher: mock.agent, now: () => now });
    const rotation = creds.rotateSecret(client.withTokens(creds));
    await new Promise((r) => setTimeout(r, 20));
    // Another loop's secret was refused during the rotation; its renewal must wait, not re-register (409, fatal).
    await expect(creds.renew()).rejects.toThrow('secret rotation in progress');
    await rotation;
    expect(store.getIdentity()?.secret).toBe('rotated');
    expect(await creds.renew()).toBe('tok-rotated');
  });
});

describe('answers are capped at 1 MiB (real undici, real TLS on loopback)', () => {
  const MIB = 1024 * 1024;
  /** A token answer padded with spaces to exactly `size` bytes: valid JSON, whatever its size. */
  const tokenAnswer = (size: number) => {
    const body = JSON.stringify(ok({ access_token: 'tok', token_type: 'Bearer', expires_in: 3600 }));
    return body + ' '.repeat(size - Buffer.byteLength(body));
  };

  async function httpsPlatform(handler: (path: string, res: import('node:http').ServerResponse) => void) {
    const tmp = tempDir('answer-cap-');
    const tls = await ensureSelfSignedCertificate(tmp.dir);
    const sockets = new Set<Socket>();
    const closedEarly: boolean[] = [];
    const server = createHttpsServer({ cert: tls.cert, key: tls.key }, (req, res) => {
      handler(req.url ?? '', res);
      res.on('close', () => closedEarly.push(!res.writableFinished));
    });
    server.on('secureConnection', (socket: Socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const client = createPlatformClient({ baseUrl: `https://127.0.0.1:${port}`, ca: tls.cert });
    return {
      client,
      closedEarly,
      sockets,
      async close() {
        await client.close();
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
        tmp.remove();
      },
    };
  }

  it('is 1 MiB', () => {
    expect(ANSWER_MAX_BYTES).toBe(MIB);
  });

  it('fails a 2 MiB answer streamed without a length, drops the connection, and the next request works', async () => {
    let big = true;
    const p = await httpsPlatform((_path, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      if (!big) return res.end(tokenAnswer(200));
      // 2 MiB in 64 KiB chunks, as a stream (chunked: no content-length to refuse up front).
      const chunk = ' '.repeat(64 * 1024);
      res.write('{"code":0,"message":"success","data":{"access_token":"');
      let sent = 0;
      const more = () => {
        while (sent < 32) {
          sent++;
          if (!res.write(chunk)) return res.once('drain', more);
        }
        res.end('"}}');
      };
      more();
    });
    try {
      const error = await caught(p.client.exchangeToken('dev_1', 's'));
      expect(error).toMatchObject({ kind: 'malformed', retryable: true, status: 200 });
      expect(error.message).toBe(
        `POST /v1/device/token: answer above the ${MIB}-byte limit; connection dropped`,
      );
      // The server saw its answer cut off: the agent closed the connection rather than read on.
      await vi.waitFor(() => expect(p.closedEarly).toEqual([true]));
      big = false;
      await expect(p.client.exchangeToken('dev_1', 's')).resolves.toMatchObject({ access_token: 'tok' });
    } finally {
      await p.close();
    }
  });

  it('fails a 2 MiB answer that declares its length before reading its body', async () => {
    const p = await httpsPlatform((_path, res) => {
      const body = tokenAnswer(2 * MIB);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
    try {
      const error = await caught(p.client.exchangeToken('dev_1', 's'));
      expect(error).toMatchObject({ kind: 'malformed', retryable: true });
      expect(error.message).toBe(
        `POST /v1/device/token: answer of ${2 * MIB} bytes declared, above the ${MIB}-byte limit; connection dropped`,
      );
    } finally {
      await p.close();
    }
  });

  it('reads an answer of exactly 1 MiB', async () => {
    const p = await httpsPlatform((_path, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(tokenAnswer(MIB));
    });
    try {
      await expect(p.client.exchangeToken('dev_1', 's')).resolves.toMatchObject({ access_token: 'tok' });
    } finally {
      await p.close();
    }
  });
});

describe('idle connections (real undici, real TLS on loopback)', () => {
  it('the agent keeps an idle connection 60 s, below the platform’s 75 s, so the agent closes first', () => {
    expect(KEEP_ALIVE_MS).toBe(60_000);
    expect(KEEP_ALIVE_MS).toBeLessThan(DEFAULT_CONNECTION_LIMITS.keepAliveMs);
  });

  it('closes an idle connection at its own limit although the platform offers a longer Keep-Alive', async () => {
    const tmp = tempDir('keep-alive-');
    const tls = await ensureSelfSignedCertificate(tmp.dir);
    const server = createHttpsServer({ cert: tls.cert, key: tls.key }, (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(ok({ access_token: 'tok', token_type: 'Bearer', expires_in: 3600 })));
    });
    server.keepAliveTimeout = 75_000;
    let closedAfterMs: number | undefined;
    server.on('secureConnection', (socket: Socket) => {
      const opened = Date.now();
      socket.on('close', () => {
        closedAfterMs = Date.now() - opened;
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const client = createPlatformClient({
      baseUrl: `https://127.0.0.1:${port}`,
      ca: tls.cert,
      keepAliveMs: 800,
    });
    try {
      await client.exchangeToken('dev_1', 's');
      // The server announced `Keep-Alive: timeout=75` and would hold the connection 75 s.
      await vi.waitFor(() => expect(closedAfterMs).toBeDefined(), { timeout: 10_000, interval: 50 });
      expect(closedAfterMs).toBeLessThan(5_000);
    } finally {
      await client.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      tmp.remove();
    }
  });
});
