import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';

/** Spec general rule 1: HTTPS with TLS 1.2 or higher only; plain HTTP is not supported. */

const tp = platformPerFile();

type Outcome =
  | { ok: true; protocol: string | null; authorized: boolean; cipher: string }
  | { ok: false; code: string | undefined; reason: string | undefined; message: string };

/** Opens a TLS connection to `port` and reports the handshake's outcome. */
function handshake(port: number, opts: tls.ConnectionOptions): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', ca: tp.ca, ...opts });
    socket.setTimeout(5_000, () => socket.destroy(new Error('handshake timeout')));
    socket.once('secureConnect', () => {
      resolve({
        ok: true,
        protocol: socket.getProtocol(),
        authorized: socket.authorized,
        cipher: socket.getCipher().name,
      });
      socket.end();
    });
    socket.once('error', (err: Error & { code?: string; reason?: string }) => {
      resolve({ ok: false, code: err.code, reason: err.reason, message: err.message });
    });
  });
}

/** GET /healthz over HTTPS pinned to one TLS version. */
function healthz(
  version: tls.SecureVersion,
): Promise<{ status: number | undefined; body: string; protocol: string | null }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port: tp.port,
        path: '/healthz',
        method: 'GET',
        ca: tp.ca,
        servername: 'localhost',
        minVersion: version,
        maxVersion: version,
        agent: false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () =>
          resolve({ status: res.statusCode, body, protocol: (res.socket as tls.TLSSocket).getProtocol() }),
        );
      },
    );
    req.on('error', reject);
    req.end();
  });
}

const TLS11_CLIENT: tls.ConnectionOptions = {
  minVersion: 'TLSv1.1',
  maxVersion: 'TLSv1.1',
  ciphers: 'DEFAULT@SECLEVEL=0',
};

describe('TLS versions', () => {
  it('a TLS 1.2 client connects, verifies the certificate and gets an answer', async () => {
    const out = await handshake(tp.port, { minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2' });
    expect(out).toMatchObject({ ok: true, protocol: 'TLSv1.2', authorized: true });
    const res = await healthz('TLSv1.2');
    expect(res.status).toBe(200);
    expect(res.protocol).toBe('TLSv1.2');
    expect(JSON.parse(res.body)).toMatchObject({ status: 'ok', version: '1.3.0' });
  });

  it('a TLS 1.3 client connects and gets an answer', async () => {
    const out = await handshake(tp.port, { minVersion: 'TLSv1.3', maxVersion: 'TLSv1.3' });
    expect(out).toMatchObject({ ok: true, protocol: 'TLSv1.3', authorized: true });
    const res = await healthz('TLSv1.3');
    expect(res.status).toBe(200);
    expect(res.protocol).toBe('TLSv1.3');
  });

  it('a client that offers everything gets TLS 1.3', async () => {
    const out = await handshake(tp.port, {});
    expect(out).toMatchObject({ ok: true, protocol: 'TLSv1.3' });
  });

  it('the TLS 1.1 client used below can speak TLS 1.1 (control: a server that allows it)', async () => {
    // Without this control, a client unable to offer TLS 1.1 at all would make the next test pass vacuously.
    const key = readFileSync(join(tp.dataDir, 'tls', 'key.pem'), 'utf8');
    const server = tls.createServer(
      { cert: tp.ca, key, minVersion: 'TLSv1.1', ciphers: 'DEFAULT@SECLEVEL=0' },
      (s) => s.end(),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as net.AddressInfo).port;
      const out = await handshake(port, TLS11_CLIENT);
      expect(out).toMatchObject({ ok: true, protocol: 'TLSv1.1' });
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('a TLS 1.1-only client is refused with a protocol-version alert, not a certificate error', async () => {
    const serverSide: Array<Error & { code?: string }> = [];
    const onClientError = (err: Error & { code?: string }) => serverSide.push(err);
    tp.platform.app.server.on('tlsClientError', onClientError);
    try {
      const out = await handshake(tp.port, TLS11_CLIENT);
      expect(out.ok).toBe(false);
      if (out.ok) return;
      // The server answered the ClientHello with alert 70 (protocol_version).
      expect(out.code).toBe('ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION');
      expect(out.reason).toBe('tlsv1 alert protocol version');
      expect(out.message).not.toMatch(/certificate|self.signed|verify/i);
      // And the server saw why.
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(serverSide.map((e) => e.code)).toContain('ERR_SSL_UNSUPPORTED_PROTOCOL');
    } finally {
      tp.platform.app.server.off('tlsClientError', onClientError);
    }
  });

  it('a TLS 1.0-only client is refused with a protocol-version alert', async () => {
    const out = await handshake(tp.port, {
      minVersion: 'TLSv1',
      maxVersion: 'TLSv1',
      ciphers: 'DEFAULT@SECLEVEL=0',
    });
    expect(out).toMatchObject({ ok: false, code: 'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION' });
  });

  it('the platform still serves after refusing old clients', async () => {
    await handshake(tp.port, TLS11_CLIENT);
    const res = await healthz('TLSv1.2');
    expect(res.status).toBe(200);
  });
});

describe('no plain HTTP', () => {
  it('a plain http.request to the port fails and never gets an HTTP answer', async () => {
    const outcome = await new Promise<{ status?: number; error?: string }>((resolve) => {
      const req = http.request(
        { host: '127.0.0.1', port: tp.port, path: '/healthz', method: 'GET', agent: false, timeout: 5_000 },
        (res) => {
          res.resume();
          resolve({ status: res.statusCode });
        },
      );
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', (err: Error & { code?: string }) => resolve({ error: err.code ?? err.message }));
      req.end();
    });
    expect(outcome.status).toBeUndefined();
    expect(outcome.error).toBe('ECONNRESET');
  });

  it('plain-text HTTP bytes on the port get no HTTP response at all', async () => {
    const received = await new Promise<string>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port: tp.port }, () => {
        socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
      });
      let data = '';
      socket.setEncoding('latin1');
      socket.on('data', (c: string) => {
        data += c;
      });
      socket.on('close', () => resolve(data));
      socket.on('error', () => undefined);
      socket.setTimeout(5_000, () => socket.destroy());
    });
    expect(received).not.toMatch(/^HTTP\//);
    expect(received).not.toContain('"status":"ok"');
  });

  it('the certificate is required: a client without the test CA is refused by its own verification', async () => {
    const out = await handshake(tp.port, { ca: undefined });
    expect(out).toMatchObject({ ok: false, code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
  });
});

/**
 * DESIGN.md §18: TLS 1.2 offers forward-secret AEAD suites only (ECDHE with AES-GCM or ChaCha20-Poly1305); TLS 1.3
 * keeps its own. Checked with the real `openssl s_client`, each suite alone; every refused suite is first shown to
 * work against a server that allows it, so a refusal is the platform's and not the client's.
 */
describe('cipher suites (openssl s_client)', () => {
  const EC_CBC = [
    'ECDHE-ECDSA-AES128-SHA',
    'ECDHE-ECDSA-AES256-SHA',
    'ECDHE-ECDSA-AES128-SHA256',
    'ECDHE-ECDSA-AES256-SHA384',
  ];
  const EC_AEAD = [
    'ECDHE-ECDSA-AES128-GCM-SHA256',
    'ECDHE-ECDSA-AES256-GCM-SHA384',
    'ECDHE-ECDSA-CHACHA20-POLY1305',
  ];
  const RSA_REFUSED = [
    'ECDHE-RSA-AES128-SHA',
    'ECDHE-RSA-AES256-SHA384',
    'AES128-SHA',
    'AES256-SHA256',
    // AEAD, but static RSA key exchange: no forward secrecy.
    'AES128-GCM-SHA256',
  ];
  const RSA_AEAD = [
    'ECDHE-RSA-AES128-GCM-SHA256',
    'ECDHE-RSA-AES256-GCM-SHA384',
    'ECDHE-RSA-CHACHA20-POLY1305',
  ];
  const TLS13 = ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256'];

  let rsa: TestPlatform;
  let rsaKey: string;
  beforeAll(async () => {
    // A platform on an RSA certificate (startTestPlatform keeps a certificate already in DIR/tls).
    const dir = await mkdtemp(join(tmpdir(), 'cp-tls-rsa-'));
    await mkdir(join(dir, 'tls'), { mode: 0o700 });
    await execFileP('openssl', [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '2',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
      '-keyout',
      join(dir, 'tls', 'key.pem'),
      '-out',
      join(dir, 'tls', 'cert.pem'),
    ]);
    rsaKey = readFileSync(join(dir, 'tls', 'key.pem'), 'utf8');
    rsa = await startTestPlatform({ dataDir: dir });
  });
  afterAll(async () => {
    await rsa?.stop();
    if (rsa) await rm(rsa.dataDir, { recursive: true, force: true });
  });

  it.each(EC_CBC)('TLS 1.2 %s: refused (EC certificate)', async (suite) => {
    const key = readFileSync(join(tp.dataDir, 'tls', 'key.pem'), 'utf8');
    await expectControlAccepts(tp.ca, key, suite);
    const out = await sClient(tp.port, ['-tls1_2', '-cipher', `${suite}:@SECLEVEL=0`]);
    expect(out.ok).toBe(false);
  });

  it.each(EC_AEAD)('TLS 1.2 %s: accepted (EC certificate)', async (suite) => {
    const out = await sClient(tp.port, ['-tls1_2', '-cipher', suite]);
    expect(out).toMatchObject({ ok: true, protocol: 'TLSv1.2', cipher: suite });
  });

  it.each(RSA_REFUSED)('TLS 1.2 %s: refused (RSA certificate)', async (suite) => {
    await expectControlAccepts(rsa.ca, rsaKey, suite);
    const out = await sClient(rsa.port, ['-tls1_2', '-cipher', `${suite}:@SECLEVEL=0`]);
    expect(out.ok).toBe(false);
  });

  it.each(RSA_AEAD)('TLS 1.2 %s: accepted (RSA certificate)', async (suite) => {
    const out = await sClient(rsa.port, ['-tls1_2', '-cipher', suite]);
    expect(out).toMatchObject({ ok: true, protocol: 'TLSv1.2', cipher: suite });
  });

  it.each(TLS13)('TLS 1.3 %s: accepted, as before', async (suite) => {
    const out = await sClient(tp.port, ['-tls1_3', '-ciphersuites', suite]);
    expect(out).toMatchObject({ ok: true, protocol: 'TLSv1.3', cipher: suite });
  });
});

const execFileP = promisify(execFile);

interface SClientOutcome {
  ok: boolean;
  protocol?: string;
  cipher?: string;
  output: string;
}

/** `openssl s_client` to a loopback port with `args`; asynchronous, since the platform serves in this process. */
async function sClient(port: number, args: string[]): Promise<SClientOutcome> {
  const run = execFile(
    'openssl',
    ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', 'localhost', ...args],
    {
      timeout: 10_000,
    },
  );
  run.stdin?.end();
  let output = '';
  run.stdout?.on('data', (c: Buffer) => {
    output += c.toString();
  });
  run.stderr?.on('data', (c: Buffer) => {
    output += c.toString();
  });
  const code = await new Promise<number | null>((resolve) => run.on('close', (c) => resolve(c)));
  // "New, TLSv1.0, Cipher is X" names the version that introduced a TLS 1.2 suite; "Protocol :" (printed for
  // TLS 1.2 sessions) the one negotiated.
  const session = /^New, (\S+), Cipher is (\S+)$/m.exec(output);
  const cipher = session?.[2];
  const protocol = /^\s*Protocol\s*: (\S+)$/m.exec(output)?.[1] ?? session?.[1];
  return {
    ok: code === 0 && cipher !== undefined,
    ...(cipher ? { cipher } : {}),
    ...(protocol ? { protocol } : {}),
    output,
  };
}

/** The client does offer `suite`: a server with the same certificate that allows every suite accepts it. */
async function expectControlAccepts(cert: string, key: string, suite: string): Promise<void> {
  const server = tls.createServer(
    { cert, key, minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2', ciphers: 'ALL:@SECLEVEL=0' },
    (s) => s.end(),
  );
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const port = (server.address() as net.AddressInfo).port;
    const out = await sClient(port, ['-tls1_2', '-cipher', `${suite}:@SECLEVEL=0`]);
    expect(out, out.output).toMatchObject({ ok: true, cipher: suite });
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
