import { expect } from 'vitest';
import { createTenant, expectError, type HttpResult, type TestPlatform } from './platform.js';

/**
 * The charger-side calls of the device API tests (device-api, -tokens, -heartbeat, -telemetry) on the platform
 * that `platform()` returns (each file starts its own in beforeAll): registration, token exchange, heartbeat and
 * telemetry, the operator's view of a device, fresh serial numbers and tenants. The fake clock only moves forward.
 */

/** A 400/1001 naming exactly this field and echoing exactly this value. */
export function expectValidation(res: HttpResult, field: string, value: unknown): void {
  const body = expectError(res, 400, 1001);
  expect(body.details).toEqual({ field, value });
}

export function deviceCalls(platform: () => TestPlatform) {
  const advance = (ms: number): void => platform().advance(ms);
  const platformNow = (): number => platform().now();
  const isoNow = () => new Date(platformNow()).toISOString();

  let serial = 0;
  function sn(prefix = 'SN'): string {
    serial += 1;
    return `${prefix}-${process.pid}-${serial}-${Math.random().toString(36).slice(2, 8)}`;
  }
  let tenants = 0;
  function tenant() {
    tenants += 1;
    return createTenant(platform(), `tenant-${tenants}`);
  }

  const registration = (overrides: Record<string, unknown> = {}) => ({
    sn: sn(),
    model: 'Wallbox AC22',
    manufacturer: 'Acme',
    firmware_version: '2.4.1',
    ...overrides,
  });

  function register(body: unknown): Promise<HttpResult> {
    return platform().http.post('/v1/device/register', { json: body });
  }
  function deviceToken(body: unknown): Promise<HttpResult> {
    return platform().http.post('/v1/device/token', { json: body });
  }
  async function freshToken(deviceId: string, secret: string): Promise<string> {
    const res = await deviceToken({
      device_id: deviceId,
      device_secret: secret,
      grant_type: 'client_credentials',
    });
    expect(res.status).toBe(200);
    return res.body.data.access_token as string;
  }
  function heartbeat(
    token: string,
    body: unknown = { timestamp: isoNow(), status: 'online', fault_code: 0 },
  ) {
    return platform().http.post('/v1/device/heartbeat', { token, json: body });
  }
  function telemetry(token: string, body: unknown) {
    return platform().http.post('/v1/device/telemetry', { token, json: body });
  }
  async function operatorDevice(operatorToken: string, deviceId: string) {
    const res = await platform().http.get(`/v1/operator/devices/${deviceId}`, { token: operatorToken });
    expect(res.status).toBe(200);
    expect(res.body.code).toBe(0);
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
    return res.body.data as any;
  }

  return {
    advance,
    platformNow,
    isoNow,
    sn,
    tenant,
    registration,
    register,
    deviceToken,
    freshToken,
    heartbeat,
    telemetry,
    operatorDevice,
  };
}
