import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPlatformClient, type PlatformClient } from '../../../agent/link/platform-client.js';
import { failureOf, parseRetryAfter } from '../../../agent/link/platform-errors.js';
import { signRequest } from '../../../shared/request-signing.js';
import {
  BASE,
  caught,
  countingTokens,
  err,
  json,
  mockPlatform,
  ok,
  SERVER_TIME,
} from '../../helpers/mocked-platform.js';

/**
 * The agent's platform client (agent/link/platform-client.ts) against a mocked platform: how failures are
 * classified, and what it makes of heartbeats, malformed answers, network failures, token renewal, signing and
 * 429s. Answers that are not the platform speaking are in platform-client-regressions.test.ts, the device
 * credentials in device-credentials.test.ts, the answer cap and idle connections over real TLS in
 * platform-client-connections.test.ts.
 */

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
