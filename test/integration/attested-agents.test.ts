import { X509Certificate } from 'node:crypto';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runFleet } from '../../simulators/fleet/fleet-runner.js';
import type { FleetSummary } from '../../simulators/fleet/fleet-summary.js';
import { type AgentRunProcess, spawnAgentRun, tempDir, waitFor } from '../helpers/agent.js';
import {
  type AttestedCas,
  type AttestedPlatform,
  startAttestedPlatform,
} from '../helpers/attested-platform.js';
import { REPO_ROOT, runCli } from '../helpers/cli.js';
import { expectCleanStop } from '../helpers/fleet.js';
import type { TestPlatform } from '../helpers/platform.js';

/**
 * Attested registration (DESIGN.md §18) with real chargers: the built `charger-agent` with `--client-cert` and
 * `--client-key`, and the simulated fleet with an enrolment CA (in process and as the built `charger-sim`),
 * enrolling zero-touch into a group's site and coming online. Run `npm run build` first.
 */
let setup: AttestedPlatform;
let tp: TestPlatform;
let tenant: AttestedPlatform['tenant'];
let ca: AttestedCas;
let pkiDir: string;

beforeAll(async () => {
  setup = await startAttestedPlatform();
  ({ tp, tenant, ca, pkiDir } = setup);
}, 60_000);

afterAll(async () => {
  await setup?.stop();
});

const leaf: AttestedPlatform['leaf'] = (...args) => setup.leaf(...args);

/** The built `charger-sim` with `args` (a subcommand first). */
const sim = (args: string[]) =>
  runCli(args, { script: join(REPO_ROOT, 'dist', 'simulators', 'cli.js'), timeoutMs: 40_000 });

/**
 * Runs the built fleet of `count` chargers (serials SIM-<seed>-n) for a few seconds with an enrolment CA and checks
 * that every one registered without an error and sits in the tenant's site, as the operator's client lists it.
 */
async function expectFleetEnrolled(
  platformCaFile: string,
  caPaths: { cert: string; key: string },
  count: number,
  seed: number,
  extra: string[] = [],
): Promise<void> {
  const res = await sim([
    'fleet',
    '--platform-url',
    tp.url,
    '--ca',
    platformCaFile,
    '--enrolment-ca-cert',
    caPaths.cert,
    '--enrolment-ca-key',
    caPaths.key,
    '--count',
    String(count),
    '--seed',
    String(seed),
    '--duration',
    '4',
    '--ramp',
    '0.5',
    '--outage-share',
    '0',
    '--json',
    ...extra,
  ]);
  expect(res.code, res.stderr).toBe(0);
  expect(JSON.parse(res.stdout)).toMatchObject({ registered: count, errors: 0 });
  const inSite = await tp.http.get(`/v1/operator/devices?site_id=${tenant.siteId}&size=100`, {
    token: tenant.token,
  });
  const enrolled = inSite.body.data.items.filter((d: { sn: string }) => d.sn.startsWith(`SIM-${seed}-`));
  expect(enrolled).toHaveLength(count);
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

  it('makes each charger a certificate for its serial; all enrol zero-touch into the site, come online, and one reset registers again', async () => {
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
      const mine = (online ?? []).filter((d) => d.sn.startsWith(`SIM-${SEED}-`)) as Array<{
        sn: string;
        device_id: string;
      }>;
      expect(mine).toHaveLength(COUNT);

      // An operator resets one: its agent finds its credentials refused and registers again — with its
      // certificate, so under the same device id, still in the site.
      const reset = mine[0]!;
      const { secret_gen: genBefore } = (await tp.store.getDevice(reset.device_id))!;
      expect(await tp.store.resetDevice(reset.device_id)).toBe(true);
      await tp.platform.context.directory.refreshDevice(reset.device_id);
      const again = await waitFor(
        () => tp.store.getDevice(reset.device_id),
        (d) => d?.registered === true,
        20_000,
        200,
      );
      expect(again).toMatchObject({ registered: true, sn: reset.sn, site_id: tenant.siteId });
      expect(again!.secret_gen).toBeGreaterThan(genBefore + 1);
    } finally {
      summary = await fleet.stop();
    }
    expectCleanStop(summary, COUNT);
  });

  it('runs as the built command with the two flags, in worker threads too; refuses them apart or with a non-CA', async () => {
    const fleetSim = (args: string[]) =>
      sim(['fleet', '--platform-url', tp.url, '--ca', platformCaFile, ...args]);
    await expectFleetEnrolled(platformCaFile, { cert: ca.oem.certPath, key: ca.oem.keyPath }, 4, 4343, [
      '--workers',
      '2',
    ]);

    const alone = await fleetSim(['--enrolment-ca-cert', ca.oem.certPath, '--count', '1']);
    expect(alone.code).toBe(2);
    expect(alone.stderr).toContain('--enrolment-ca-cert and --enrolment-ca-key go together');
    const charger = await leaf(ca.oem, 'SN-NOT-A-CA');
    const notCa = await fleetSim([
      '--enrolment-ca-cert',
      charger.certPath,
      '--enrolment-ca-key',
      charger.keyPath,
      '--count',
      '1',
    ]);
    expect(notCa.code).toBe(2);
    expect(notCa.stderr).toContain('is not a CA');
    const wrongKey = await fleetSim([
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

describe('charger-sim enrolment-ca: a test CA the simulated fleet enrols with', () => {
  it('makes a CA the platform takes as a group’s, the built fleet enrols with it, and it never overwrites a file', async () => {
    const dir = join(pkiDir, 'sim-ca');
    mkdirSync(dir);
    const cert = join(dir, 'ca.pem');
    const key = join(dir, 'ca.key');
    const made = await sim(['enrolment-ca', '--cert', cert, '--key', key, '--name', 'Sim OEM test CA']);
    expect(made.code, made.stderr).toBe(0);
    expect(made.stderr).toContain('charger-platform enrolments add');
    expect(statSync(key).mode & 0o777).toBe(0o600);
    const x509 = new X509Certificate(readFileSync(cert));
    expect(x509.ca).toBe(true);
    expect(x509.subject).toContain('CN=Sim OEM test CA');
    // Never over an existing CA: both files stay as they were.
    const before = [readFileSync(cert, 'utf8'), readFileSync(key, 'utf8')];
    const again = await sim(['enrolment-ca', '--cert', cert, '--key', key]);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('EEXIST');
    expect([readFileSync(cert, 'utf8'), readFileSync(key, 'utf8')]).toEqual(before);

    const group = await tp.store.createEnrolment({
      operator_id: tenant.operatorId,
      site_id: tenant.siteId,
      name: 'simulated',
      ca_pem: readFileSync(cert, 'utf8'),
      ca_fingerprint: x509.fingerprint256,
    });
    expect(group).not.toBe('duplicate_ca');
    const platformCaFile = join(dir, 'platform-ca.pem');
    writeFileSync(platformCaFile, tp.ca);
    await expectFleetEnrolled(platformCaFile, { cert, key }, 2, 4545);
  }, 90_000);
});
