import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenant, registerDevice, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

let tp: TestPlatform;
beforeAll(async () => {
  tp = await startTestPlatform();
});
afterAll(async () => {
  await tp.stop();
});

describe('GET /v1/openapi.json', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const res = await tp.http.get('/v1/openapi.json');
    expect(res.status).toBe(200);
    expect(res.headers['x-api-version']).toBe('1.3.0');
    expect(res.body.openapi).toBe('3.1.0');
    expect(res.body.info.version).toBe('1.3.0');
    const validator = new Validator();
    const result = await validator.validate(res.body);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('documents exactly the routes the server registers, and no other (but the dashboard/ redirect)', async () => {
    const registered = new Set<string>();
    const doc = (await tp.http.get('/v1/openapi.json')).body as {
      paths: Record<string, Record<string, unknown>>;
    };
    const documented = new Set<string>();
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const method of Object.keys(ops)) documented.add(`${method.toUpperCase()} ${path}`);
    }
    for (const r of tp.registeredRoutes)
      registered.add(`${r.method} ${r.url.replace(/:([A-Za-z0-9_]+)/g, '{$1}')}`);
    // A browser's redirect to /dashboard, no operation of the API (and a path Spectral refuses: trailing slash).
    expect([...registered].filter((r) => !documented.has(r))).toEqual(['GET /dashboard/']);
    expect([...documented].filter((d) => !registered.has(d))).toEqual([]);
    expect(registered.size).toBeGreaterThan(30);
  });

  it('gives every operation its security and error responses', async () => {
    const doc = (await tp.http.get('/v1/openapi.json')).body;
    const stop = doc.paths['/v1/operator/devices/{device_id}/connectors/{connector_id}/stop'].post;
    expect(stop.security).toEqual([{ operatorOAuth: ['write'] }]);
    for (const status of ['400', '401', '403', '404', '429', '500'])
      expect(stop.responses[status]).toBeDefined();
    const records = doc.paths['/v1/operator/charging-records'].get;
    expect(records.security).toEqual([{ operatorOAuth: ['read'] }]);
    const size = records.parameters.find((p: { name: string }) => p.name === 'size');
    expect(size).toMatchObject({ in: 'query', required: false });
    const heartbeat = doc.paths['/v1/device/heartbeat'].post;
    expect(heartbeat.security).toEqual([{ deviceBearer: [] }]);
    expect(heartbeat.requestBody.content['application/json'].schema.required).toEqual(
      expect.arrayContaining(['timestamp', 'status', 'fault_code']),
    );
    const token = doc.paths['/v1/operator/oauth/token'].post;
    // Client credentials in the body (no scheme), or as HTTP Basic; the body then needs only grant_type.
    expect(token.security).toEqual([{}, { clientBasic: [] }]);
    expect(doc.components.securitySchemes.clientBasic).toMatchObject({ type: 'http', scheme: 'basic' });
    expect(Object.keys(token.requestBody.content)).toEqual([
      'application/json',
      'application/x-www-form-urlencoded',
    ]);
    for (const media of Object.values(token.requestBody.content) as Array<{ schema: { required: string[] } }>)
      expect(media.schema.required).toEqual(['grant_type']);
    // The token response is the one response that is not enveloped.
    expect(token.responses['200'].content['application/json'].schema.properties.access_token).toBeDefined();
    expect(stop.responses['200'].content['application/json'].schema.properties.data).toBeDefined();
    expect(doc.components.securitySchemes.operatorOAuth.flows.clientCredentials.scopes).toHaveProperty(
      'write',
    );
  });
});

describe('GET /metrics on the metrics listener', () => {
  it('exposes requests, latencies, chargers, commands, subscribers and refusals in Prometheus format', async () => {
    const tenant = await createTenant(tp, 'Metrics Co');
    const dev = await registerDevice(tp, 'METRICS-1', tenant.siteId);
    await tp.http.post('/v1/device/heartbeat', {
      token: dev.token,
      json: { timestamp: new Date().toISOString(), status: 'online', fault_code: 0 },
    });
    await tp.http.post(`/v1/operator/devices/${dev.deviceId}/connectors/1/stop`, {
      token: tenant.token,
      json: {},
    });
    const res = await tp.metrics();
    expect(res.status).toBe(200);
    expect(String(res.headers['content-type'])).toMatch(/^text\/plain/);
    const text = res.text;
    expect(text).toMatch(
      /charger_platform_http_requests_total\{route="\/v1\/device\/heartbeat",method="POST",status="200",instance="[^"]+"\} 1/,
    );
    expect(text).toMatch(
      /charger_platform_http_request_duration_seconds_bucket\{le="0\.1",instance="[^"]+",route="\/v1\/device\/heartbeat",method="POST"\}/,
    );
    expect(text).toMatch(/charger_platform_chargers_online\{instance="[^"]+"\} 1\b/);
    expect(text).toMatch(/charger_platform_chargers_connected\{instance="[^"]+"\} 0\b/);
    expect(text).toMatch(/charger_platform_commands\{status="queued",instance="[^"]+"\} 1\b/);
    expect(text).toMatch(/charger_platform_stream_subscribers\{instance="[^"]+"\} 0\b/);
    expect(text).toContain('# TYPE charger_platform_rate_limit_refusals_total counter');
    // Upkeep: retention by kind (nothing aged out yet), its passes, and how far rollups trail ingest.
    expect(text).toMatch(
      /charger_platform_retention_pruned_rows_total\{kind="telemetry",instance="[^"]+"\} 0\b/,
    );
    expect(text).toMatch(/charger_platform_retention_passes\{instance="[^"]+"\} \d+\b/);
    expect(text).toMatch(/charger_platform_energy_rollup_lag_rows\{instance="[^"]+"\} \d+\b/);
    // Route patterns only: never an id in a label.
    expect(text).not.toContain(dev.deviceId);
  });

  it('is not served on the API port', async () => {
    const res = await tp.http.get('/metrics');
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ code: 3001 });
    expect(res.headers['x-api-version']).toBe('1.3.0');
    const doc = (await tp.http.get('/v1/openapi.json')).body;
    expect(doc.paths['/metrics']).toBeUndefined();
  });
});
