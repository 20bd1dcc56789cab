import { X509Certificate } from 'node:crypto';

/**
 * Attested registration (DESIGN.md §18), pure: whether the TLS client certificate a charger presented proves
 * that an enrolled OEM made it. The certificate (the leaf) must name the serial number — subject CN, or a SAN URI
 * `urn:charger:sn:SN` — and chain to the CA of an active enrolment group: leaf, then any intermediates the
 * charger sent, then the group's CA, every link checked (issuer name, signature, validity dates, issuers are
 * CAs, the leaf is not). The platform checks this itself, so the TLS layer only asks for the certificate.
 *
 * Not checked: key usage, path length and name constraints, revocation lists; a group is revoked as a whole
 * (`enrolments revoke`), and a charger's identity is then reset by an operator (`devices reset`).
 */

/** What a group contributes to the check. */
export interface EnrolmentCa {
  enrolment_id: string;
  ca_pem: string;
}

export type AttestationRefusal =
  | 'no_certificate'
  | 'serial_not_named'
  | 'leaf_is_ca'
  | 'not_valid_now'
  | 'untrusted';

export type AttestationOutcome<G> = { ok: true; group: G } | { ok: false; refusal: AttestationRefusal };

/** Each refusal as the charger is told it (403/2003): what is missing, never which groups exist. */
export const ATTESTATION_MESSAGES: Readonly<Record<AttestationRefusal, string>> = {
  no_certificate:
    'Registration needs a TLS client certificate from the charger manufacturer (attested registration)',
  serial_not_named:
    'The client certificate does not name this serial number (subject CN or SAN URI urn:charger:sn:SN)',
  leaf_is_ca: 'The client certificate is a CA certificate, not a charger certificate',
  not_valid_now: 'The client certificate is expired or not yet valid',
  untrusted: 'The client certificate does not chain to an enrolled manufacturer CA',
};

/** Longest chain followed from the leaf to a group's CA (leaf, intermediates, CA). */
const MAX_CHAIN = 6;
const SN_URI_PREFIX = 'urn:charger:sn:';

/**
 * The first active group (in the order given: oldest first) whose CA the presented chain leads to; with several,
 * the one nearest the leaf. `chain` is the leaf first, then whatever else the charger sent, in any order.
 */
export function verifyAttestation<G extends EnrolmentCa>(input: {
  sn: string;
  chain: readonly X509Certificate[];
  groups: readonly G[];
  nowMs: number;
}): AttestationOutcome<G> {
  const [leaf, ...sent] = input.chain;
  if (!leaf) return { ok: false, refusal: 'no_certificate' };
  if (!namesSerial(leaf, input.sn)) return { ok: false, refusal: 'serial_not_named' };
  if (leaf.ca) return { ok: false, refusal: 'leaf_is_ca' };
  if (!validAt(leaf, input.nowMs)) return { ok: false, refusal: 'not_valid_now' };

  const cas = input.groups.flatMap((group) => {
    const ca = parseCertificate(group.ca_pem);
    return ca?.ca && validAt(ca, input.nowMs) ? [{ group, ca }] : [];
  });
  const issuers = sent.filter((c) => c.ca && validAt(c, input.nowMs));
  let current = leaf;
  const used = new Set<X509Certificate>();
  for (let depth = 1; depth < MAX_CHAIN; depth++) {
    const anchor = cas.find(({ ca }) => issuedBy(current, ca));
    if (anchor) return { ok: true, group: anchor.group };
    const next = issuers.find((c) => !used.has(c) && issuedBy(current, c));
    if (!next) break;
    used.add(next);
    current = next;
  }
  return { ok: false, refusal: 'untrusted' };
}

function issuedBy(cert: X509Certificate, issuer: X509Certificate): boolean {
  try {
    return cert.checkIssued(issuer) && cert.verify(issuer.publicKey);
  } catch {
    // A key type OpenSSL cannot verify with: not a link.
    return false;
  }
}

function validAt(cert: X509Certificate, nowMs: number): boolean {
  return cert.validFromDate.getTime() <= nowMs && nowMs <= cert.validToDate.getTime();
}

function parseCertificate(pem: string): X509Certificate | undefined {
  try {
    return new X509Certificate(pem);
  } catch {
    return undefined;
  }
}

/** The leaf names the serial: its subject CN, or one of its SAN URIs `urn:charger:sn:SN`. */
export function namesSerial(cert: X509Certificate, sn: string): boolean {
  return subjectCommonNames(cert).includes(sn) || sanUris(cert).includes(`${SN_URI_PREFIX}${sn}`);
}

/** The CN values of the subject. Node writes one attribute a line, with `\` before special characters. */
export function subjectCommonNames(cert: X509Certificate): string[] {
  return cert.subject
    .split('\n')
    .filter((line) => line.startsWith('CN='))
    .map((line) => line.slice(3).replace(/\\(.)/g, '$1'));
}

/**
 * The URI entries of the subject alternative names. Node writes `TYPE:value` entries separated by `, `, and a
 * value with special characters (a comma, a quote) as a JSON string.
 */
export function sanUris(cert: X509Certificate): string[] {
  const text = cert.subjectAltName;
  if (!text) return [];
  const uris: string[] = [];
  let i = 0;
  while (i < text.length) {
    const colon = text.indexOf(':', i);
    if (colon < 0) break;
    const type = text.slice(i, colon);
    let value: string;
    let end: number;
    if (text[colon + 1] === '"') {
      end = closingQuote(text, colon + 2);
      try {
        value = JSON.parse(text.slice(colon + 1, end + 1)) as string;
      } catch {
        return uris;
      }
      end += 1;
    } else {
      end = text.indexOf(', ', colon + 1);
      if (end < 0) end = text.length;
      value = text.slice(colon + 1, end);
    }
    if (type === 'URI') uris.push(value);
    i = end + 2;
  }
  return uris;
}

function closingQuote(text: string, from: number): number {
  for (let j = from; j < text.length; j++) {
    if (text[j] === '\\') j++;
    else if (text[j] === '"') return j;
  }
  return text.length;
}

export type EnrolmentCaCheck =
  | { ok: true; pem: string; fingerprint: string; commonName: string | undefined }
  | { ok: false; error: string };

/**
 * Whether a file's text may be an enrolment group's CA (`enrolments add --ca`): exactly one PEM certificate,
 * a CA (basicConstraints CA:TRUE). Answers its normalised PEM and SHA-256 fingerprint.
 */
export function checkEnrolmentCa(text: string): EnrolmentCaCheck {
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) return { ok: false, error: 'is not a PEM certificate' };
  if (blocks.length > 1)
    return { ok: false, error: 'holds several certificates; give the one CA certificate' };
  const cert = parseCertificate(blocks[0]!);
  if (!cert) return { ok: false, error: 'is not a valid PEM certificate' };
  if (!cert.ca) return { ok: false, error: 'is not a CA certificate (basicConstraints CA:TRUE)' };
  return {
    ok: true,
    pem: cert.toString(),
    fingerprint: cert.fingerprint256,
    commonName: subjectCommonNames(cert)[0],
  };
}
