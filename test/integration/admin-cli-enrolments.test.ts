import { spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issue, makeCa, type Pem } from '../helpers/certificates.js';
import { runCli, runCliJson, type ServeProcess, spawnServe, tempDirs } from '../helpers/cli.js';

/**
 * `charger-platform enrolments add|list|revoke` (DESIGN.md §18), run as the built program on a temporary data
 * directory, with CA files made by the real `openssl`.
 */
const dirs = tempDirs('cp-admin-enrol-');
let dir: string;
let pki: string;
const cli = (...args: string[]) => runCli([...args, '--data-dir', dir]);
const cliJson = (...args: string[]) => runCliJson([...args, '--data-dir', dir, '--json']);

let opA: string;
let opB: string;
let siteA: string;
let siteB: string;
let oem: Pem;
let other: Pem;
let groupA: string;
let groupB: string;

beforeAll(async () => {
  dir = await dirs.make();
  pki = await dirs.make();
  oem = await makeCa(pki, 'oem-ca');
  other = await makeCa(pki, 'other-ca');
  opA = (await cliJson('operators', 'create', '--name', 'Acme')).operator_id;
  opB = (await cliJson('operators', 'create', '--name', 'Beta')).operator_id;
  siteA = (await cliJson('sites', 'create', '--operator', opA, '--name', 'Depot A')).site_id;
  siteB = (await cliJson('sites', 'create', '--operator', opB, '--name', 'Depot B')).site_id;
}, 60_000);
afterAll(async () => {
  await dirs.removeAll();
});

describe('enrolments', () => {
  it('list --json is an empty array at first, and the human list says there is none', async () => {
    expect(await cliJson('enrolments', 'list')).toEqual([]);
    const res = await cli('enrolments', 'list');
    expect(res.stdout).toBe('(no enrolment groups)\n');
  });

  it('add --json prints exactly {enrolment_id, operator_id, site_id, name, ca_fingerprint}', async () => {
    const a = await cliJson(
      'enrolments',
      'add',
      '--operator',
      opA,
      '--ca',
      oem.certPath,
      '--site',
      siteA,
      '--name',
      'Acme depot chargers',
    );
    expect(a).toEqual({
      enrolment_id: expect.stringMatching(/^enr_[0-9a-f]{20}$/),
      operator_id: opA,
      site_id: siteA,
      name: 'Acme depot chargers',
      ca_fingerprint: new X509Certificate(oem.cert).fingerprint256,
    });
    expect(Object.keys(a)).toEqual(['enrolment_id', 'operator_id', 'site_id', 'name', 'ca_fingerprint']);
    groupA = a.enrolment_id;
    // Without --site and --name: no site, the CA's common name.
    const b = await cliJson('enrolments', 'add', '--operator', opB, '--ca', other.certPath);
    expect(b).toMatchObject({ operator_id: opB, site_id: null, name: 'other-ca' });
    groupB = b.enrolment_id;
  });

  it('list --json lists the groups oldest first, without their PEM; the human list is a table', async () => {
    const list = await cliJson('enrolments', 'list');
    expect(list.map((g: { enrolment_id: string }) => g.enrolment_id)).toEqual([groupA, groupB]);
    expect(list[0]).toEqual({
      enrolment_id: groupA,
      operator_id: opA,
      site_id: siteA,
      name: 'Acme depot chargers',
      ca_fingerprint: new X509Certificate(oem.cert).fingerprint256,
      status: 'active',
    });
    expect(JSON.stringify(list)).not.toContain('BEGIN CERTIFICATE');
    const res = await cli('enrolments', 'list');
    const lines = res.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^ENROLMENT\tSTATUS\tOPERATOR\tSITE/);
    expect(lines[1]).toBe(
      [
        groupA,
        'active',
        opA,
        siteA,
        'Acme depot chargers',
        new X509Certificate(oem.cert).fingerprint256,
      ].join('\t'),
    );
    expect(lines[2]).toContain(`${groupB}\tactive\t${opB}\t-\tother-ca`);
  });

  it.each([
    [
      'a file that is not a certificate',
      async () => writeText('key.pem', oem.key),
      'is not a PEM certificate',
    ],
    [
      'a certificate that is not a CA',
      async () => (await issue(pki, oem, { cn: 'SN-1' })).certPath,
      'is not a CA certificate (basicConstraints CA:TRUE)',
    ],
    [
      'a self-signed certificate with CA:FALSE',
      async () => (await makeCa(pki, 'flat', { ca: false })).certPath,
      'is not a CA certificate',
    ],
    ['a file that does not exist', async () => join(pki, 'missing.pem'), 'cannot read --ca'],
  ])('add refuses %s and creates nothing', async (_what, file, message) => {
    const res = await cli('enrolments', 'add', '--operator', opA, '--ca', await file(), '--json');
    expect(res.code).toBe(1);
    expect(res.stdout).toBe('');
    expect(res.stderr).toContain(message);
    expect(await cliJson('enrolments', 'list')).toHaveLength(2);
  });

  it('add refuses an unknown operator, a site of another operator, an unknown site, a CA already enrolled', async () => {
    const third = await makeCa(pki, 'third-ca');
    const cases: Array<[string[], string]> = [
      [['--operator', 'op_missing', '--ca', third.certPath], 'no operator op_missing'],
      [
        ['--operator', opA, '--ca', third.certPath, '--site', siteB],
        `site ${siteB} belongs to another operator`,
      ],
      [['--operator', opA, '--ca', third.certPath, '--site', 'site_missing'], 'no site site_missing'],
      [['--operator', opB, '--ca', oem.certPath], 'an active enrolment group already has this CA'],
    ];
    for (const [args, message] of cases) {
      const res = await cli('enrolments', 'add', ...args, '--json');
      expect(res.code, args.join(' ')).toBe(1);
      expect(res.stdout).toBe('');
      expect(res.stderr).toContain(message);
    }
    expect(await cliJson('enrolments', 'list')).toHaveLength(2);
  });

  it('revoke marks the group revoked; an unknown group is refused', async () => {
    const res = await cli('enrolments', 'revoke', '--enrolment', groupB);
    expect(res.code).toBe(0);
    expect(res.stdout).toContain(`enrolment group ${groupB} revoked`);
    const list = await cliJson('enrolments', 'list');
    expect(list.map((g: { status: string }) => g.status)).toEqual(['active', 'revoked']);
    const missing = await cli('enrolments', 'revoke', '--enrolment', 'enr_missing');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no enrolment group enr_missing');
    // Its CA may be enrolled again once revoked.
    const again = await cliJson('enrolments', 'add', '--operator', opB, '--ca', other.certPath);
    expect(again.enrolment_id).not.toBe(groupB);
  });
});

async function writeText(name: string, text: string): Promise<string> {
  const path = join(pki, name);
  await writeFile(path, text);
  return path;
}

/** `openssl s_client` over TLS 1.2: whether the server's handshake asked for a client certificate. */
async function asksForClientCertificate(port: number): Promise<boolean> {
  const out = await new Promise<string>((resolve, reject) => {
    const child = spawn(
      'openssl',
      ['s_client', '-tls1_2', '-connect', `127.0.0.1:${port}`, '-servername', 'localhost'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let text = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      text += chunk;
    });
    child.on('error', reject);
    child.on('close', () => resolve(text));
  });
  expect(out).toContain('Verify return code');
  // Printed only from a CertificateRequest.
  return out.includes('Client Certificate Types:');
}

describe('serve --registration attested, with enrolments changed while it runs', () => {
  let serve: ServeProcess | undefined;
  afterAll(async () => {
    await serve?.stop();
  });

  it('asks for a client certificate only in attested mode', async () => {
    const plain = await spawnServe(['--data-dir', await dirs.make(), '--self-signed']);
    try {
      expect(await asksForClientCertificate(plain.port)).toBe(false);
    } finally {
      await plain.stop();
    }
    serve = await spawnServe(['--data-dir', dir, '--self-signed', '--registration', 'attested']);
    expect(await asksForClientCertificate(serve.port)).toBe(true);
  });

  it('registers a charger of an enrolled CA into the group’s site; once revoked, the CA registers none', async () => {
    if (!serve) throw new Error('serve did not start');
    const platformCa = await readFile(serve.certPath, 'utf8');
    const register = async (sn: string, identity: Pem) => {
      const dispatcher = new Agent({ connect: { ca: platformCa, cert: identity.cert, key: identity.key } });
      try {
        const res = await request(`${serve!.url}/v1/device/register`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ sn, model: 'AC22', manufacturer: 'Acme', firmware_version: '1.0.0' }),
          dispatcher,
        });
        return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
      } finally {
        await dispatcher.close();
      }
    };
    const first = await register('SN-SERVE-1', await issue(pki, oem, { cn: 'SN-SERVE-1' }));
    expect(first.status, JSON.stringify(first.body)).toBe(200);

    expect((await cli('enrolments', 'revoke', '--enrolment', groupA)).code).toBe(0);
    const second = await register('SN-SERVE-2', await issue(pki, oem, { cn: 'SN-SERVE-2' }));
    expect(second.status).toBe(403);
    expect(second.body).toMatchObject({ code: 2003 });
  });
});
