import { createServer } from 'node:http';
import { Pool } from 'undici';
import { describe, expect, it, vi } from 'vitest';
import { checkCommand } from '../../../agent/core/command-checks.js';
import { createPlatformClient } from '../../../agent/link/platform-client.js';
import { failureOf } from '../../../agent/link/platform-errors.js';
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
 * The agent's platform client (agent/link/platform-client.ts) against answers that are not the platform
 * speaking — proxies' pages, commands with unusable names or expiries, answers that trickle or never connect,
 * refused token exchanges: regressions found by agent-fuzz.test.ts.
 */

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
