import { signRequest } from '../../shared/index.js';
import {
  createTenant,
  type HttpResult,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from './platform.js';

/**
 * Signed requests (spec "Optional request signing", DESIGN.md §8) for the signing tests (signing,
 * signing-required): `X-Signature` over METHOD + path-with-query + X-Timestamp + raw body, each part replaceable
 * to tamper with it, sent to the platform that `target()` returns with its tenant and charger.
 */

export interface SignedCall {
  method?: 'POST' | 'DELETE' | 'GET';
  path: string;
  body?: string;
  token: string;
  secret: string;
  /** Sign these instead of what is sent. */
  signPath?: string;
  signBody?: string;
  signMethod?: string;
  stamp?: number | string;
  /** Send this stamp instead of the signed one. */
  sendStamp?: string;
  signature?: string;
}

export const stopPath = (deviceId: string, connector = 1) =>
  `/v1/operator/devices/${deviceId}/connectors/${connector}/stop`;

interface SigningTarget {
  tp: TestPlatform;
  tenant: Awaited<ReturnType<typeof createTenant>>;
  dev: RegisteredDevice;
}

/** The signing tests' platform: two tenants, and a charger of the first. */
export async function startSigningPlatform(): Promise<
  SigningTarget & { other: Awaited<ReturnType<typeof createTenant>> }
> {
  const tp = await startTestPlatform();
  const tenant = await createTenant(tp, 'Signing Alpha');
  const other = await createTenant(tp, 'Signing Beta');
  const dev = await registerDevice(tp, 'SG-SN-1', tenant.siteId);
  return { tp, tenant, other, dev };
}

export function signedCalls(target: () => SigningTarget) {
  const nowSeconds = () => Math.floor(target().tp.platform.context.now() / 1000);

  function signedHeaders(c: SignedCall): Record<string, string> {
    const method = c.method ?? 'POST';
    const stamp = c.stamp ?? nowSeconds();
    const signature =
      c.signature ??
      signRequest(c.secret, c.signMethod ?? method, c.signPath ?? c.path, stamp, c.signBody ?? c.body ?? '');
    return { 'x-timestamp': c.sendStamp ?? String(stamp), 'x-signature': signature };
  }

  function send(c: SignedCall, headers: Record<string, string> = signedHeaders(c)): Promise<HttpResult> {
    return target().tp.http.call(c.method ?? 'POST', c.path, {
      token: c.token,
      headers,
      ...(c.body !== undefined ? { raw: c.body, contentType: 'application/json' } : {}),
    });
  }

  let ts = Date.UTC(2025, 2, 1);
  const telemetryBody = () => {
    ts += 1_000;
    return JSON.stringify({
      timestamp: new Date(ts).toISOString(),
      connector_id: 1,
      state: 'charging',
      power: 7,
    });
  };

  /** An operator write signed by the tenant's client. */
  const opStop = (extra: Partial<SignedCall> = {}): SignedCall => ({
    path: stopPath(target().dev.deviceId),
    body: JSON.stringify({ reason: 'user_request' }),
    token: target().tenant.token,
    secret: target().tenant.clientSecret,
    ...extra,
  });
  /** A charger write signed with its device secret. */
  const devTelemetry = (extra: Partial<SignedCall> = {}): SignedCall => ({
    path: '/v1/device/telemetry',
    body: telemetryBody(),
    token: target().dev.token,
    secret: target().dev.secret,
    ...extra,
  });

  return { nowSeconds, signedHeaders, send, telemetryBody, opStop, devTelemetry };
}
