import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { createTenant, expectError, type HttpResult, registerDevice } from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';

/**
 * `POST /v1/device/secret/rotate`, two-phase (DESIGN.md §17), over real HTTPS on the run's backend: the rotation
 * answers a pending secret (the same one when asked again); the old secret and its tokens keep working until
 * the new secret buys a token or 24 hours pass; then the old secret and every token issued with it are refused
 * and the new secret is the only one. The platform's fake clock stands in for the 24 hours.
 */

const HOUR = 3_600_000;
const tp = platformPerFile();

let counter = 0;
const sn = () => {
  counter += 1;
  return `ROT-${process.pid}-${counter}`;
};
const tokenFor = (deviceId: string, secret: string) =>
  tp.http.post('/v1/device/token', {
    json: { device_id: deviceId, device_secret: secret, grant_type: 'client_credentials' },
  });
async function accessToken(deviceId: string, secret: string): Promise<string> {
  const res = await tokenFor(deviceId, secret);
  expect(res.status, res.text).toBe(200);
  return res.body.data.access_token as string;
}
const heartbeat = (token: string) =>
  tp.http.post('/v1/device/heartbeat', {
    token,
    json: { timestamp: new Date(tp.now()).toISOString(), status: 'online', fault_code: 0 },
  });
const rotate = (token: string) => tp.http.post('/v1/device/secret/rotate', { token });
async function pendingSecret(token: string): Promise<string> {
  const res = await rotate(token);
  expect(res.status, res.text).toBe(200);
  return res.body.data.device_secret as string;
}
const expectWorks = async (res: Promise<HttpResult>, what: string) => {
  const r = await res;
  expect(r.status, `${what}: ${r.text}`).toBe(200);
};
const expectRevoked = async (res: Promise<HttpResult>) => expectError(await res, 401, 2001);

describe('two-phase device secret rotation', () => {
  it('answers a pending secret, the same one when asked again; the old secret and its tokens keep working', async () => {
    const t = await createTenant(tp, 'rotation-grace');
    const d = await registerDevice(tp, sn(), t.siteId);
    const spare = await accessToken(d.deviceId, d.secret);

    const first = await rotate(d.token);
    expect(first.status, first.text).toBe(200);
    expect(first.body.data).toEqual({
      device_id: d.deviceId,
      device_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      expires_in: 86_400,
    });
    const fresh = first.body.data.device_secret as string;
    expect(fresh).not.toBe(d.secret);
    // A charger that lost the answer asks again, with any of its tokens, and gets the same secret.
    expect(await pendingSecret(spare)).toBe(fresh);

    tp.advance(23 * HOUR);
    await expectWorks(heartbeat(d.token), 'the old token during the grace');
    await expectWorks(heartbeat(spare), 'another old token during the grace');
    const during = await accessToken(d.deviceId, d.secret);
    await expectWorks(heartbeat(during), 'a token of the old secret issued during the grace');
    expect(await pendingSecret(during)).toBe(fresh);
    expect(await tp.store.getDevice(d.deviceId)).toMatchObject({
      secret_gen: 1,
      pending_since_ms: expect.any(Number),
    });

    // The first token with the new secret retires the old one and every token issued with it.
    const renewed = await accessToken(d.deviceId, fresh);
    for (const old of [d.token, spare, during]) {
      await expectRevoked(heartbeat(old));
      await expectRevoked(rotate(old));
    }
    await expectRevoked(tokenFor(d.deviceId, d.secret));
    await expectWorks(heartbeat(renewed), 'the new token');
    await expectWorks(heartbeat(await accessToken(d.deviceId, fresh)), 'another token of the new secret');
    expect(await tp.store.getDevice(d.deviceId)).toMatchObject({
      secret_gen: 2,
      pending_secret_sealed: null,
      pending_since_ms: null,
    });

    // The next rotation starts afresh, beside the secret now current.
    const next = await pendingSecret(renewed);
    expect(next).not.toBe(fresh);
    await expectWorks(heartbeat(renewed), 'the current token beside the next pending secret');
    await expectWorks(tokenFor(d.deviceId, fresh), 'the current secret beside the next pending secret');
  });

  it('a pending secret left unused for 24 h replaces the old one: the old secret and its tokens are refused, the new one works', async () => {
    const d = await registerDevice(tp, sn(), undefined);
    const fresh = await pendingSecret(d.token);
    tp.advance(12 * HOUR);
    // Issued in the grace with the old secret; it would live until 36 h after the rotation.
    const late = await accessToken(d.deviceId, d.secret);
    tp.advance(12 * HOUR - 5_000);
    await expectWorks(heartbeat(late), 'an old token seconds before the grace ends');
    tp.advance(5_000);
    // Refused from the first instant, whether or not the sweep has promoted the secret yet.
    await expectRevoked(heartbeat(late));
    await expectRevoked(rotate(late));
    await expectRevoked(tokenFor(d.deviceId, d.secret));

    await tp.platform.sweep();
    const row = await tp.store.getDevice(d.deviceId);
    expect(row).toMatchObject({ secret_gen: 2, pending_secret_sealed: null, pending_since_ms: null });
    expect(tp.platform.context.keys.openSecret(row?.secret_sealed ?? '')).toBe(fresh);
    const renewed = await accessToken(d.deviceId, fresh);
    await expectWorks(heartbeat(renewed), 'a token of the promoted secret');
    await expectRevoked(heartbeat(late));
    await expectRevoked(tokenFor(d.deviceId, d.secret));
  });

  it('a charger that uses the new secret after the grace, before the sweep, is let in and retires the old one', async () => {
    const d = await registerDevice(tp, sn(), undefined);
    const fresh = await pendingSecret(d.token);
    tp.advance(25 * HOUR);
    // Whichever comes first, this exchange or the sweep, promotes it once.
    const renewed = await accessToken(d.deviceId, fresh);
    await tp.platform.sweep();
    expect(await tp.store.getDevice(d.deviceId)).toMatchObject({ secret_gen: 2, pending_since_ms: null });
    await expectWorks(heartbeat(renewed), 'the new token');
    await expectRevoked(tokenFor(d.deviceId, d.secret));
  });

  it('devices reset drops a pending secret with the current one', async () => {
    const d = await registerDevice(tp, sn(), undefined);
    const fresh = await pendingSecret(d.token);
    const res = await runCli(['devices', 'reset', '--device', d.deviceId, '--data-dir', tp.dataDir]);
    expect(res.code, res.stderr).toBe(0);
    // The running platform hears of the other process's change within a couple of seconds.
    const deadline = Date.now() + 5_000;
    while ((await heartbeat(d.token)).status === 200) {
      expect(Date.now(), 'the reset never reached the platform').toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 200));
    }
    await expectRevoked(heartbeat(d.token));
    await expectRevoked(tokenFor(d.deviceId, fresh));
    await expectRevoked(tokenFor(d.deviceId, d.secret));
    expect(await tp.store.getDevice(d.deviceId)).toMatchObject({
      registered: false,
      pending_secret_sealed: null,
      pending_since_ms: null,
    });
  });

  it('needs a device token: 401/2001 without one and with an operator token, and nothing is rotated', async () => {
    const t = await createTenant(tp, 'rotation-auth');
    const d = await registerDevice(tp, sn(), t.siteId);
    await expectRevoked(tp.http.post('/v1/device/secret/rotate'));
    await expectRevoked(rotate(t.token));
    expect((await tp.store.getDevice(d.deviceId))?.pending_since_ms).toBeNull();
    await expectWorks(tokenFor(d.deviceId, d.secret), 'the secret');
  });
});
