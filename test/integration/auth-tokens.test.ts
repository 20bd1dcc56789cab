import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signRequest } from '../../shared/index.js';
import { AuthMatrix, type Client, type Tenant } from '../helpers/auth-matrix.js';
import { bodyOf, expectRefusal, type Ids, key, scopeOf } from '../helpers/auth-matrix-requests.js';
import {
  type HttpResult,
  operatorToken,
  type RegisteredDevice,
  type TestPlatform,
} from '../helpers/platform.js';

/**
 * Tokens and signatures (DESIGN.md §2, §4, §8): every single-character change and re-encoding of operator and
 * device tokens, request signatures tampered, replayed, stale or for another request, credential checks that
 * answer alike whatever was wrong, and tokens past their lifetime on every endpoint (last: the clock moves a day
 * on). Part of the authentication matrix of auth-matrix.test.ts, whose check that nothing secret is logged this
 * file runs on its own logs (afterAll).
 */

const matrix = new AuthMatrix();
const { keep, keepToken, newClient, newDevice, call, authed, operatorRoutes, deviceRoutes, upgrade } = matrix;
let tp: TestPlatform;
let alpha: Tenant;
let bravo: Tenant;
let readOnly: Client;
let writeOnly: Client;
let devA: RegisteredDevice;
let devB: RegisteredDevice;
let own: Ids;

/** How far the fake clock was moved (the signatures' timestamps follow the platform's clock). */
let advanced = 0;

beforeAll(async () => {
  ({ tp, alpha, bravo, readOnly, writeOnly, devA, devB, own } = await matrix.start());
});
afterAll(async () => {
  // The check of auth-matrix.test.ts's last test, over what this file sent.
  if (tp) matrix.expectNoSecretLogged();
  await tp?.stop();
});

describe('token and signature tampering: 401/2001', () => {
  const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  /** The next character of the token's alphabet (a one-bit change for most of them). */
  const flip = (c: string) =>
    c === '.' ? '_' : (ALPHABET[(ALPHABET.indexOf(c) + 1) % ALPHABET.length] ?? 'A');

  function variants(token: string): Array<[string, string]> {
    const [kind, claims, mac] = token.split('.') as [string, string, string];
    const out: Array<[string, string]> = [];
    // Every single character changed, one at a time: kind prefix, claims and MAC alike.
    for (let i = 0; i < token.length; i++) {
      out.push([`char ${i} ('${token[i]}')`, token.slice(0, i) + flip(token[i]!) + token.slice(i + 1)]);
    }
    const other = kind === 'op' ? 'dv' : 'op';
    out.push(
      ['other kind', `${other}.${claims}.${mac}`],
      ['upper-case kind', `${kind.toUpperCase()}.${claims}.${mac}`],
      ['no kind', `.${claims}.${mac}`],
      ['longer kind', `${kind}x.${claims}.${mac}`],
      ['empty MAC', `${kind}.${claims}.`],
      ['truncated MAC', `${kind}.${claims}.${mac.slice(0, -1)}`],
      ['MAC plus a character', `${kind}.${claims}.${mac}A`],
      ['MAC plus a non-alphabet character', `${kind}.${claims}.${mac}~`],
      ['MAC plus padding', `${kind}.${claims}.${mac}=`],
      ['MAC with a character inserted', `${kind}.${claims}.${mac.slice(0, 10)}!${mac.slice(10)}`],
      ['MAC in standard base64', `${kind}.${claims}.${mac.replace(/-/g, '+').replace(/_/g, '/')}`],
      [
        'MAC of another token',
        `${kind}.${claims}.${(kind === 'op' ? devA.token : alpha.token).split('.')[2]}`,
      ],
      ['claims plus padding', `${kind}.${claims}=.${mac}`],
      ['extra segment', `${kind}.${claims}.${mac}.${mac}`],
    );
    // The last MAC character carries spare bits: every other character there must be refused as well.
    for (const c of ALPHABET)
      if (c !== mac.at(-1)) out.push([`last MAC char ${c}`, `${kind}.${claims}.${mac.slice(0, -1)}${c}`]);
    // Claims re-encoded with another subject, expiry, tenants, scopes or generation, keeping the MAC.
    const decoded = JSON.parse(Buffer.from(claims, 'base64url').toString('utf8')) as Record<string, unknown>;
    const reencode = (patch: Record<string, unknown>) =>
      `${kind}.${Buffer.from(JSON.stringify({ ...decoded, ...patch })).toString('base64url')}.${mac}`;
    out.push(
      ['same claims re-encoded', reencode({})],
      ['claims with another sub', reencode({ sub: kind === 'op' ? bravo.clientId : devB.deviceId })],
      ['claims with a later exp', reencode({ exp: (decoded.exp as number) + 365 * 86_400 })],
      ['claims with an earlier exp', reencode({ exp: (decoded.exp as number) - 1 })],
      ['claims with another tenant', reencode({ ops: [bravo.operatorId, alpha.operatorId] })],
      ['claims with more scopes', reencode({ scp: ['read', 'write', 'admin'] })],
      ['claims with another generation', reencode({ gen: ((decoded.gen as number) ?? 1) + 1 })],
      ['claims without exp', reencode({ exp: undefined })],
    );
    return out.filter(([, t]) => t !== token);
  }

  it('every single-character change and every re-encoding of an operator token is refused', async () => {
    const route = operatorRoutes().find((r) => r.url === '/v1/operator/devices/:device_id')!;
    // The untampered token works (and is cached as verified: tampering must not ride on that cache).
    expect((await call(route, `Bearer ${readOnly.token}`)).status).toBe(200);
    const all = variants(readOnly.token);
    expect(all.length).toBeGreaterThan(150);
    for (const [label, token] of all)
      expectRefusal(await call(route, `Bearer ${token}`), 401, 2001, `op ${label}`);
    expect((await call(route, `Bearer ${readOnly.token}`)).status).toBe(200);
  });

  it('every single-character change and every re-encoding of a device token is refused', async () => {
    const route = deviceRoutes().find((r) => r.url === '/v1/device/telemetry')!;
    const d = await newDevice(alpha, 'TAMPER');
    const all = variants(d.token);
    for (const [label, token] of all)
      expectRefusal(await call(route, `Bearer ${token}`), 401, 2001, `dv ${label}`);
    expect((await call(route, `Bearer ${d.token}`)).status).toBe(200);
  });

  it('regression: a MAC with characters the base64url decoder would skip or ignore is refused', async () => {
    // platform/auth/access-tokens.ts compared decoded bytes: '~', '=', '!' and '+' were skipped by the decoder,
    // and the spare low bits of the last character ignored, so altered tokens authenticated.
    const route = operatorRoutes().find((r) => r.url === '/v1/operator/sites')!;
    const [kind, claims, mac] = alpha.token.split('.') as [string, string, string];
    const last = mac.at(-1)!;
    const sameBits = ALPHABET[ALPHABET.indexOf(last) ^ 1]!; // differs only in a bit the decoder drops
    for (const token of [
      `${kind}.${claims}.${mac}~`,
      `${kind}.${claims}.${mac}=`,
      `${kind}.${claims}.${mac.slice(0, 5)}!${mac.slice(5)}`,
      `${kind}.${claims}.${mac.slice(0, -1)}${sameBits}`,
    ]) {
      expect(Buffer.from(token.split('.')[2]!, 'base64url')).toEqual(Buffer.from(mac, 'base64url'));
      expectRefusal(await call(route, `Bearer ${token}`), 401, 2001, token.slice(-50));
    }
    expect((await call(route, `Bearer ${alpha.token}`)).status).toBe(200);
  });

  it('request signatures: tampered, replayed, stale, for another request or another key: 401/2001', async () => {
    const c = await newClient(alpha, ['read', 'write']);
    const path = `/v1/operator/devices/${own.device_id}`;
    const now = () => Math.floor((Date.now() + advanced) / 1000);
    const signed = (sig: string, ts: number | string, p = path) =>
      tp.http.get(p, { token: c.token, headers: { 'x-signature': sig, 'x-timestamp': String(ts) } });
    const sign = (ts: number, p = path, secret = c.secret) => {
      const s = signRequest(secret, 'GET', p, ts, '');
      keep(s);
      return s;
    };
    const ts = now();
    const good = sign(ts);
    expect((await signed(good, ts)).status).toBe(200);
    expectRefusal(await signed(good, ts), 401, 2001, 'replayed signature');
    expectRefusal(await signed(good.toUpperCase(), ts), 401, 2001, 'replayed in upper case');
    const fresh = sign(ts + 1);
    for (const i of [0, 31, 63]) {
      const tampered = fresh.slice(0, i) + (fresh[i] === '0' ? '1' : '0') + fresh.slice(i + 1);
      expectRefusal(await signed(tampered, ts + 1), 401, 2001, `signature char ${i}`);
    }
    expectRefusal(await signed(fresh, ts + 2), 401, 2001, 'signature with another timestamp');
    expectRefusal(await signed(sign(ts - 301), ts - 301), 401, 2001, 'stale timestamp');
    // Taken now, not from `ts`: under load the requests above can take more than the second of margin.
    const future = now() + 302;
    expectRefusal(await signed(sign(future), future), 401, 2001, 'future timestamp');
    expectRefusal(await signed(sign(ts, `${path}?x=1`), ts), 401, 2001, 'signature for another path');
    expectRefusal(await signed(sign(ts, path, bravo.clientSecret), ts), 401, 2001, 'signed with another key');
    expectRefusal(await signed(fresh.slice(0, 63), ts + 1), 401, 2001, 'short signature');
    expectRefusal(await signed('z'.repeat(64), ts + 1), 401, 2001, 'not hex');
    expectRefusal(await signed(fresh, 'soon'), 401, 2001, 'timestamp not a number');
    // The untampered one still goes through once.
    expect((await signed(fresh, ts + 1)).status).toBe(200);
    // Device side: the same rules with the device secret.
    const d = await newDevice(alpha, 'SIG');
    const body = JSON.stringify(bodyOf(deviceRoutes().find((r) => r.url === '/v1/device/heartbeat')!, own));
    const dsig = signRequest(d.secret, 'POST', '/v1/device/heartbeat', ts, body);
    keep(dsig);
    const hb = (sig: string, raw = body) =>
      tp.http.post('/v1/device/heartbeat', {
        token: d.token,
        raw,
        contentType: 'application/json',
        headers: { 'x-signature': sig, 'x-timestamp': String(ts) },
      });
    expectRefusal(await hb(dsig, body.replace('online', 'fault')), 401, 2001, 'device: body changed');
    expect((await hb(dsig)).status).toBe(200);
    expectRefusal(await hb(dsig), 401, 2001, 'device: replayed');
  });
});

describe('credential checks answer alike, whatever was wrong', () => {
  /**
   * Status, body and which headers came: everything a caller can compare. (The values of the RateLimit headers
   * count the requests made for the client_id or device_id asked, whether it exists or not.)
   */
  function comparable(res: HttpResult) {
    return { status: res.status, body: res.body, headers: Object.keys(res.headers).sort() };
  }
  const zeroed = (id: string) => id.replace(/[0-9a-f]+$/, (hex) => '0'.repeat(hex.length));

  it('operator token endpoint: an unknown client_id and a wrong secret for a known one answer identically', async () => {
    const c = await newClient(alpha, ['read']);
    const unknown = zeroed(c.clientId);
    const ask = (client_id: string, client_secret: string) =>
      tp.http.post('/v1/operator/oauth/token', {
        json: { client_id, client_secret, grant_type: 'client_credentials' },
      });
    const wrong = await ask(c.clientId, `${c.secret.slice(0, -1)}x`);
    const none = await ask(unknown, c.secret);
    expectRefusal(wrong, 401, 2001, 'wrong secret', 'invalid_client');
    expect(comparable(none)).toEqual(comparable(wrong));
    // Another client's secret, an empty-looking one and a huge one: the same again.
    expect(comparable(await ask(c.clientId, bravo.clientSecret)).body).toEqual(comparable(wrong).body);
    expect(comparable(await ask(c.clientId, 'x')).body).toEqual(comparable(wrong).body);
    // Through HTTP Basic as well.
    const basic = async (id: string, secret: string) => {
      const header = `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
      keep(header.slice(6));
      return tp.http.post('/v1/operator/oauth/token', {
        raw: 'grant_type=client_credentials',
        contentType: 'application/x-www-form-urlencoded',
        headers: { authorization: header },
      });
    };
    const basicWrong = await basic(c.clientId, 'nope');
    expectRefusal(basicWrong, 401, 2001, 'basic wrong secret', 'invalid_client');
    expect(comparable(await basic(`${unknown.slice(0, -1)}1`, 'nope'))).toEqual(comparable(basicWrong));
    expect(comparable(await basic(unknown, c.secret))).toEqual(comparable(basicWrong));
    // A secret in the query string: refused as any unknown query parameter (invalid_request, the value not
    // echoed), and redacted from the logs too (checked at the end).
    const inQuery = await tp.http.post(
      `/v1/operator/oauth/token?client_secret=${encodeURIComponent(c.secret)}`,
      { json: { client_id: c.clientId, client_secret: c.secret, grant_type: 'client_credentials' } },
    );
    expectRefusal(inQuery, 400, 1001, 'secret in the query', 'invalid_request');
    expect(inQuery.body.details.field).toBe('client_secret');
    expect(inQuery.text).not.toContain(c.secret);
  });

  it('device token endpoint: unknown device, wrong secret, reset device and rotated secret answer identically', async () => {
    const d = await newDevice(alpha, 'CT');
    const reset = await newDevice(alpha, 'CT-RESET');
    await tp.store.resetDevice(reset.deviceId);
    const ask = (device_id: string, device_secret: string) =>
      tp.http.post('/v1/device/token', {
        json: { device_id, device_secret, grant_type: 'client_credentials' },
      });
    const wrong = await ask(d.deviceId, `${d.secret.slice(0, -1)}x`);
    expectRefusal(wrong, 401, 2001, 'wrong device secret');
    const unknownId = zeroed(d.deviceId);
    for (const [label, res] of [
      ['unknown device', await ask(unknownId, d.secret)],
      ['reset device with its old secret', await ask(reset.deviceId, reset.secret)],
      ['another device’s secret', await ask(d.deviceId, devB.secret)],
    ] as const) {
      expect({ label, ...comparable(res) }).toEqual({ label, ...comparable(wrong) });
    }
  });
});

describe('expired tokens: 401/2002 on every endpoint (runs last: the clock moves a day on)', () => {
  it('operator and device tokens past their lifetime', async () => {
    const d = await newDevice(alpha, 'EXP');
    const tokens = { operator: alpha.token, device: d.token };
    tp.advance(86_400_000 + 2_000);
    advanced += 86_400_000 + 2_000;
    for (const route of authed()) {
      const token = route.auth.kind === 'device' ? tokens.device : tokens.operator;
      expectRefusal(await call(route, `Bearer ${token}`), 401, 2002, `${key(route)} expired`);
    }
    // The read-only and write-only tokens too: expiry is answered before the scope is looked at.
    for (const route of operatorRoutes()) {
      const token = scopeOf(route) === 'write' ? readOnly.token : writeOnly.token;
      expectRefusal(await call(route, `Bearer ${token}`), 401, 2002, `${key(route)} expired, wrong scope`);
    }
    const stream = await upgrade({ authorization: `Bearer ${alpha.token}` }, '');
    expect({ status: stream.status, code: stream.body?.code }).toEqual({ status: 401, code: 2002 });
    // A tampered expired token is still a bad signature, not "expired": nothing is read from unverified claims.
    const [kind, claims] = alpha.token.split('.') as [string, string];
    expectRefusal(
      await call(operatorRoutes()[1]!, `Bearer ${kind}.${claims}.${'A'.repeat(43)}`),
      401,
      2001,
      'expired claims, forged MAC',
    );
    // New tokens work again.
    const fresh = await operatorToken(tp.http, alpha.clientId, alpha.clientSecret);
    keepToken(fresh);
    expect((await tp.http.get('/v1/operator/sites', { token: fresh })).status).toBe(200);
  });
});
