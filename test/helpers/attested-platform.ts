import { X509Certificate } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EnrolmentRow } from '../../platform/storage/store.js';
import { type IssueOptions, issue, makeCa, type Pem } from './certificates.js';
import { createTenant, startTestPlatform, type TestPlatform } from './platform.js';

/**
 * A platform in `--registration attested` mode (DESIGN.md §18) with a small PKI made by the real `openssl` and
 * the enrolment groups the attested tests share: `depot` (CA `oem`, the tenant's site), `noSite` (CA `oem2`), a
 * revoked group (CA `revoked`) and one whose "CA" is CA:FALSE (`flat`, which the CLI would refuse). `untrusted`
 * is enrolled nowhere; `intermediate` is issued by `oem`.
 */
export type AttestedCas = Record<'oem' | 'oem2' | 'untrusted' | 'revoked' | 'flat' | 'intermediate', Pem>;

export interface AttestedPlatform {
  tp: TestPlatform;
  pkiDir: string;
  tenant: Awaited<ReturnType<typeof createTenant>>;
  other: Awaited<ReturnType<typeof createTenant>>;
  ca: AttestedCas;
  depot: EnrolmentRow;
  noSite: EnrolmentRow;
  /** A charger certificate (CA:FALSE unless asked) signed by `issuer`. */
  leaf(issuer: Pem, cn: string, extra?: Omit<IssueOptions, 'cn'>): Promise<Pem>;
  stop(): Promise<void>;
}

export async function startAttestedPlatform(): Promise<AttestedPlatform> {
  const pkiDir = await mkdtemp(join(tmpdir(), 'attest-int-'));
  const tp = await startTestPlatform({ registration: 'attested' });
  const enrol = async (operatorId: string, siteId: string | null, pem: Pem, name: string) => {
    const created = await tp.store.createEnrolment({
      operator_id: operatorId,
      site_id: siteId,
      name,
      ca_pem: pem.cert,
      ca_fingerprint: new X509Certificate(pem.cert).fingerprint256,
    });
    if (created === 'duplicate_ca') throw new Error('duplicate CA');
    return created;
  };
  const tenant = await createTenant(tp, 'Depot operator');
  const other = await createTenant(tp, 'Someone else');
  const oem = await makeCa(pkiDir, 'oem-ca');
  const ca: AttestedCas = {
    oem,
    oem2: await makeCa(pkiDir, 'oem2-ca'),
    untrusted: await makeCa(pkiDir, 'untrusted-ca'),
    revoked: await makeCa(pkiDir, 'revoked-ca'),
    // A self-signed certificate with CA:FALSE that somebody enrolled anyway (the CLI refuses it; storage may not).
    flat: await makeCa(pkiDir, 'flat-ca', { ca: false }),
    intermediate: await issue(pkiDir, oem, { cn: 'OEM factory 3', ca: true }),
  };
  const depot = await enrol(tenant.operatorId, tenant.siteId, ca.oem, 'depot chargers');
  const noSite = await enrol(tenant.operatorId, null, ca.oem2, 'loose chargers');
  const revoked = await enrol(tenant.operatorId, tenant.siteId, ca.revoked, 'recalled batch');
  await tp.store.revokeEnrolment(revoked.enrolment_id);
  await enrol(tenant.operatorId, tenant.siteId, ca.flat, 'flat');
  return {
    tp,
    pkiDir,
    tenant,
    other,
    ca,
    depot,
    noSite,
    leaf: (issuer, cn, extra = {}) => issue(pkiDir, issuer, { cn, ...extra }),
    async stop() {
      await tp.stop();
      await rm(pkiDir, { recursive: true, force: true });
    },
  };
}
