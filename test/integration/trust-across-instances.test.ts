import { X509Certificate } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisLink, type RedisLink } from '../../platform/coordination/redis-link.js';
import { issue, makeCa, type Pem } from '../helpers/certificates.js';
import { pollUntil, runCli, runCliJson } from '../helpers/cli.js';
import {
  createTenant,
  expectError,
  type HttpResult,
  operatorToken,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';
import { startRedisServer, type TestRedis } from '../helpers/redis.js';
import { createClientOf } from '../helpers/sealed-writes.js';

/**
 * DESIGN.md §18 across three instances over one PostgreSQL database and one Redis (§13): an enrolment group added
 * and revoked with the admin CLI is honoured by every instance (a charger enrols through any of them, and the
 * revocation holds on all within 5 s), and a flexibility control sent through one instance is another tenant's
 * 404 on every other. PostgreSQL only (`npm run test:postgres`).
 */

const quiet = { warn: () => undefined, info: () => undefined };
let redis: TestRedis;
let dataDir: string;
let pkiDir: string;
const links: RedisLink[] = [];
let instances: TestPlatform[] = [];
let op1: Awaited<ReturnType<typeof createTenant>>;
let op2: Awaited<ReturnType<typeof createTenant>>;
let ca: Pem;

async function instance(name: string): Promise<TestPlatform> {
  const link = createRedisLink(redis.url, name, quiet);
  links.push(link);
  const end = Date.now() + 10_000;
  while (!link.available() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  return startTestPlatform({ dataDir, redis: link, instanceId: name, registration: 'attested' });
}

/** `POST /v1/device/register` through `p`, presenting a charger certificate for `sn` signed by `issuer`. */
async function enrol(p: TestPlatform, sn: string, issuer: Pem): Promise<HttpResult> {
  const identity = await issue(pkiDir, issuer, { cn: sn });
  const dispatcher = new Agent({ connect: { ca: p.ca, cert: identity.cert, key: identity.key } });
  try {
    const res = await request(`${p.url}/v1/device/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ sn, model: 'AC22', manufacturer: 'Acme', firmware_version: '1.0.0' }),
      dispatcher,
    });
    const text = await res.body.text();
    return { status: res.statusCode, headers: res.headers, body: JSON.parse(text), text };
  } finally {
    await dispatcher.close();
  }
}

beforeAll(async () => {
  redis = await startRedisServer();
  dataDir = await mkdtemp(join(tmpdir(), 'cp-trust-instances-'));
  pkiDir = await mkdtemp(join(tmpdir(), 'cp-trust-pki-'));
  instances = [await instance('inst-a'), await instance('inst-b'), await instance('inst-c')];
  op1 = await createTenant(instances[0]!, 'Trust One');
  op2 = await createTenant(instances[0]!, 'Trust Two');
  ca = await makeCa(pkiDir, 'instances-oem-ca');
}, 60_000);

afterAll(async () => {
  for (const p of instances) await p.stop();
  for (const link of links) await link.close();
  await redis?.stop();
  await rm(dataDir, { recursive: true, force: true });
  await rm(pkiDir, { recursive: true, force: true });
});

describe('attested registration across three instances', () => {
  it('a group added with the CLI lets chargers enrol through any instance; revoked, no instance takes one within 5 s', async () => {
    const group = await runCliJson([
      'enrolments',
      'add',
      '--data-dir',
      dataDir,
      '--operator',
      op1.operatorId,
      '--ca',
      ca.certPath,
      '--site',
      op1.siteId,
      '--json',
    ]);
    for (const [i, p] of instances.entries()) {
      const res = await enrol(p, `SN-TRUST-${i}-${process.pid}`, ca);
      expect(res.status, `instance ${i}: ${res.text}`).toBe(200);
      // Zero-touch: in the group's site at once, for the operator's client on another instance.
      const other = instances[(i + 1) % instances.length]!;
      const seen = await other.http.get(`/v1/operator/devices/${res.body.data.device_id}`, {
        token: op1.token,
      });
      expect(seen.status, seen.text).toBe(200);
      expect(seen.body.data.site_id).toBe(op1.siteId);
    }

    const revoked = await runCli([
      'enrolments',
      'revoke',
      '--data-dir',
      dataDir,
      '--enrolment',
      group.enrolment_id,
    ]);
    expect(revoked.code, revoked.stderr).toBe(0);
    const start = Date.now();
    for (const [i, p] of instances.entries()) {
      const left = Math.max(0, 5_000 - (Date.now() - start));
      let n = 0;
      const res = await pollUntil(
        () => enrol(p, `SN-TRUST-LATE-${i}-${n++}-${process.pid}`, ca),
        (r) => r.status === 403,
        left,
        100,
      );
      expectError(res, 403, 2003);
    }
  });
});

describe('flexibility controls across three instances', () => {
  it('an aggregator’s control on op1’s site, sent through one instance, is a 404 for op2’s client on every other', async () => {
    const a = instances[0]!;
    // A charger of op1's site, enrolled (the instances run attested) through a group of its own.
    const controlCa = await makeCa(pkiDir, 'control-oem-ca');
    await a.store.createEnrolment({
      operator_id: op1.operatorId,
      site_id: op1.siteId,
      name: 'control chargers',
      ca_pem: controlCa.cert,
      ca_fingerprint: new X509Certificate(controlCa.cert).fingerprint256,
    });
    const charger = await enrol(a, `SN-TRUST-CTL-${process.pid}`, controlCa);
    expect(charger.status, charger.text).toBe(200);
    const { client, secret } = await createClientOf(a, {
      operator_ids: [op1.operatorId, op2.operatorId],
      scopes: ['read', 'write'],
    });
    const aggregator = await operatorToken(a.http, client.client_id, secret);
    const sent = await a.http.post('/v1/operator/control/flexibility', {
      token: aggregator,
      json: {
        target_type: 'site',
        target_ids: [op1.siteId],
        command: 'set_power_limit',
        params: { power_limit_percent: 30, duration: 600 },
      },
    });
    expect(sent.status, sent.text).toBe(200);
    const controlId: string = sent.body.data.control_id;
    for (const p of instances.slice(1)) {
      expectError(await p.http.get(`/v1/operator/control/${controlId}`, { token: op2.token }), 404, 3001);
      expectError(await p.http.delete(`/v1/operator/control/${controlId}`, { token: op2.token }), 404, 3001);
      const own = await p.http.get(`/v1/operator/control/${controlId}`, { token: op1.token });
      expect(own.status, own.text).toBe(200);
      expect(own.body.data.status).toBe('executing');
    }
  });
});
