#!/usr/bin/env node
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { call, startBenchPlatform } from './bench-platform.js';
import { runLoad } from './load-generator.js';

/**
 * Ingest benchmark: authenticated telemetry POSTs over HTTPS keep-alive at full speed from many chargers (so
 * that none exceeds its own 10/s limit), against the platform and, in the same run with the same generator and
 * certificate, against a bare node:https server answering the same request. Prints rps, p50/p99 and the ratio,
 * and checks that every accepted record was stored.
 * Usage: npm run bench:ingest [-- --devices 1000 --connections 64 --seconds 15]
 */
function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

export async function measureIngest(
  DEVICES = arg('devices', 1000),
  CONNECTIONS = arg('connections', 64),
  SECONDS = arg('seconds', 15),
) {
  const platform = await startBenchPlatform();
  let bare: ReturnType<typeof spawn> | undefined;
  try {
    // Chargers register over the API; tokens for the load.
    const devices: Array<{ token: string; n: number }> = [];
    for (let i = 0; i < DEVICES; i++) {
      const sn = `INGEST-${i}`;
      const reg = await call(platform, 'POST', '/v1/device/register', {
        json: { sn, model: 'Bench', manufacturer: 'Bench', firmware_version: '1' },
      });
      const tok = await call(platform, 'POST', '/v1/device/token', {
        json: {
          device_id: reg.body.data.device_id,
          device_secret: reg.body.data.device_secret,
          grant_type: 'client_credentials',
        },
      });
      devices.push({ token: tok.body.data.access_token, n: 0 });
    }
    const base = Date.now() - 86_400_000;
    const request = (i: number) => {
      const d = devices[i % DEVICES]!;
      // Each record its own timestamp: the platform ignores exact repeats.
      const timestamp = new Date(base + d.n++ * 1000).toISOString();
      return {
        path: '/v1/device/telemetry',
        headers: { authorization: `Bearer ${d.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          timestamp,
          connector_id: 1,
          state: 'charging',
          voltage: 231.2,
          current: 31.9,
          power: 22.1,
          energy_delivered: 12.345,
          soc: 57,
          temperature: 31.5,
        }),
      };
    };

    const origin = platform.url;
    const warm = await runLoad({
      origin,
      ca: platform.ca,
      connections: CONNECTIONS,
      durationMs: 2000,
      next: request,
    });
    const onPlatform = await runLoad({
      origin,
      ca: platform.ca,
      connections: CONNECTIONS,
      durationMs: SECONDS * 1000,
      next: request,
    });

    const tlsDir = join(platform.dataDir, 'tls');
    bare = spawn(
      process.execPath,
      [
        fileURLToPath(new URL('./bare-server.js', import.meta.url)),
        join(tlsDir, 'cert.pem'),
        join(tlsDir, 'key.pem'),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const barePort = await new Promise<number>((resolve) =>
      bare!.stdout!.once('data', (b: Buffer) => resolve(Number(String(b).trim()))),
    );
    const bareOrigin = `https://localhost:${barePort}`;
    await runLoad({
      origin: bareOrigin,
      ca: platform.ca,
      connections: CONNECTIONS,
      durationMs: 2000,
      next: request,
    });
    const onBare = await runLoad({
      origin: bareOrigin,
      ca: platform.ca,
      connections: CONNECTIONS,
      durationMs: SECONDS * 1000,
      next: request,
    });

    // Every acknowledged record must be in the database.
    const db = new Database(join(platform.dataDir, 'platform.sqlite'), { readonly: true });
    const stored = (db.prepare('SELECT COUNT(*) AS n FROM telemetry').get() as { n: number }).n;
    db.close();
    const acknowledged = (warm.statusCounts['200'] ?? 0) + (onPlatform.statusCounts['200'] ?? 0);

    const result = {
      machine: `${process.platform} ${process.arch}, node ${process.version}`,
      devices: DEVICES,
      connections: CONNECTIONS,
      seconds: SECONDS,
      platform: onPlatform,
      bare_https: onBare,
      ratio: Math.round((onPlatform.rps / onBare.rps) * 1000) / 1000,
      acknowledged,
      stored,
      all_stored: stored === acknowledged,
    };
    return result;
  } finally {
    bare?.kill('SIGTERM');
    await platform.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.stdout.write(`${JSON.stringify(await measureIngest(), null, 2)}\n`);
}
