import { expect } from 'vitest';
import type { AnyRoute } from '../../platform/http/route-spec.js';
import { bodyOf, type Ids, pathOf, queryOf, rawRequestOf } from './auth-matrix-requests.js';
import {
  createTenant,
  type HttpClient,
  type HttpResult,
  operatorToken,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from './platform.js';
import { createClientOf } from './sealed-writes.js';
import { streamUpgrade } from './stream-upgrade.js';

/**
 * The world of the authentication matrix tests (auth-matrix, auth-tenancy, auth-tokens): a platform logging
 * at debug level, tenants Alpha and Bravo with clients of every scope, a charger each, and resources of every kind
 * an endpoint can name (Alpha's, Bravo's, and Bravo's made by an aggregator's client); the calls that send an
 * endpoint's valid request with a given credential; and `secrets`, everything secret that went over the wire,
 * none of which may be logged. Its members are arrow functions, so that a file can take them apart.
 */

export type Tenant = Awaited<ReturnType<typeof createTenant>>;
export type Client = { clientId: string; secret: string; token: string };

export interface AuthWorld {
  tp: TestPlatform;
  routes: readonly AnyRoute[];
  alpha: Tenant;
  bravo: Tenant;
  readOnly: Client;
  writeOnly: Client;
  devA: RegisteredDevice;
  devB: RegisteredDevice;
  /** Alpha's and Bravo's resources of every kind an endpoint can name. */
  own: Ids;
  foreign: Ids;
  /** Bravo's resources, made by an aggregator's client of Alpha and Bravo (DESIGN.md §18). */
  aggregated: Ids;
}

export class AuthMatrix {
  /** Everything secret that went over the wire; none of it may be logged. */
  readonly secrets = new Set<string>();
  private serial = 0;
  private world: AuthWorld | undefined;

  private get tp(): TestPlatform {
    if (!this.world) throw new Error('start() first');
    return this.world.tp;
  }
  private sn = (tag: string) => `SN-AUTH-${tag}-${process.pid}-${++this.serial}`;

  keep = (...values: Array<string | undefined>): void => {
    for (const v of values) if (v) this.secrets.add(v);
  };
  keepToken = (token: string): void => {
    this.keep(token, token.slice(token.lastIndexOf('.') + 1));
  };

  newClient = async (tenant: Tenant, scopes: Array<'read' | 'write'>): Promise<Client> => {
    const { client, secret } = await createClientOf(this.tp, { operator_ids: [tenant.operatorId], scopes });
    const token = await operatorToken(this.tp.http, client.client_id, secret);
    this.keep(secret);
    this.keepToken(token);
    return { clientId: client.client_id, secret, token };
  };

  newDevice = async (tenant: Tenant, tag: string): Promise<RegisteredDevice> => {
    const d = await registerDevice(this.tp, this.sn(tag), tenant.siteId);
    this.keep(d.secret);
    this.keepToken(d.token);
    return d;
  };

  /**
   * A stop command, a flexibility control and a schedule of the tenant's device (the client spends little), sent
   * by a client of the tenant or by `by`, an aggregator's client that holds other operators too.
   */
  resourcesOf = async (tenant: Tenant, device: RegisteredDevice, by?: { token: string }): Promise<Ids> => {
    const c = by ?? (await this.newClient(tenant, ['read', 'write']));
    const stop = await this.tp.http.post(`/v1/operator/devices/${device.deviceId}/connectors/1/stop`, {
      token: c.token,
      json: {},
    });
    expect(stop.status, stop.text).toBe(200);
    const control = await this.tp.http.post('/v1/operator/control/flexibility', {
      token: c.token,
      json: {
        target_type: 'site',
        target_ids: [tenant.siteId],
        command: 'pause_charging',
        params: { duration: 7 * 86_400 },
      },
    });
    expect(control.status, control.text).toBe(200);
    const schedule = await this.tp.http.post(
      `/v1/operator/devices/${device.deviceId}/connectors/1/schedule`,
      {
        token: c.token,
        json: {
          schedule_id: 'sch-auth',
          type: 'daily',
          time_slots: [{ start: '22:00', end: '06:00' }],
          timezone: 'Europe/Berlin',
        },
      },
    );
    expect(schedule.status, schedule.text).toBe(200);
    const webhook = await this.tp.http.post('/v1/operator/webhooks', {
      token: c.token,
      json: { url: 'https://hooks.example.com/charger', events: ['*'] },
    });
    expect(webhook.status, webhook.text).toBe(200);
    this.keep(webhook.body.data.secret);
    const test = await this.tp.http.post(`/v1/operator/webhooks/${webhook.body.data.webhook_id}/test`, {
      token: c.token,
    });
    expect(test.status, test.text).toBe(200);
    const artifact = await this.tp.http.post(
      `/v1/operator/artifacts?kind=agent&version=auth-${++this.serial}&operator_id=${tenant.operatorId}`,
      {
        token: c.token,
        raw: Buffer.from('an agent bundle'),
        contentType: 'application/octet-stream',
        headers: { 'x-artifact-signature': `${'A'.repeat(86)}==` },
      },
    );
    expect(artifact.status, artifact.text).toBe(200);
    const update = await this.tp.http.post('/v1/operator/updates', {
      token: c.token,
      json: {
        artifact_id: artifact.body.data.artifact_id,
        target_type: 'device',
        target_ids: [device.deviceId],
      },
    });
    expect(update.status, update.text).toBe(200);
    const diagnostics = await this.tp.http.post(`/v1/operator/devices/${device.deviceId}/diagnostics`, {
      token: c.token,
    });
    expect(diagnostics.status, diagnostics.text).toBe(200);
    return {
      device_id: device.deviceId,
      site_id: tenant.siteId,
      operator_id: tenant.operatorId,
      command_id: stop.body.data.command_id,
      control_id: control.body.data.control_id,
      schedule_id: 'sch-auth',
      device_command_id: schedule.body.data.command_id,
      webhook_id: webhook.body.data.webhook_id,
      delivery_id: test.body.data.delivery_id,
      artifact_id: artifact.body.data.artifact_id,
      update_id: update.body.data.update_id,
      diagnostics_id: diagnostics.body.data.diagnostics_id,
    };
  };

  /** Starts the platform and makes the world (in beforeAll). */
  start = async (): Promise<AuthWorld> => {
    const tp = await startTestPlatform({ logLevel: 'debug' });
    const w = { tp } as AuthWorld;
    this.world = w;
    w.routes = tp.platform.routes;
    w.alpha = await createTenant(tp, 'Alpha');
    w.bravo = await createTenant(tp, 'Bravo');
    this.keep(w.alpha.clientSecret, w.bravo.clientSecret);
    this.keepToken(w.alpha.token);
    this.keepToken(w.bravo.token);
    w.readOnly = await this.newClient(w.alpha, ['read']);
    w.writeOnly = await this.newClient(w.alpha, ['write']);
    w.devA = await this.newDevice(w.alpha, 'A');
    w.devB = await this.newDevice(w.bravo, 'B');
    w.own = await this.resourcesOf(w.alpha, w.devA);
    w.foreign = await this.resourcesOf(w.bravo, w.devB);
    const { client, secret } = await createClientOf(tp, {
      operator_ids: [w.alpha.operatorId, w.bravo.operatorId],
      scopes: ['read', 'write'],
    });
    this.keep(secret);
    const aggregator = { token: await operatorToken(tp.http, client.client_id, secret) };
    this.keepToken(aggregator.token);
    w.aggregated = await this.resourcesOf(w.bravo, await this.newDevice(w.bravo, 'AGG'), aggregator);
    return w;
  };

  /**
   * Sends the route's valid request with the given Authorization header (or none); Alpha's ids unless given;
   * to the platform, or `via` another client (a validating proxy in front of it).
   */
  call = async (
    route: AnyRoute,
    authorization: string | undefined,
    ids?: Ids,
    via: HttpClient = this.tp.http,
  ): Promise<HttpResult> => {
    const target = ids ?? this.world!.own;
    const body = bodyOf(route, target);
    const raw = rawRequestOf(route);
    const headers = { ...raw?.headers, ...(authorization !== undefined ? { authorization } : {}) };
    return via.call(route.method, pathOf(route, target) + queryOf(route, target), {
      ...(Object.keys(headers).length > 0 ? { headers } : {}),
      ...(raw ? { raw: raw.body, contentType: raw.contentType } : body !== undefined ? { json: body } : {}),
    });
  };

  authed = () => this.world!.routes.filter((r) => r.auth.kind !== 'none');
  operatorRoutes = () => this.world!.routes.filter((r) => r.auth.kind === 'operator');
  deviceRoutes = () => this.world!.routes.filter((r) => r.auth.kind === 'device');
  upgrade = (headers: Record<string, string>, query: string) => streamUpgrade(this.tp, headers, query);

  /**
   * None of `secrets` appears in the platform's debug logs, nor a header that carries them: what
   * auth-matrix.test.ts's last test checks, for the files that took tests of its matrix with them (afterAll).
   */
  expectNoSecretLogged = (): void => {
    const text = this.tp.logs.join('\n');
    const found = [...this.secrets].filter((s) => s.length >= 16 && text.includes(s));
    expect(found).toEqual([]);
    expect(text).not.toMatch(/authorization|x-signature|bearer /i);
  };
}
