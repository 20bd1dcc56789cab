import { X509Certificate } from 'node:crypto';
import https from 'node:https';
import type { TLSSocket } from 'node:tls';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AttestedCas,
  type AttestedPlatform,
  startAttestedPlatform,
} from '../helpers/attested-platform.js';
import { makeCa, opensslTime } from '../helpers/certificates.js';
import type { HttpResult, TestPlatform } from '../helpers/platform.js';

/**
 * Attested registration (DESIGN.md §18) over real HTTPS on loopback: the platform asks every connection for a
 * client certificate, and `POST /v1/device/register` takes a serial only with a certificate that names it and
 * chains to an active enrolment group's CA. Certificates are made by the real `openssl`
 * (`helpers/attested-platform.ts`); real agents and the simulated fleet: attested-agents.test.ts.
 */
const DAY = 86_400_000;

let setup: AttestedPlatform;
let tp: TestPlatform;
let tenant: AttestedPlatform['tenant'];
let ca: AttestedCas;
let other: AttestedPlatform['other'];
let depot: AttestedPlatform['depot'];
let noSite: AttestedPlatform['noSite'];

beforeAll(async () => {
  setup = await startAttestedPlatform();
  ({ tp, tenant, other, ca, depot, noSite } = setup);
}, 60_000);

afterAll(async () => {
  await setup?.stop();
});

/** A charger's HTTPS client presenting `identity` (leaf, then any intermediates) on every connection. */
function charger(identity?: { cert: string; key: string }) {
  const dispatcher = new Agent({ connect: { ca: tp.ca, ...identity }, keepAliveTimeout: 1000 });
  return {
    async register(sn: string): Promise<HttpResult> {
      const res = await request(`${tp.url}/v1/device/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ sn, model: 'AC22', manufacturer: 'Acme', firmware_version: '1.0.0' }),
        dispatcher,
      });
      const text = await res.body.text();
      return { status: res.statusCode, headers: res.headers, body: JSON.parse(text), text };
    },
    close: () => dispatcher.close(),
  };
}

async function registerWith(sn: string, identity?: { cert: string; key: string }): Promise<HttpResult> {
  const c = charger(identity);
  try {
    return await c.register(sn);
  } finally {
    await c.close();
  }
}

const leaf: AttestedPlatform['leaf'] = (...args) => setup.leaf(...args);

function expectRefused(res: HttpResult, message: string) {
  expect(res.status, res.text).toBe(403);
  expect(res.body).toMatchObject({ code: 2003 });
  expect(res.body.message).toContain(message);
  // What is missing, never which groups exist.
  for (const secret of [
    depot.enrolment_id,
    noSite.enrolment_id,
    'depot chargers',
    'oem-ca',
    tenant.operatorId,
  ])
    expect(res.text).not.toContain(secret);
}

async function visibleToTenant(deviceId: string, token = tenant.token) {
  return tp.http.get(`/v1/operator/devices/${deviceId}`, { token });
}

describe('accepted', () => {
  it('a certificate naming the serial in its CN: the charger is in the group’s site at once', async () => {
    const cert = await leaf(ca.oem, 'SN-ATT-CN');
    const res = await registerWith('SN-ATT-CN', cert);
    expect(res.status, res.text).toBe(200);
    const deviceId = res.body.data.device_id as string;
    expect((await tp.store.getDevice(deviceId))?.site_id).toBe(tenant.siteId);
    // Zero-touch: the operator's client sees it straight away, nobody else does.
    const seen = await visibleToTenant(deviceId);
    expect(seen.status, seen.text).toBe(200);
    expect(seen.body.data).toMatchObject({ device_id: deviceId, sn: 'SN-ATT-CN', site_id: tenant.siteId });
    expect((await visibleToTenant(deviceId, other.token)).status).toBe(404);
    const list = await tp.http.get(`/v1/operator/devices?site_id=${tenant.siteId}`, { token: tenant.token });
    expect(list.body.data.items.map((d: { device_id: string }) => d.device_id)).toContain(deviceId);
  });

  it('a certificate naming the serial as a SAN URI urn:charger:sn:SN', async () => {
    const cert = await leaf(ca.oem, 'Acme charger', { uris: ['urn:charger:sn:SN-ATT-SAN'] });
    const res = await registerWith('SN-ATT-SAN', cert);
    expect(res.status, res.text).toBe(200);
  });

  it('a certificate from an intermediate the charger sends after it', async () => {
    const cert = await leaf(ca.intermediate, 'SN-ATT-INT');
    const res = await registerWith('SN-ATT-INT', { cert: cert.cert + ca.intermediate.cert, key: cert.key });
    expect(res.status, res.text).toBe(200);
    expect((await tp.store.getDevice(res.body.data.device_id))?.site_id).toBe(tenant.siteId);
  });

  it('a group without a site: registered, unassigned, visible to nobody until an operator assigns it', async () => {
    const cert = await leaf(ca.oem2, 'SN-ATT-LOOSE');
    const res = await registerWith('SN-ATT-LOOSE', cert);
    expect(res.status, res.text).toBe(200);
    const deviceId = res.body.data.device_id as string;
    expect((await tp.store.getDevice(deviceId))?.site_id).toBeNull();
    expect((await visibleToTenant(deviceId)).status).toBe(404);
  });

  it('the registered charger works with its secret (token exchange)', async () => {
    const cert = await leaf(ca.oem, 'SN-ATT-TOKEN');
    const res = await registerWith('SN-ATT-TOKEN', cert);
    const tok = await tp.http.post('/v1/device/token', {
      json: {
        device_id: res.body.data.device_id,
        device_secret: res.body.data.device_secret,
        grant_type: 'client_credentials',
      },
    });
    expect(tok.status, tok.text).toBe(200);
  });
});

describe('refused with 403/2003', () => {
  it('without a certificate', async () => {
    expectRefused(await registerWith('SN-ATT-NONE'), 'needs a TLS client certificate');
  });

  it('with another serial’s certificate', async () => {
    const cert = await leaf(ca.oem, 'SN-ATT-OWNER');
    expectRefused(await registerWith('SN-ATT-THIEF', cert), 'does not name this serial number');
  });

  it('with an expired certificate', async () => {
    const now = Date.now();
    const cert = await leaf(ca.oem, 'SN-ATT-OLD', {
      startDate: opensslTime(now - 60 * DAY),
      endDate: opensslTime(now - DAY),
    });
    expectRefused(await registerWith('SN-ATT-OLD', cert), 'expired or not yet valid');
  });

  it('with a certificate of a revoked group', async () => {
    const cert = await leaf(ca.revoked, 'SN-ATT-RECALLED');
    expectRefused(
      await registerWith('SN-ATT-RECALLED', cert),
      'does not chain to an enrolled manufacturer CA',
    );
  });

  it('with a certificate of a CA nobody enrolled', async () => {
    const cert = await leaf(ca.untrusted, 'SN-ATT-STRANGER');
    expectRefused(
      await registerWith('SN-ATT-STRANGER', cert),
      'does not chain to an enrolled manufacturer CA',
    );
  });

  it('with a certificate signed by a CA:FALSE "CA"', async () => {
    const cert = await leaf(ca.flat, 'SN-ATT-FLAT', { keyUsage: false });
    expectRefused(await registerWith('SN-ATT-FLAT', cert), 'does not chain to an enrolled manufacturer CA');
  });

  it('with a genuine charger certificate used as a CA for another serial', async () => {
    const genuine = await leaf(ca.oem, 'SN-ATT-GENUINE', { keyUsage: false });
    const forged = await leaf(genuine, 'SN-ATT-FORGED');
    const res = await registerWith('SN-ATT-FORGED', { cert: forged.cert + genuine.cert, key: forged.key });
    expectRefused(res, 'does not chain to an enrolled manufacturer CA');
  });

  it('with a CA certificate as the charger’s own', async () => {
    const sub = await leaf(ca.oem, 'SN-ATT-SUBCA', { ca: true });
    expectRefused(await registerWith('SN-ATT-SUBCA', sub), 'is a CA certificate');
  });
});

describe('a serial already registered', () => {
  it('is refused with 409 even with its own certificate; after a reset only its certificate registers it again', async () => {
    const cert = await leaf(ca.oem, 'SN-ATT-RESET');
    const first = await registerWith('SN-ATT-RESET', cert);
    expect(first.status, first.text).toBe(200);
    const deviceId = first.body.data.device_id as string;
    expect((await registerWith('SN-ATT-RESET', cert)).status).toBe(409);

    expect(await tp.store.resetDevice(deviceId)).toBe(true);
    // The serial alone, or another charger's certificate, no longer takes over the identity.
    expectRefused(await registerWith('SN-ATT-RESET'), 'needs a TLS client certificate');
    const stranger = await leaf(ca.oem, 'SN-ATT-NEIGHBOUR');
    expectRefused(await registerWith('SN-ATT-RESET', stranger), 'does not name this serial number');
    const foreign = await leaf(ca.untrusted, 'SN-ATT-RESET');
    expectRefused(await registerWith('SN-ATT-RESET', foreign), 'does not chain');

    const again = await registerWith('SN-ATT-RESET', cert);
    expect(again.status, again.text).toBe(200);
    expect(again.body.data.device_id).toBe(deviceId);
    expect((await visibleToTenant(deviceId)).status).toBe(200);
  });
});

describe('a reset charger and another operator’s group', () => {
  it('another operator’s group cannot take over a reset charger in this operator’s site, its id or its history', async () => {
    const cert = await leaf(ca.oem, 'SN-ATT-MOVED');
    const first = await registerWith('SN-ATT-MOVED', cert);
    expect(first.status, first.text).toBe(200);
    const deviceId = first.body.data.device_id as string;
    expect(await tp.store.resetDevice(deviceId)).toBe(true);
    // The other operator enrols a CA of its own (the OEM issues one per customer) and a certificate for the serial.
    const theirs = await makeCa(setup.pkiDir, 'other-operator-ca');
    const created = await tp.store.createEnrolment({
      operator_id: other.operatorId,
      site_id: other.siteId,
      name: 'their chargers',
      ca_pem: theirs.cert,
      ca_fingerprint: new X509Certificate(theirs.cert).fingerprint256,
    });
    expect(created).not.toBe('duplicate_ca');
    const claim = await registerWith('SN-ATT-MOVED', await leaf(theirs, 'SN-ATT-MOVED'));
    expectRefused(claim, "another operator's site");
    expect((await tp.store.getDevice(deviceId))?.site_id).toBe(tenant.siteId);
    // Its own operator's group still enrols it again, under its id.
    const again = await registerWith('SN-ATT-MOVED', cert);
    expect(again.status, again.text).toBe(200);
    expect(again.body.data.device_id).toBe(deviceId);
  });
});

describe('TLS session resumption', () => {
  it('is not offered: every new connection presents the whole chain again (a resumed one would carry the leaf alone)', async () => {
    const cert = await leaf(ca.intermediate, 'SN-ATT-RESUMED');
    const agent = new https.Agent({
      keepAlive: false,
      ca: tp.ca,
      cert: cert.cert + ca.intermediate.cert,
      key: cert.key,
    });
    try {
      const first = await httpsPost(agent, '/healthz', undefined);
      expect(first.reused).toBe(false);
      const body = { sn: 'SN-ATT-RESUMED', model: 'AC22', manufacturer: 'Acme', firmware_version: '1.0.0' };
      const second = await httpsPost(agent, '/v1/device/register', body);
      // A second connection (the agent keeps no other): a full handshake, with the intermediate.
      expect(second.reused).toBe(false);
      expect(second.status, second.text).toBe(200);
    } finally {
      agent.destroy();
    }
  });
});

function httpsPost(
  agent: https.Agent,
  path: string,
  json: unknown,
): Promise<{ status: number; text: string; reused: boolean }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      `${tp.url}${path}`,
      { agent, method: json === undefined ? 'GET' : 'POST', headers: { 'content-type': 'application/json' } },
      (res) => {
        const reused = (res.socket as TLSSocket).isSessionReused();
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, reused }));
      },
    );
    req.on('error', reject);
    req.end(json === undefined ? undefined : JSON.stringify(json));
  });
}
