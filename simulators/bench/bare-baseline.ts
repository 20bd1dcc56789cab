import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BenchPlatform, call } from './bench-platform.js';

/**
 * What the ingest benchmarks share: chargers registered over the API with their bearer headers, and the bare
 * baselines (`bare-server.ts`: node:https alone, or Fastify alone) on the platform's own certificate, each as a
 * process of its own.
 */
export async function registerLoadChargers(
  platform: BenchPlatform,
  snPrefix: string,
  count: number,
): Promise<Array<Record<string, string>>> {
  const headers: Array<Record<string, string>> = [];
  for (let i = 0; i < count; i++) {
    const reg = await call(platform, 'POST', '/v1/device/register', {
      json: { sn: `${snPrefix}-${i}`, model: 'Bench', manufacturer: 'Bench', firmware_version: '1' },
    });
    const tok = await call(platform, 'POST', '/v1/device/token', {
      json: {
        device_id: reg.body.data.device_id,
        device_secret: reg.body.data.device_secret,
        grant_type: 'client_credentials',
      },
    });
    headers.push({
      authorization: `Bearer ${tok.body.data.access_token}`,
      'content-type': 'application/json',
    });
  }
  return headers;
}

export interface BareServer {
  origin: string;
  pid: number;
  stop(): void;
}

export async function startBareServer(
  platform: BenchPlatform,
  flavour: 'node' | 'fastify' = 'node',
): Promise<BareServer> {
  const tlsDir = join(platform.dataDir, 'tls');
  const child = spawn(
    process.execPath,
    [
      fileURLToPath(new URL('./bare-server.js', import.meta.url)),
      join(tlsDir, 'cert.pem'),
      join(tlsDir, 'key.pem'),
      flavour,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.once('data', (b: Buffer) => resolve(Number(String(b).trim())));
    child.once('exit', (code) => reject(new Error(`bare server exited (${code})`)));
  });
  return { origin: `https://127.0.0.1:${port}`, pid: child.pid!, stop: () => child.kill('SIGTERM') };
}
