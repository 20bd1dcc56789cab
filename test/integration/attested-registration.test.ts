import { X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EnrolmentRow } from '../../platform/storage/store.js';
import { type FleetSummary, runFleet } from '../../simulators/fleet/fleet-runner.js';
import { type AgentRunProcess, spawnAgentRun, tempDir, waitFor } from '../helpers/agent.js';
import { type IssueOptions, issue, makeCa, opensslTime, type Pem } from '../helpers/certificates.js';
import { REPO_ROOT, runCli } from '../helpers/cli.js';
import { expectCleanStop } from '../helpers/fleet.js';
import { createTenant, type HttpResult, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * Attested registration (DESIGN.md §18) over real HTTPS on loopback: the platform asks every connection for a
 * client certificate, and `POST /v1/device/register` takes a serial only with a certificate that names it and
 * chains to an active enrolment group's CA. Certificates are made by the real `openssl`.
 */
const DAY = 86_400_000;

let tp: TestPlatform;
let pkiDir: string;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let other: Awaited<ReturnType<typeof createTenant>>;
let depot: EnrolmentRow;
let noSite: EnrolmentRow;
const ca = {} as Record<'oem' | 'oem2' | 'untrusted' | 'revoked' | 'flat' | 'intermediate', Pem>;

async function enrol(operatorId: string, siteId: string | null, pem: Pem, name: string) {
  const created = await tp.store.createEnrolment({
    operator_id: operatorId,
    site_id: siteId,
    name,
    ca_pem: pem.cert,
    ca_fingerprint: new X509Certificate(pem.cert).fingerprint256,
  });
  if (created === 'duplicate_ca') throw new Error('duplicate CA');
  return created;
}

beforeAll(async () => {
  pkiDir = await mkdtemp(join(tmpdir(), 'attest-int-'));
  tp = await startTestPlatform({ registration: 'attested' });
  tenant = await createTenant(tp, 'Depot operator');
  other = await createTenant(tp, 'Someone else');
  ca.oem = await makeCa(pkiDir, 'oem-ca');
  ca.oem2 = await makeCa(pkiDir, 'oem2-ca');
  ca.untrusted = await makeCa(pkiDir, 'untrusted-ca');
  ca.revoked = await makeCa(pkiDir, 'revoked-ca');
  // A self-signed certificate with CA:FALSE that somebody enrolled anyway (the CLI refuses it; storage may not).
  ca.flat = await makeCa(pkiDir, 'flat-ca', { ca: false });
  ca.intermediate = await issue(pkiDir, ca.oem, { cn: 'OEM factory 3', ca: true });
  depot = await enrol(tenant.operatorId, tenant.siteId, ca.oem, 'depot chargers');
  noSite = await enrol(tenant.operatorId, null, ca.oem2, 'loose chargers');
  const revoked = await enrol(tenant.operatorId, tenant.siteId, ca.revoked, 'recalled batch');
  await tp.store.revokeEnrolment(revoked.enrolment_id);
  await enrol(tenant.operatorId, tenant.siteId, ca.flat, 'flat');
}, 60_000);

afterAll(async () => {
  await tp?.stop();
  await rm(pkiDir, { recursive: true, force: true });
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

const leaf = (issuer: Pem, cn: string, extra: Omit<IssueOptions, 'cn'> = {}) =>
  issue(pkiDir, issuer, { cn, ...extra });

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

describe('real agents (the built charger-agent, as processes)', () => {
  const agents: AgentRunProcess[] = [];
  let tmp: ReturnType<typeof tempDir>;
  let platformCa: string;
  beforeAll(() => {
    tmp = tempDir('attest-agents-');
    platformCa = join(tmp.dir, 'platform-ca.pem');
    writeFileSync(platformCa, tp.ca);
  });
  afterAll(async () => {
    for (const a of agents) a.child.kill('SIGKILL');
    await Promise.all(agents.map((a) => a.exited));
    tmp?.remove();
  });

  function startAgent(sn: string, extra: string[]): AgentRunProcess {
    const agent = spawnAgentRun([
      '--data-dir',
      join(tmp.dir, sn),
      '--platform-url',
      tp.url,
      '--ca',
      platformCa,
      '--sn',
      sn,
      '--connectors',
      '1',
      ...extra,
    ]);
    agents.push(agent);
    return agent;
  }

  it('enrol zero-touch into the group’s site and come online for its operator', async () => {
    const fleet = [
      { sn: 'SN-AGENT-1', cert: await leaf(ca.oem, 'SN-AGENT-1') },
      { sn: 'SN-AGENT-2', cert: await leaf(ca.oem, 'agent', { uris: ['urn:charger:sn:SN-AGENT-2'] }) },
      { sn: 'SN-AGENT-3', cert: await leaf(ca.intermediate, 'SN-AGENT-3'), chain: ca.intermediate.cert },
    ];
    for (const { sn, cert, chain } of fleet) {
      const certFile = join(tmp.dir, `${sn}.pem`);
      writeFileSync(certFile, cert.cert + (chain ?? ''));
      startAgent(sn, ['--client-cert', certFile, '--client-key', cert.keyPath]);
    }
    const online = await waitFor(
      async () =>
        (
          await tp.http.get(`/v1/operator/devices?site_id=${tenant.siteId}&status=online&size=100`, {
            token: tenant.token,
          })
        ).body?.data?.items as Array<{ sn: string }> | undefined,
      (items) => fleet.every(({ sn }) => items?.some((d) => d.sn === sn)),
      20_000,
      200,
    );
    expect(online?.map((d) => d.sn)).toEqual(expect.arrayContaining(fleet.map((f) => f.sn)));
    for (const a of agents) expect(a.child.exitCode, a.stderr()).toBeNull();
  });

  it('without a certificate: exit 3, telling the technician what the platform wants', async () => {
    const agent = startAgent('SN-AGENT-BARE', []);
    expect((await agent.exited).code).toBe(3);
    const fatal = agent.lines().find((l) => l.level === 60);
    expect(fatal?.msg).toMatch(/needs a TLS client certificate/);
    expect(fatal?.hint).toMatch(/--client-cert FILE --client-key FILE/);
  });

  it('a missing certificate file, or a key of another certificate: exit 2 at start', async () => {
    const cert = await leaf(ca.oem, 'SN-AGENT-X');
    const otherCert = await leaf(ca.oem, 'SN-AGENT-Y');
    const missing = startAgent('SN-AGENT-X', [
      '--client-cert',
      join(tmp.dir, 'nope.pem'),
      '--client-key',
      cert.keyPath,
    ]);
    expect((await missing.exited).code).toBe(2);
    expect(missing.stderr()).toContain(`cannot read --client-cert ${join(tmp.dir, 'nope.pem')}: ENOENT`);
    const mismatched = startAgent('SN-AGENT-X', [
      '--client-cert',
      cert.certPath,
      '--client-key',
      otherCert.keyPath,
    ]);
    expect((await mismatched.exited).code).toBe(2);
    expect(mismatched.stderr()).toContain('are not a PEM certificate and its key');
    const alone = startAgent('SN-AGENT-X', ['--client-cert', cert.certPath]);
    expect((await alone.exited).code).toBe(2);
    expect(alone.stderr()).toContain('--client-cert and --client-key go together');
  });
});

describe('the simulated fleet with an enrolment CA (charger-sim fleet --enrolment-ca-cert/--enrolment-ca-key)', () => {
  let platformCaFile: string;
  beforeAll(async () => {
    platformCaFile = join(pkiDir, 'platform-ca.pem');
    await writeFile(platformCaFile, tp.ca);
  });

  it('makes each charger a certificate for its serial; all enrol zero-touch into the site and come online', async () => {
    const COUNT = 6;
    const SEED = 4242;
    const fleet = await runFleet({
      platformUrl: tp.url,
      ca: tp.ca,
      enrolmentCa: { cert: ca.oem.cert, key: ca.oem.key },
      count: COUNT,
      seed: SEED,
      rampMs: 500,
      outageShare: 0,
      heartbeatIntervalMs: 2_000,
      tuning: { pollWaitSeconds: 2 },
    });
    let summary: FleetSummary | undefined;
    try {
      const online = await waitFor(
        async () =>
          (
            await tp.http.get(`/v1/operator/devices?site_id=${tenant.siteId}&status=online&size=100`, {
              token: tenant.token,
            })
          ).body?.data?.items as Array<{ sn: string }> | undefined,
        (items) => (items?.filter((d) => d.sn.startsWith(`SIM-${SEED}-`)).length ?? 0) === COUNT,
        30_000,
        200,
      );
      expect(online?.filter((d) => d.sn.startsWith(`SIM-${SEED}-`))).toHaveLength(COUNT);
    } finally {
      summary = await fleet.stop();
    }
    expectCleanStop(summary, COUNT);
  });

  it('runs as the built command with the two flags, in worker threads too; refuses them apart or with a non-CA', async () => {
    const sim = (args: string[]) =>
      runCli(['fleet', '--platform-url', tp.url, '--ca', platformCaFile, ...args], {
        script: join(REPO_ROOT, 'dist', 'simulators', 'cli.js'),
        timeoutMs: 40_000,
      });
    const res = await sim([
      '--enrolment-ca-cert',
      ca.oem.certPath,
      '--enrolment-ca-key',
      ca.oem.keyPath,
      '--count',
      '4',
      '--workers',
      '2',
      '--seed',
      '4343',
      '--duration',
      '4',
      '--ramp',
      '0.5',
      '--outage-share',
      '0',
      '--json',
    ]);
    expect(res.code, res.stderr).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({ registered: 4, errors: 0 });
    const inSite = await tp.http.get(`/v1/operator/devices?site_id=${tenant.siteId}&size=100`, {
      token: tenant.token,
    });
    expect(inSite.body.data.items.filter((d: { sn: string }) => d.sn.startsWith('SIM-4343-'))).toHaveLength(
      4,
    );

    const alone = await sim(['--enrolment-ca-cert', ca.oem.certPath, '--count', '1']);
    expect(alone.code).toBe(2);
    expect(alone.stderr).toContain('--enrolment-ca-cert and --enrolment-ca-key go together');
    const charger = await leaf(ca.oem, 'SN-NOT-A-CA');
    const notCa = await sim([
      '--enrolment-ca-cert',
      charger.certPath,
      '--enrolment-ca-key',
      charger.keyPath,
      '--count',
      '1',
    ]);
    expect(notCa.code).toBe(2);
    expect(notCa.stderr).toContain('is not a CA');
    const wrongKey = await sim([
      '--enrolment-ca-cert',
      ca.oem.certPath,
      '--enrolment-ca-key',
      ca.oem2.keyPath,
      '--count',
      '1',
    ]);
    expect(wrongKey.code).toBe(2);
    expect(wrongKey.stderr).toContain('not the key of its certificate');
  }, 90_000);
});
