import { X509Certificate } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyAttestation } from '../../../platform/domain/attestation.js';
import { chargerCertificate, checkEnrolmentCa } from '../../../simulators/fleet/charger-certificates.js';
import { issue, makeCa, type Pem } from '../../helpers/certificates.js';

/** The fleet's charger certificates (DESIGN.md §18), signed with an `openssl`-made CA, as the platform judges them. */
let dir: string;
let oem: Pem;
let other: Pem;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sim-certs-'));
  oem = await makeCa(dir, 'oem-ca');
  other = await makeCa(dir, 'other-ca');
}, 30_000);
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('charger certificates', () => {
  it('name the serial (CN and SAN URI), are no CA, pair with their key and chain to the CA', async () => {
    const { keyType } = checkEnrolmentCa(oem);
    const made = await chargerCertificate('SIM-7-0001', oem, keyType);
    const cert = new X509Certificate(made.cert);
    expect(cert.subject).toBe('CN=SIM-7-0001');
    expect(cert.subjectAltName).toBe('URI:urn:charger:sn:SIM-7-0001');
    expect(cert.ca).toBe(false);
    expect(cert.checkIssued(new X509Certificate(oem.cert))).toBe(true);
    const groups = [{ enrolment_id: 'g1', ca_pem: oem.cert }];
    expect(verifyAttestation({ sn: 'SIM-7-0001', chain: [cert], groups, nowMs: Date.now() })).toMatchObject({
      ok: true,
    });
    expect(
      verifyAttestation({
        sn: 'SIM-7-0001',
        chain: [cert],
        groups: [{ enrolment_id: 'g2', ca_pem: other.cert }],
        nowMs: Date.now(),
      }),
    ).toEqual({ ok: false, refusal: 'untrusted' });
  });

  it('refuse a CA that is none, or a key of another certificate, before any charger starts', async () => {
    const leaf = await issue(dir, oem, { cn: 'SN-1' });
    expect(() => checkEnrolmentCa({ cert: leaf.cert, key: leaf.key })).toThrow(/not a CA/);
    expect(() => checkEnrolmentCa({ cert: oem.cert, key: other.key })).toThrow(
      /not the key of its certificate/,
    );
    expect(() => checkEnrolmentCa({ cert: 'nope', key: oem.key })).toThrow(/not a PEM certificate/);
    expect(() => checkEnrolmentCa({ cert: oem.cert, key: 'nope' })).toThrow(/not a PEM private key/);
  });
});
