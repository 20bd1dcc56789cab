import { MockAgent } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Clock } from '../../../agent/clock.js';
import {
  DEFAULT_SECRET_ROTATION_DAYS,
  type RotationStep,
  rotationStep,
  secretsToTry,
} from '../../../agent/core/secret-rotation-policy.js';
import { createDeviceCredentials, type DeviceCredentials } from '../../../agent/link/device-credentials.js';
import { createPlatformClient, type DeviceApi } from '../../../agent/link/platform-client.js';
import { PlatformError } from '../../../agent/link/platform-errors.js';
import { createSecretRotation } from '../../../agent/link/secret-rotation.js';
import { type AgentStore, type Identity, openAgentStore } from '../../../agent/store/agent-store.js';
import { quietLogger, tempDir } from '../../helpers/agent.js';

const DAY = 86_400_000;
const T0 = Date.parse('2026-05-01T12:00:00Z');

describe('secretsToTry', () => {
  it.each<[Pick<Identity, 'secret' | 'pendingSecret'>, string[]]>([
    [{ secret: 'old' }, ['old']],
    // The pending secret first: the platform may already have made it the only one.
    [{ secret: 'old', pendingSecret: 'new' }, ['new', 'old']],
    [{ secret: 'same', pendingSecret: 'same' }, ['same']],
  ])('%j: %j', (identity, want) => {
    expect(secretsToTry(identity)).toEqual(want);
  });
});

describe('rotationStep', () => {
  const registeredAt = new Date(T0).toISOString();
  const rotatedAt = new Date(T0 + 100 * DAY).toISOString();
  it.each<[string, Parameters<typeof rotationStep>[0], number, number, RotationStep]>([
    ['not registered', undefined, 90, T0 + 1000 * DAY, 'none'],
    ['young secret', { registeredAt }, 90, T0 + 89 * DAY, 'none'],
    ['90 days since registration', { registeredAt }, 90, T0 + 90 * DAY, 'ask'],
    ['off', { registeredAt }, 0, T0 + 1000 * DAY, 'none'],
    ['since the last rotation', { registeredAt, secretRotatedAt: rotatedAt }, 90, T0 + 150 * DAY, 'none'],
    [
      '90 days since the last rotation',
      { registeredAt, secretRotatedAt: rotatedAt },
      90,
      T0 + 190 * DAY,
      'ask',
    ],
    ['pending, even when young', { registeredAt, pendingSecret: 'p' }, 90, T0, 'use_pending'],
    ['pending, even when off', { registeredAt, pendingSecret: 'p' }, 0, T0, 'use_pending'],
    ['unreadable time', { registeredAt: 'x' }, 90, T0, 'ask'],
    ['clock behind the registration', { registeredAt }, 90, T0 - DAY, 'none'],
  ])('%s: %s', (_what, identity, days, now, want) => {
    expect(rotationStep(identity, days, now)).toBe(want);
  });

  it('is on by default, every 90 days', () => {
    expect(DEFAULT_SECRET_ROTATION_DAYS).toBe(90);
  });
});

describe('createSecretRotation: pacing', () => {
  it('runs a due step after each heartbeat, and after a failure waits a backoff before the next', async () => {
    let now = T0 + 91 * DAY;
    let fail = true;
    let calls = 0;
    const credentials = {
      identity: () => ({
        deviceId: 'd',
        secret: 's',
        sn: 'SN',
        platformUrl: 'x',
        registeredAt: new Date(T0).toISOString(),
      }),
      rotateSecret: async () => {
        calls += 1;
        if (fail) throw new PlatformError('network', 'cut');
      },
    } as unknown as DeviceCredentials;
    const rotation = createSecretRotation({
      credentials,
      api: {} as DeviceApi,
      clock: { now: () => now, setTimeout: () => 0, clearTimeout: () => undefined },
      days: 90,
      backoff: { baseMs: 1_000, capMs: 60_000 },
      random: () => 0.999,
    });
    await expect(rotation.check()).rejects.toThrow('cut');
    expect(calls).toBe(1);
    await rotation.check(); // within the backoff: not asked again
    expect(calls).toBe(1);
    now += 1_000;
    await expect(rotation.check()).rejects.toThrow('cut');
    expect(calls).toBe(2);
    now += 1_500; // the second wait is up to 2 s
    await rotation.check();
    expect(calls).toBe(2);
    fail = false;
    now += 500;
    await rotation.check();
    expect(calls).toBe(3);
  });
});

/**
 * The credentials' half of two-phase rotation against a mocked platform: what is offered in which order and
 * what the store keeps after each answer. The end-to-end cases (a real platform, answers cut, the agent
 * killed between steps) are test/integration/agent-secret-rotation.test.ts.
 */
describe('device credentials: two-phase rotation', () => {
  const BASE = 'https://platform.test';
  const json = { headers: { 'content-type': 'application/json' } };
  const ok = (data: unknown) => ({ code: 0, message: 'success', data });
  const refused = { code: 2001, message: 'Invalid device credentials' };
  const token = (value: string) => ok({ access_token: value, token_type: 'Bearer', expires_in: 86_400 });
  const withSecret = (secret: string) => (body: string) => body.includes(`"device_secret":"${secret}"`);
  let tmp: ReturnType<typeof tempDir>;
  let store: AgentStore;
  let mock: MockAgent;
  const clock: Clock = {
    now: () => T0,
    setTimeout: (callback) => setTimeout(callback, 0),
    clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
  };
  const pool = () => mock.get(BASE);
  function credentials() {
    const client = createPlatformClient({ baseUrl: BASE, dispatcher: mock, now: () => T0 });
    const creds = createDeviceCredentials({
      store,
      client,
      clock,
      logger: quietLogger(),
      sn: 'SN-1',
      platformUrl: BASE,
      registration: () => ({ sn: 'SN-1', model: 'M', manufacturer: 'Acme', firmware_version: '1.0' }),
      random: () => 0.5,
      backoff: { baseMs: 10, capMs: 100 },
    });
    return { creds, api: client.withTokens(creds) };
  }

  beforeEach(() => {
    tmp = tempDir();
    store = openAgentStore(tmp.dir);
    mock = new MockAgent();
    mock.disableNetConnect();
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
  });
  afterEach(async () => {
    store.close();
    tmp.remove();
    await mock.close();
  });

  it('a lost rotation answer stores nothing; asking again gets the secret the platform keeps pending', async () => {
    pool()
      .intercept({ path: '/v1/device/secret/rotate', method: 'POST' })
      .replyWithError(new Error('connection reset'));
    const { creds, api } = credentials();
    await expect(creds.rotateSecret(api)).rejects.toThrow();
    expect(store.getIdentity()).toMatchObject({ secret: 'old' });
    expect(store.getIdentity()?.pendingSecret).toBeUndefined();
    // The old token still serves meanwhile.
    expect(await creds.token()).toBe('tok-old');
    pool()
      .intercept({ path: '/v1/device/secret/rotate', method: 'POST' })
      .reply(200, ok({ device_id: 'dev_1', device_secret: 'new', expires_in: 86_400 }), json);
    pool()
      .intercept({ path: '/v1/device/token', method: 'POST', body: withSecret('new') })
      .reply(200, token('tok-new'), json);
    await creds.rotateSecret(api);
    expect(store.getIdentity()).toMatchObject({ secret: 'new', secretRotatedAt: new Date(T0).toISOString() });
    expect(store.getIdentity()?.pendingSecret).toBeUndefined();
    expect(store.getToken()?.accessToken).toBe('tok-new');
  });

  it('a lost token answer keeps both secrets; the next exchange offers the new one first', async () => {
    pool()
      .intercept({ path: '/v1/device/secret/rotate', method: 'POST' })
      .reply(200, ok({ device_id: 'dev_1', device_secret: 'new', expires_in: 86_400 }), json);
    pool()
      .intercept({ path: '/v1/device/token', method: 'POST', body: withSecret('new') })
      .replyWithError(new Error('connection reset'));
    const first = credentials();
    await expect(first.creds.rotateSecret(first.api)).rejects.toThrow();
    expect(store.getIdentity()).toMatchObject({ secret: 'old', pendingSecret: 'new' });
    expect(store.getToken()?.accessToken).toBe('tok-old');
    // Restarted: the platform promoted the new secret before the answer was lost, so only it works now.
    pool()
      .intercept({ path: '/v1/device/token', method: 'POST', body: withSecret('new') })
      .reply(200, token('tok-new'), json);
    const second = credentials();
    // Nothing is asked of /secret/rotate (no interceptor): the stored pending secret is used.
    await second.creds.rotateSecret(second.api);
    expect(store.getIdentity()).toMatchObject({ secret: 'new' });
    expect(store.getIdentity()?.pendingSecret).toBeUndefined();
    expect(await second.creds.token()).toBe('tok-new');
  });

  it('a pending secret the platform refuses, beside an old one it takes, is dropped; nothing re-registers', async () => {
    store.savePendingSecret('unknown', '2026-05-01T11:00:00.000Z');
    pool()
      .intercept({ path: '/v1/device/token', method: 'POST', body: withSecret('unknown') })
      .reply(401, refused, json);
    pool()
      .intercept({ path: '/v1/device/token', method: 'POST', body: withSecret('old') })
      .reply(200, token('tok-again'), json);
    const { creds } = credentials();
    expect(await creds.renew()).toBe('tok-again');
    expect(store.getIdentity()).toMatchObject({ secret: 'old' });
    expect(store.getIdentity()?.pendingSecret).toBeUndefined();
  });

  it('both secrets refused (the operator reset the charger): registers again and drops the pending one', async () => {
    store.savePendingSecret('new', '2026-05-01T11:00:00.000Z');
    for (const secret of ['new', 'old'])
      pool()
        .intercept({ path: '/v1/device/token', method: 'POST', body: withSecret(secret) })
        .reply(401, refused, json);
    pool()
      .intercept({ path: '/v1/device/register', method: 'POST' })
      .reply(200, ok({ device_id: 'dev_1', device_secret: 'fresh', expires_in: 86_400 }), json);
    pool()
      .intercept({ path: '/v1/device/token', method: 'POST', body: withSecret('fresh') })
      .reply(200, token('tok-fresh'), json);
    const { creds } = credentials();
    expect(await creds.renew()).toBe('tok-fresh');
    expect(store.getIdentity()).toMatchObject({ secret: 'fresh' });
    expect(store.getIdentity()?.pendingSecret).toBeUndefined();
  });

  it('a platform that cannot be reached keeps both secrets and the old token', async () => {
    store.savePendingSecret('new', '2026-05-01T11:00:00.000Z');
    pool()
      .intercept({ path: '/v1/device/token', method: 'POST', body: withSecret('new') })
      .reply(503, { code: 9001, message: 'down' }, json);
    const { creds, api } = credentials();
    await expect(creds.rotateSecret(api)).rejects.toThrow();
    expect(store.getIdentity()).toMatchObject({ secret: 'old', pendingSecret: 'new' });
    expect(await creds.token()).toBe('tok-old');
  });
});
