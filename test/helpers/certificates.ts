import { execFile } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * Certificates for attested registration (DESIGN.md §18), made by the real `openssl` binary as an OEM would:
 * CAs, intermediates and charger certificates with any subject, SAN, basicConstraints and validity window.
 */
const run = promisify(execFile);

export interface Pem {
  /** Where the certificate and its key are. */
  certPath: string;
  keyPath: string;
  cert: string;
  key: string;
}

export interface IssueOptions {
  /** Subject CN. */
  cn: string;
  /** SAN URIs (`urn:charger:sn:SN`). */
  uris?: readonly string[];
  /** basicConstraints CA:TRUE (an intermediate) or CA:FALSE (a charger; the default). */
  ca?: boolean;
  /** false: no keyUsage extension (OpenSSL then lets the certificate sign others, whatever its CA flag). */
  keyUsage?: boolean;
  /** Validity window, `YYMMDDHHMMSSZ` (default: from an hour ago for 30 days). */
  startDate?: string;
  endDate?: string;
}

let counter = 0;

/** openssl's time format, `YYMMDDHHMMSSZ`. */
export function opensslTime(ms: number): string {
  return `${new Date(ms).toISOString().replace(/[-:T]/g, '').slice(2, 14)}Z`;
}

/** A self-signed CA (basicConstraints CA:TRUE; with `ca: false`, a self-signed certificate that is not one). */
export async function makeCa(dir: string, name: string, opts: { ca?: boolean } = {}): Promise<Pem> {
  await mkdir(dir, { recursive: true });
  const certPath = join(dir, `${name}.pem`);
  const keyPath = join(dir, `${name}.key`);
  const constraints = opts.ca === false ? 'critical,CA:FALSE' : 'critical,CA:TRUE';
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    keyPath,
    '-out',
    certPath,
    '-days',
    '365',
    '-subj',
    `/O=Test OEM/CN=${name}`,
    '-addext',
    `basicConstraints=${constraints}`,
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign,digitalSignature',
  ]);
  return { certPath, keyPath, cert: await readFile(certPath, 'utf8'), key: await readFile(keyPath, 'utf8') };
}

/** A certificate signed by `issuer` (`openssl ca`, which takes any validity window). */
export async function issue(dir: string, issuer: Pem, opts: IssueOptions): Promise<Pem> {
  const n = ++counter;
  const base = join(dir, `issued-${n}`);
  const keyPath = `${base}.key`;
  const certPath = `${base}.pem`;
  const csrPath = `${base}.csr`;
  const db = join(dir, `ca-db-${n}`);
  await mkdir(db, { recursive: true });
  await writeFile(join(db, 'index.txt'), '');
  // A section of its own, so that a URI may hold a comma.
  const san = opts.uris?.length
    ? `subjectAltName = @san\n[san]\n${opts.uris.map((u, i) => `URI.${i + 1} = ${u}`).join('\n')}\n`
    : '';
  const usage = opts.ca ? 'keyCertSign,cRLSign' : 'digitalSignature';
  const ext =
    `basicConstraints = critical,CA:${opts.ca ? 'TRUE' : 'FALSE'}\n` +
    (opts.keyUsage === false ? '' : `keyUsage = critical,${usage}\n`);
  await writeFile(
    `${base}.cnf`,
    `[ca]\ndefault_ca = c\n[c]\ndatabase = ${db}/index.txt\nnew_certs_dir = ${db}\n` +
      `default_md = sha256\npolicy = p\nunique_subject = no\nrand_serial = yes\nx509_extensions = e\n` +
      `[p]\ncommonName = supplied\n[e]\n${ext}${san}`,
  );
  await run('openssl', [
    'req',
    '-new',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    keyPath,
    '-out',
    csrPath,
    '-subj',
    `/CN=${opts.cn}`,
  ]);
  const now = Date.now();
  await run('openssl', [
    'ca',
    '-batch',
    '-notext',
    '-config',
    `${base}.cnf`,
    '-cert',
    issuer.certPath,
    '-keyfile',
    issuer.keyPath,
    '-in',
    csrPath,
    '-out',
    certPath,
    '-startdate',
    opts.startDate ?? opensslTime(now - 3_600_000),
    '-enddate',
    opts.endDate ?? opensslTime(now + 30 * 86_400_000),
  ]);
  return { certPath, keyPath, cert: await readFile(certPath, 'utf8'), key: await readFile(keyPath, 'utf8') };
}
