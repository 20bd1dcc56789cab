import { X509Certificate } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AttestationRefusal,
  checkEnrolmentCa,
  namesSerial,
  sanUris,
  verifyAttestation,
} from '../../../platform/domain/attestation.js';
import { issue, makeCa, opensslTime, type Pem } from '../../helpers/certificates.js';

/** The attestation rule over certificates made by the real `openssl` (DESIGN.md §18). */
const DAY = 86_400_000;

let dir: string;
const pki = {} as Record<
  | 'oem'
  | 'other'
  | 'notCa'
  | 'intermediate'
  | 'cn'
  | 'san'
  | 'viaIntermediate'
  | 'expired'
  | 'future'
  | 'caLeaf'
  | 'forged'
  | 'plainLeaf'
  | 'byNotCa'
  | 'expiredIntermediate'
  | 'viaExpiredIntermediate'
  | 'quoted',
  Pem
>;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'attest-unit-'));
  pki.oem = await makeCa(dir, 'oem-ca');
  pki.other = await makeCa(dir, 'other-ca');
  pki.notCa = await makeCa(dir, 'not-a-ca', { ca: false });
  pki.intermediate = await issue(dir, pki.oem, { cn: 'OEM Factory 7', ca: true });
  pki.cn = await issue(dir, pki.oem, { cn: 'SN-CN-1' });
  pki.san = await issue(dir, pki.oem, { cn: 'charger', uris: ['urn:charger:sn:SN-SAN-1'] });
  pki.viaIntermediate = await issue(dir, pki.intermediate, { cn: 'SN-INT-1' });
  const now = Date.now();
  pki.expired = await issue(dir, pki.oem, {
    cn: 'SN-OLD-1',
    startDate: opensslTime(now - 30 * DAY),
    endDate: opensslTime(now - DAY),
  });
  pki.future = await issue(dir, pki.oem, {
    cn: 'SN-NEW-1',
    startDate: opensslTime(now + DAY),
    endDate: opensslTime(now + 30 * DAY),
  });
  pki.caLeaf = await issue(dir, pki.oem, { cn: 'SN-CA-1', ca: true });
  // A genuine charger certificate (CA:FALSE) used to sign another serial's: must not count as an issuer.
  // Without keyUsage, so that only its CA flag keeps OpenSSL's own issuer check from accepting it.
  pki.plainLeaf = await issue(dir, pki.oem, { cn: 'SN-PLAIN-1', keyUsage: false });
  pki.forged = await issue(dir, pki.plainLeaf, { cn: 'SN-FORGED-1' });
  pki.byNotCa = await issue(dir, pki.notCa, { cn: 'SN-NOTCA-1' });
  pki.expiredIntermediate = await issue(dir, pki.oem, {
    cn: 'Old factory',
    ca: true,
    startDate: opensslTime(now - 30 * DAY),
    endDate: opensslTime(now - DAY),
  });
  pki.viaExpiredIntermediate = await issue(dir, pki.expiredIntermediate, { cn: 'SN-INT-OLD' });
  pki.quoted = await issue(dir, pki.oem, { cn: 'x', uris: ['urn:charger:sn:A,B', 'urn:charger:sn:SN-Q'] });
}, 60_000);

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const x509 = (p: Pem) => new X509Certificate(p.cert);
const group = (id: string, ca: Pem) => ({ enrolment_id: id, ca_pem: ca.cert });

describe('verifyAttestation', () => {
  type Case = [
    string,
    string,
    () => Pem[],
    () => Array<{ enrolment_id: string; ca_pem: string }>,
    string | AttestationRefusal,
  ];
  // what, serial, chain (leaf first), active groups, the group that vouches or the refusal
  const cases: Case[] = [
    ['CN names the serial', 'SN-CN-1', () => [pki.cn], () => [group('g1', pki.oem)], 'g1'],
    ['SAN URI names the serial', 'SN-SAN-1', () => [pki.san], () => [group('g1', pki.oem)], 'g1'],
    ['a CN that is not the serial', 'charger', () => [pki.san], () => [group('g1', pki.oem)], 'g1'],
    [
      'through an intermediate the charger sent',
      'SN-INT-1',
      () => [pki.viaIntermediate, pki.intermediate],
      () => [group('g1', pki.oem)],
      'g1',
    ],
    [
      'the group nearest the leaf',
      'SN-INT-1',
      () => [pki.viaIntermediate, pki.intermediate],
      () => [group('g-root', pki.oem), group('g-factory', pki.intermediate)],
      'g-factory',
    ],
    [
      'the group that holds the CA, among others',
      'SN-CN-1',
      () => [pki.cn],
      () => [group('g0', pki.other), group('g1', pki.oem)],
      'g1',
    ],
    ['no certificate', 'SN-CN-1', () => [], () => [group('g1', pki.oem)], 'no_certificate'],
    ['another serial', 'SN-OTHER', () => [pki.cn], () => [group('g1', pki.oem)], 'serial_not_named'],
    [
      'a serial only a prefix of the SAN',
      'SN-SAN',
      () => [pki.san],
      () => [group('g1', pki.oem)],
      'serial_not_named',
    ],
    ['expired', 'SN-OLD-1', () => [pki.expired], () => [group('g1', pki.oem)], 'not_valid_now'],
    ['not yet valid', 'SN-NEW-1', () => [pki.future], () => [group('g1', pki.oem)], 'not_valid_now'],
    ['a CA as the leaf', 'SN-CA-1', () => [pki.caLeaf], () => [group('g1', pki.oem)], 'leaf_is_ca'],
    ['an untrusted CA', 'SN-CN-1', () => [pki.cn], () => [group('g0', pki.other)], 'untrusted'],
    ['no active group', 'SN-CN-1', () => [pki.cn], () => [], 'untrusted'],
    [
      'signed by a charger certificate (CA:FALSE)',
      'SN-FORGED-1',
      () => [pki.forged, pki.plainLeaf],
      () => [group('g1', pki.oem)],
      'untrusted',
    ],
    [
      'a group whose "CA" is CA:FALSE',
      'SN-NOTCA-1',
      () => [pki.byNotCa],
      () => [group('g1', pki.notCa)],
      'untrusted',
    ],
    [
      'an intermediate the charger did not send',
      'SN-INT-1',
      () => [pki.viaIntermediate],
      () => [group('g1', pki.oem)],
      'untrusted',
    ],
    [
      'an expired intermediate',
      'SN-INT-OLD',
      () => [pki.viaExpiredIntermediate, pki.expiredIntermediate],
      () => [group('g1', pki.oem)],
      'untrusted',
    ],
    [
      'a group CA that is not PEM',
      'SN-CN-1',
      () => [pki.cn],
      () => [{ enrolment_id: 'g1', ca_pem: 'garbage' }],
      'untrusted',
    ],
  ];
  it.each(cases)('%s (%s)', (_what, sn, chain, groups, want) => {
    const out = verifyAttestation({ sn, chain: chain().map(x509), groups: groups(), nowMs: Date.now() });
    expect(out.ok ? out.group.enrolment_id : out.refusal).toBe(want);
  });

  it('follows the clock it is given: a good certificate is refused once past its end', () => {
    const chain = [x509(pki.cn)];
    const groups = [group('g1', pki.oem)];
    expect(verifyAttestation({ sn: 'SN-CN-1', chain, groups, nowMs: Date.now() }).ok).toBe(true);
    expect(verifyAttestation({ sn: 'SN-CN-1', chain, groups, nowMs: Date.now() + 31 * DAY })).toEqual({
      ok: false,
      refusal: 'not_valid_now',
    });
  });
});

describe('names of a charger certificate', () => {
  it('reads SAN URIs Node writes as JSON strings (a comma inside)', () => {
    const cert = x509(pki.quoted);
    expect(sanUris(cert)).toEqual(['urn:charger:sn:A,B', 'urn:charger:sn:SN-Q']);
    expect(namesSerial(cert, 'A,B')).toBe(true);
    expect(namesSerial(cert, 'SN-Q')).toBe(true);
    expect(namesSerial(cert, 'A')).toBe(false);
  });
});

describe('checkEnrolmentCa', () => {
  it('takes one CA certificate and answers its fingerprint and name', () => {
    const out = checkEnrolmentCa(pki.oem.cert);
    expect(out).toEqual({
      ok: true,
      pem: x509(pki.oem).toString(),
      fingerprint: x509(pki.oem).fingerprint256,
      commonName: 'oem-ca',
    });
    expect(out.ok && out.fingerprint).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
  });
  it.each([
    ['a key', () => pki.oem.key, 'is not a PEM certificate'],
    ['empty', () => '', 'is not a PEM certificate'],
    ['a CA:FALSE certificate', () => pki.notCa.cert, 'is not a CA certificate (basicConstraints CA:TRUE)'],
    ['a charger certificate', () => pki.cn.cert, 'is not a CA certificate (basicConstraints CA:TRUE)'],
    ['two certificates', () => pki.oem.cert + pki.other.cert, 'holds several certificates'],
    [
      'a damaged certificate',
      () => '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n',
      'is not a valid PEM certificate',
    ],
  ])('refuses %s', (_what, text, error) => {
    const out = checkEnrolmentCa(text());
    expect(out.ok).toBe(false);
    expect(out.ok ? '' : out.error).toContain(error);
  });
});
