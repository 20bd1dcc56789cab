import { createPrivateKey, X509Certificate } from 'node:crypto';
import selfsigned from 'selfsigned';

/**
 * Charger certificates for attested registration (DESIGN.md §18), as an OEM's factory would make them: one per
 * serial number, signed by the enrolment CA, naming the serial twice — subject CN and SAN URI
 * `urn:charger:sn:SN` — with basicConstraints CA:FALSE and client authentication. Signed by the `selfsigned`
 * package with the CA's key (EC P-256 or RSA; the charger's key is of the same kind).
 */
export interface EnrolmentCa {
  /** PEM of the CA certificate and of its private key. */
  cert: string;
  key: string;
}

const VALIDITY_MS = 825 * 86_400_000;

/** Checks the CA pair once (a clear message before any charger starts) and answers the key type to use. */
export function checkEnrolmentCa(ca: EnrolmentCa): { keyType: 'ec' | 'rsa' } {
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(ca.cert);
  } catch {
    throw new Error('the enrolment CA certificate is not a PEM certificate');
  }
  if (!cert.ca) throw new Error('the enrolment CA certificate is not a CA (basicConstraints CA:TRUE)');
  let key: ReturnType<typeof createPrivateKey>;
  try {
    key = createPrivateKey(ca.key);
  } catch {
    throw new Error('the enrolment CA key is not a PEM private key');
  }
  if (!cert.checkPrivateKey(key)) throw new Error('the enrolment CA key is not the key of its certificate');
  if (key.asymmetricKeyType === 'rsa') return { keyType: 'rsa' };
  if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1')
    return { keyType: 'ec' };
  throw new Error('the enrolment CA key must be EC P-256 or RSA');
}

/** A certificate and key for one charger, signed by `ca`. */
export async function chargerCertificate(
  sn: string,
  ca: EnrolmentCa,
  keyType: 'ec' | 'rsa',
): Promise<{ cert: string; key: string }> {
  const notBefore = new Date(Date.now() - 60_000);
  const pems = await selfsigned.generate([{ name: 'commonName', value: sn }], {
    keyType,
    ...(keyType === 'ec' ? { curve: 'P-256' } : { keySize: 2048 }),
    algorithm: 'sha256',
    notBeforeDate: notBefore,
    notAfterDate: new Date(notBefore.getTime() + VALIDITY_MS),
    ca: { cert: ca.cert, key: ca.key },
    extensions: [
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, critical: true },
      { name: 'extKeyUsage', clientAuth: true },
      { name: 'subjectAltName', altNames: [{ type: 6, value: `urn:charger:sn:${sn}` }] },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}

/**
 * A test enrolment CA (EC P-256, basicConstraints CA:TRUE, keyCertSign), to try a platform under `--registration
 * attested` with a simulated fleet: `charger-sim enrolment-ca` writes it, the operator enrols the certificate
 * (`charger-platform enrolments add --ca`), the fleet signs its chargers' certificates with it. An OEM's real CA
 * is made and kept as docs/oem-guide.md says, never like this.
 */
export async function makeTestEnrolmentCa(name: string, nowMs: number = Date.now()): Promise<EnrolmentCa> {
  const notBefore = new Date(nowMs - 60_000);
  const pems = await selfsigned.generate([{ name: 'commonName', value: name }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: notBefore,
    notAfterDate: new Date(notBefore.getTime() + 10 * 365 * 86_400_000),
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}
