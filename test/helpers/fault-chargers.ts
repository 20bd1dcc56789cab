import { expect } from 'vitest';
import { pollUntil, runCli, runCliJson } from './cli.js';
import type { HttpClient } from './platform.js';

/**
 * The tenants and chargers of the platform-fault tests (platform-faults, storage-faults): made with the built
 * admin CLI on the data directory and over the API of the `serve` running on it.
 */

export interface Charger {
  deviceId: string;
  token: string;
}

export interface Tenant {
  operatorId: string;
  siteId: string;
  clientId: string;
  clientSecret: string;
}

/** An operator, a site and a read-write client, made with the admin CLI. */
export async function createTenant(dir: string, name: string): Promise<Tenant> {
  const op = await runCliJson(['operators', 'create', '--data-dir', dir, '--name', name, '--json']);
  const site = await runCliJson([
    'sites',
    'create',
    '--data-dir',
    dir,
    '--operator',
    op.operator_id,
    '--name',
    `${name} depot`,
    '--json',
  ]);
  const client = await runCliJson([
    'clients',
    'create',
    '--data-dir',
    dir,
    '--operator',
    op.operator_id,
    '--scopes',
    'read,write',
    '--json',
  ]);
  return {
    operatorId: op.operator_id,
    siteId: site.site_id,
    clientId: client.client_id,
    clientSecret: client.client_secret,
  };
}

/** Registers chargers over the API (serve runs with --registration open) and puts them in the site. */
export async function registerChargers(
  http: HttpClient,
  dir: string,
  tenant: Tenant,
  opToken: string,
  sns: string[],
): Promise<Charger[]> {
  const chargers: Charger[] = [];
  for (const sn of sns) {
    const reg = await http.post('/v1/device/register', {
      json: {
        sn,
        model: 'Fault AC',
        manufacturer: 'Acme',
        firmware_version: '1.0.0',
        connectors: [
          { connector_id: 1, max_power_kw: 22, v2g_capable: false },
          { connector_id: 2, max_power_kw: 22, v2g_capable: false },
        ],
      },
    });
    expect(reg.status, reg.text).toBe(200);
    const { device_id, device_secret } = reg.body.data;
    const tok = await http.post('/v1/device/token', {
      json: { device_id, device_secret, grant_type: 'client_credentials' },
    });
    expect(tok.status, tok.text).toBe(200);
    chargers.push({ deviceId: device_id, token: tok.body.data.access_token });
  }
  const assigned = await Promise.all(
    chargers.map((c) =>
      runCli(['devices', 'assign', '--data-dir', dir, '--device', c.deviceId, '--site', tenant.siteId]),
    ),
  );
  for (const a of assigned) expect(a.code, a.stderr).toBe(0);
  // The running platform picks up assignments made by the CLI within about a second.
  for (const c of chargers) {
    const seen = await pollUntil(
      () => http.get(`/v1/operator/devices/${c.deviceId}`, { token: opToken }),
      (r) => r.status === 200,
      5_000,
    );
    expect(seen.status, seen.text).toBe(200);
  }
  return chargers;
}

/** Telemetry timestamps are unique per charger: a counter of seconds from a fixed past instant. */
export const TELEMETRY_EPOCH_MS = Date.parse('2025-01-01T00:00:00Z');
