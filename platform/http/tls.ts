import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import selfsigned from 'selfsigned';

export interface TlsMaterial {
  cert: string;
  key: string;
  certPath: string;
  keyPath: string;
  created: boolean;
}

async function readIfExists(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** Reuses DIR/tls/{cert,key}.pem, creating a self-signed pair for localhost and 127.0.0.1 on first start. */
export async function ensureSelfSignedCertificate(dataDir: string): Promise<TlsMaterial> {
  const dir = join(dataDir, 'tls');
  const certPath = join(dir, 'cert.pem');
  const keyPath = join(dir, 'key.pem');
  const [cert, key] = await Promise.all([readIfExists(certPath), readIfExists(keyPath)]);
  if (cert && key) return { cert, key, certPath, keyPath, created: false };

  const notBefore = new Date(Date.now() - 60_000);
  const notAfter = new Date(notBefore.getTime() + 825 * 86_400_000);
  const pems = await selfsigned.generate([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: notBefore,
    notAfterDate: notAfter,
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '::1' },
        ],
      },
    ],
  });
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await writeFile(keyPath, pems.private, { mode: 0o600 });
  await writeFile(certPath, pems.cert, { mode: 0o644 });
  return { cert: pems.cert, key: pems.private, certPath, keyPath, created: true };
}

export async function loadCertificate(certPath: string, keyPath: string): Promise<TlsMaterial> {
  const [cert, key] = await Promise.all([readFile(certPath, 'utf8'), readFile(keyPath, 'utf8')]);
  return { cert, key, certPath, keyPath, created: false };
}

/**
 * The suites the platform offers (DESIGN.md §18). TLS 1.3: Node's defaults, unchanged. TLS 1.2: forward-secret
 * (ECDHE) with an AEAD cipher only (AES-GCM or ChaCha20-Poly1305): no CBC with SHA-1 or SHA-2 MACs, no static RSA
 * key exchange. ECDSA and RSA both, so either kind of certificate works.
 */
export const TLS_CIPHERS = [
  'TLS_AES_256_GCM_SHA384',
  'TLS_CHACHA20_POLY1305_SHA256',
  'TLS_AES_128_GCM_SHA256',
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');
