import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, runCliJson, type ServeProcess, sleep } from '../helpers/cli.js';
import { type HttpClient, operatorToken } from '../helpers/platform.js';
import { servedPlatforms } from '../helpers/served-platforms.js';

/**
 * `charger-platform serve` (DESIGN.md §10, §11) as the built program, over real HTTPS: the sandbox and
 * production environments. Its metrics listener and CORS origins are in serve-metrics-and-cors.test.ts.
 */

const { dirs, serve, connect, stopAll } = servedPlatforms('cp-serve-');

afterAll(async () => {
  await stopAll();
});

describe('serve --env sandbox', () => {
  let sandboxDir: string;
  let first: ServeProcess;
  let http: HttpClient;
  let token: string;
  let certPem: string;

  beforeAll(async () => {
    sandboxDir = await dirs.make();
    first = await serve(['--data-dir', sandboxDir, '--env', 'sandbox']);
    http = await connect(first);
  });

  it('prints its banner and creates DIR/tls/cert.pem and key.pem on a fresh directory', async () => {
    expect(first.env).toBe('sandbox');
    expect(first.url).toBe(`https://127.0.0.1:${first.port}`);
    expect(first.port).toBeGreaterThan(0);
    expect(first.certPath).toBe(join(sandboxDir, 'tls', 'cert.pem'));
    expect(first.certCreated).toBe(true);
    certPem = await readFile(join(sandboxDir, 'tls', 'cert.pem'), 'utf8');
    const keyPem = await readFile(join(sandboxDir, 'tls', 'key.pem'), 'utf8');
    expect(certPem).toMatch(/^-----BEGIN CERTIFICATE-----/);
    expect(keyPem).toMatch(/-----BEGIN [A-Z ]*PRIVATE KEY-----/);
    expect(first.clientId).toMatch(/^cli_/);
    expect(first.clientSecret).toBeTruthy();
    expect(first.exampleDeviceId).toMatch(/^dev_/);
  });

  it('GET /healthz answers 200 over HTTPS with the created certificate as the only CA', async () => {
    const res = await http.get('/healthz');
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('ok');
    expect(res.headers['x-api-version']).toBe('1.3.0');
  });

  it('the printed client credentials obtain a token', async () => {
    const res = await http.post('/v1/operator/oauth/token', {
      json: {
        client_id: first.clientId,
        client_secret: first.clientSecret,
        grant_type: 'client_credentials',
      },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.token_type).toBe('Bearer');
    expect(res.body.expires_in).toBe(86_400);
    expect(typeof res.body.access_token).toBe('string');
    token = res.body.access_token;
  });

  it('serves seeded charging records, newest first, only of the sandbox operator', async () => {
    const res = await http.get('/v1/operator/charging-records?size=100', { token });
    expect(res.status, res.text).toBe(200);
    expect(res.body.code).toBe(0);
    const { total, page, size, items } = res.body.data;
    expect(total).toBeGreaterThan(0);
    expect(page).toBe(1);
    expect(size).toBe(100);
    expect(items).toHaveLength(Math.min(total, 100));
    const starts = items.map((r: { start_time: string }) => Date.parse(r.start_time));
    expect(starts.every((t: number) => Number.isFinite(t))).toBe(true);
    expect(starts).toEqual([...starts].sort((a, b) => b - a));
    // Every record belongs to a device this client may see.
    const deviceIds = [...new Set(items.map((r: { device_id: string }) => r.device_id))] as string[];
    expect(deviceIds).toContain(first.exampleDeviceId);
    for (const id of deviceIds) {
      expect((await http.get(`/v1/operator/devices/${id}`, { token })).status).toBe(200);
    }
  });

  it('the printed example device answers 200 with its connectors', async () => {
    const res = await http.get(`/v1/operator/devices/${first.exampleDeviceId}`, { token });
    expect(res.status, res.text).toBe(200);
    expect(res.body.code).toBe(0);
    expect(res.body.data.device_id).toBe(first.exampleDeviceId);
    const connectors = res.body.data.connectors as Array<{ connector_id: number; status: string }>;
    expect(connectors.map((c) => c.connector_id)).toEqual([1, 2]);
    for (const c of connectors) {
      expect(['idle', 'charging', 'discharging', 'fault', 'unavailable']).toContain(c.status);
    }
  });

  it('registration is open and a new charger joins the sandbox operator at once', async () => {
    const reg = await http.post('/v1/device/register', {
      json: { sn: 'SANDBOX-NEW-1', model: 'M', manufacturer: 'Acme', firmware_version: '1.0.0' },
    });
    expect(reg.status, reg.text).toBe(200);
    const res = await http.get(`/v1/operator/devices/${reg.body.data.device_id}`, { token });
    expect(res.status).toBe(200);
  });

  it('SIGTERM closes it cleanly (exit code 0)', async () => {
    const exit = await first.stop();
    expect(exit).toEqual({ code: 0, signal: null });
    expect(first.stderr()).toContain('SIGTERM, closing');
  });

  it('a second start reuses the certificate and the sandbox client', async () => {
    const second = await serve(['--data-dir', sandboxDir, '--env', 'sandbox']);
    expect(second.certPath).toBe(join(sandboxDir, 'tls', 'cert.pem'));
    expect(second.certCreated).toBe(false);
    expect(await readFile(second.certPath, 'utf8')).toBe(certPem);
    expect(second.clientId).toBe(first.clientId);
    expect(second.clientSecret).toBe(first.clientSecret);
    expect(second.exampleDeviceId).toBe(first.exampleDeviceId);
    const http2 = await connect(second);
    // Seeded once: the previously registered charger is still there and the client still works.
    const again = await operatorToken(http2, second.clientId!, second.clientSecret!);
    const res = await http2.get(`/v1/operator/devices/${second.exampleDeviceId}`, { token: again });
    expect(res.status).toBe(200);
    expect(await second.stop()).toEqual({ code: 0, signal: null });
  });

  it('a sandbox data directory refuses to start as production', async () => {
    const res = await runCli([
      'serve',
      '--data-dir',
      sandboxDir,
      '--env',
      'production',
      '--self-signed',
      '--port',
      '0',
    ]);
    expect(res.code).not.toBe(0);
    expect(res.code).not.toBeNull();
    expect(res.stderr).toContain('belongs to the sandbox environment, not production');
    expect(res.stderr).not.toContain('listening on');
  });
});

describe('serve --env production', () => {
  it('refuses to start without a certificate or --self-signed, naming both options', async () => {
    const dir = await dirs.make();
    const res = await runCli(['serve', '--data-dir', dir, '--env', 'production', '--port', '0']);
    expect(res.code).not.toBe(0);
    expect(res.code).not.toBeNull();
    expect(res.stderr).toContain('--tls-cert');
    expect(res.stderr).toContain('--self-signed');
    expect(res.stderr).not.toContain('listening on');
    expect(existsSync(join(dir, 'tls', 'cert.pem'))).toBe(false);
  });

  it('production is the default environment and refuses the same way', async () => {
    const dir = await dirs.make();
    const res = await runCli(['serve', '--data-dir', dir, '--port', '0']);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain('--self-signed');
  });

  it('--tls-cert without --tls-key is refused', async () => {
    const dir = await dirs.make();
    const res = await runCli(['serve', '--data-dir', dir, '--tls-cert', join(dir, 'x.pem'), '--port', '0']);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain('--tls-key');
  });

  // Several instances share PostgreSQL (DESIGN.md §13); on SQLite `--redis` has nothing to share. SQLite is named
  // explicitly, so that PostgreSQL runs (which add their own `--database` otherwise) check the same refusals.
  it.each([
    ['a URL that is not redis://', 'http://127.0.0.1:6379', '--redis must be a redis:// or rediss:// URL'],
    ['SQLite', 'redis://127.0.0.1:6379', '--database postgres://'],
  ])('--redis with %s is refused before anything is written', async (_case, redis, message) => {
    const dir = join(await dirs.make(), 'never-created');
    const res = await runCli([
      'serve',
      '--data-dir',
      dir,
      '--database',
      'sqlite',
      '--self-signed',
      '--redis',
      redis,
    ]);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain(message);
    expect(existsSync(dir)).toBe(false);
  });

  describe('with --tls-cert/--tls-key from another data directory and --token-ttl 1', () => {
    let certDir: string;
    let dir: string;
    let server: ServeProcess;
    let http: HttpClient;
    let client: { client_id: string; client_secret: string };

    beforeAll(async () => {
      // Certificate material made by a short self-signed production start on another directory.
      certDir = await dirs.make();
      const maker = await serve(['--data-dir', certDir, '--env', 'production', '--self-signed']);
      expect(maker.certCreated).toBe(true);
      expect(await maker.stop()).toEqual({ code: 0, signal: null });

      dir = await dirs.make();
      const op = await runCliJson(['operators', 'create', '--data-dir', dir, '--name', 'TTL Op', '--json']);
      client = await runCliJson([
        'clients',
        'create',
        '--data-dir',
        dir,
        '--operator',
        op.operator_id,
        '--scopes',
        'read',
        '--json',
      ]);
      server = await serve([
        '--data-dir',
        dir,
        '--env',
        'production',
        '--tls-cert',
        join(certDir, 'tls', 'cert.pem'),
        '--tls-key',
        join(certDir, 'tls', 'key.pem'),
        '--token-ttl',
        '1',
        '--address-limit',
        '50',
      ]);
      http = await connect(server, join(certDir, 'tls', 'cert.pem'));
    });

    it('serves with the given certificate and creates none of its own', async () => {
      expect(server.env).toBe('production');
      expect(server.certPath).toBe(join(certDir, 'tls', 'cert.pem'));
      expect(server.certCreated).toBe(false);
      expect(existsSync(join(dir, 'tls'))).toBe(false);
      const res = await http.get('/healthz');
      expect(res.status).toBe(200);
    });

    it('--address-limit sets what one address may send to the unauthenticated routes a minute', async () => {
      const res = await http.post('/v1/device/token', { json: {} });
      expect(res.status).toBe(400);
      expect(res.headers['ratelimit-policy']).toBe('"unauthenticated";q=50;w=60');
      expect(res.headers.ratelimit).toMatch(/^"unauthenticated";r=49;t=\d+$/);
    });

    it('tokens expire after the given lifetime: 401 with code 2002', async () => {
      // Tokens carry whole-second expiry times: start just after a second boundary so that the one-second
      // token is still valid when first used (retried if a loaded machine crossed the next boundary anyway).
      let token = '';
      let fresh: Awaited<ReturnType<HttpClient['get']>> | undefined;
      for (let attempt = 0; attempt < 3 && fresh?.status !== 200; attempt++) {
        await sleep(1_000 - (Date.now() % 1_000) + 30);
        const res = await http.post('/v1/operator/oauth/token', {
          json: {
            client_id: client.client_id,
            client_secret: client.client_secret,
            grant_type: 'client_credentials',
          },
        });
        expect(res.status, res.text).toBe(200);
        expect(res.body.expires_in).toBe(1);
        token = res.body.access_token as string;
        fresh = await http.get('/v1/operator/charging-records', { token });
        if (fresh.status !== 200) expect(fresh.body.code).toBe(2002);
      }
      expect(fresh?.status, fresh?.text).toBe(200);

      await sleep(2_000);
      const stale = await http.get('/v1/operator/charging-records', { token });
      expect(stale.status).toBe(401);
      expect(stale.body.code).toBe(2002);
      expect(typeof stale.body.message).toBe('string');
    });

    it('SIGTERM closes it cleanly (exit code 0)', async () => {
      expect(await server.stop()).toEqual({ code: 0, signal: null });
      expect(server.stderr()).toContain('SIGTERM, closing');
    });

    it('a production data directory refuses to start as the sandbox', async () => {
      const res = await runCli(['serve', '--data-dir', dir, '--env', 'sandbox', '--port', '0']);
      expect(res.code).not.toBe(0);
      expect(res.code).not.toBeNull();
      expect(res.stderr).toContain('belongs to the production environment, not sandbox');
      expect(res.stderr).not.toContain('listening on');
    });
  });
});
