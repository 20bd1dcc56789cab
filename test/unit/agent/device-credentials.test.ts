import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AgentFatalError, EXIT_IDENTITY_REFUSED } from '../../../agent/agent-errors.js';
import type { Clock } from '../../../agent/clock.js';
import { createDeviceCredentials, renewMarginMs } from '../../../agent/link/device-credentials.js';
import { createPlatformClient } from '../../../agent/link/platform-client.js';
import { type AgentStore, openAgentStore } from '../../../agent/store/agent-store.js';
import { quietLogger, tempDir } from '../../helpers/agent.js';
import { BASE, err, json, mockPlatform, ok } from '../../helpers/mocked-platform.js';

/**
 * The agent's device credentials (agent/link/device-credentials.ts) against a mocked platform: registration,
 * the token's lifecycle, registering again after a reset, and the two-phase secret rotation.
 */

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
