import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import SwaggerParser from '@apidevtools/swagger-parser';
import { Ajv2020 } from 'ajv/dist/2020.js';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { statusesOf, toOpenApiPath } from '../../platform/http/openapi.js';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { checkResponses, type OpenApiDocument, type RecordedResponse } from '../helpers/response-log.js';

/**
 * The OpenAPI document is exact (DESIGN.md §15): every status each operation answers, integers as integers
 * with their bounds, and `servers` naming the platform. What the rest of the suite receives is checked against
 * it at the end of every run (global-setup.ts); this file checks the document itself and that check.
 */

let tp: TestPlatform;
// biome-ignore lint/suspicious/noExplicitAny: the document is inspected field by field
let doc: any;
beforeAll(async () => {
  tp = await startTestPlatform();
  doc = (await tp.http.get('/v1/openapi.json')).body;
});
afterAll(async () => {
  await tp?.stop();
});

const operations = () =>
  Object.entries(
    doc.paths as Record<
      string,
      Record<string, { parameters?: unknown[]; responses: object; operationId?: string }>
    >,
  ).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ path, method, op })));

describe('the document', () => {
  it('is valid for @apidevtools/swagger-parser (OpenAPI 3.1, every $ref resolves)', async () => {
    const api = await SwaggerParser.validate(structuredClone(doc));
    expect(api.info.version).toBe('1.3.0');
  });

  it('declares, for every route of the table, each status it can answer', () => {
    for (const r of tp.platform.routes) {
      const op = doc.paths[toOpenApiPath(r.url)][r.method.toLowerCase()];
      expect({ route: `${r.method} ${r.url}`, statuses: Object.keys(op.responses).map(Number) }).toEqual({
        route: `${r.method} ${r.url}`,
        statuses: statusesOf(r),
      });
    }
    const stop = doc.paths['/v1/operator/devices/{device_id}/connectors/{connector_id}/stop'].post.responses;
    for (const s of ['200', '400', '401', '403', '404', '413', '415', '429', '500', '503'])
      expect(stop[s], s).toBeDefined();
    const rotate = doc.paths['/v1/device/secret/rotate'].post.responses;
    expect(Object.keys(rotate)).toEqual(['200', '400', '401', '413', '415', '429', '500', '503']);
    const sites = doc.paths['/v1/operator/sites'].get.responses;
    expect(Object.keys(sites)).toEqual(['200', '400', '401', '403', '429', '500', '503']);
  });

  it('gives the token endpoint its RFC 6749 error bodies and the stream its 426', () => {
    const token = doc.paths['/v1/operator/oauth/token'].post.responses;
    for (const s of ['400', '401', '413', '415'])
      expect(token[s].content['application/json'].schema).toEqual({
        $ref: '#/components/schemas/OAuthErrorResponse',
      });
    expect(token['401'].headers['WWW-Authenticate']).toBeDefined();
    expect(token['429']).toEqual({ $ref: '#/components/responses/E429' });
    const oauthError = doc.components.schemas.OAuthErrorResponse;
    expect(oauthError.required).toEqual(['code', 'message', 'error', 'error_description']);
    expect(oauthError.properties.error.enum).toEqual([
      'invalid_request',
      'invalid_client',
      'unsupported_grant_type',
      'invalid_scope',
    ]);
    const stream = doc.paths['/v1/operator/stream'].get.responses;
    expect(Object.keys(stream)).toEqual(['101', '400', '401', '403', '426', '429', '500', '503']);
    expect(stream['426'].content['application/json'].schema.$ref).toBe('#/components/schemas/ErrorResponse');
  });

  it('declares integer parameters as integers with their bounds, never as digit patterns', () => {
    const params = operations().flatMap(({ path, method, op }) =>
      ((op.parameters ?? []) as Array<{ name: string; in: string; schema: Record<string, unknown> }>).map(
        (p) => ({ at: `${method} ${path} ${p.in} ${p.name}`, ...p }),
      ),
    );
    const byName = (name: string) => params.filter((p) => p.name === name);
    for (const p of byName('connector_id'))
      expect({ at: p.at, schema: p.schema }).toEqual({
        at: p.at,
        schema: { type: 'integer', minimum: 1, maximum: 2_147_483_647 },
      });
    expect(byName('connector_id').length).toBeGreaterThanOrEqual(7);
    for (const p of byName('page'))
      expect(p.schema).toEqual({ default: 1, type: 'integer', minimum: 1, maximum: 1_000_000 });
    for (const p of byName('size'))
      expect(p.schema).toEqual({ default: 20, type: 'integer', minimum: 1, maximum: 100 });
    expect(byName('wait')).toEqual([
      expect.objectContaining({
        in: 'query',
        required: false,
        schema: { default: 0, type: 'integer', minimum: 0, maximum: 30 },
      }),
    ]);
    // No parameter is left as a string of digits (what an integer parsed from the URL looked like before).
    for (const p of params)
      expect(String(p.schema.pattern ?? ''), p.at).not.toMatch(/^\^(-\?)?\\d\{[\d,]+\}\$$/);
  });

  it('documents the artifact upload as a streamed binary body with its signature header', () => {
    const upload = doc.paths['/v1/operator/artifacts'].post;
    expect(upload.requestBody).toEqual({
      required: true,
      description: expect.any(String),
      content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } },
    });
    expect(upload.parameters).toContainEqual(
      expect.objectContaining({ name: 'x-artifact-signature', in: 'header', required: true }),
    );
    expect(upload.parameters.map((p: { name: string }) => p.name)).toEqual([
      'kind',
      'version',
      'target',
      'operator_id',
      'x-artifact-signature',
    ]);
    expect(Object.keys(upload.responses)).toEqual([
      '200',
      '400',
      '401',
      '403',
      '404',
      '409',
      '413',
      '415',
      '429',
      '500',
      '503',
    ]);
  });

  it("names the categories of a webhook delivery's last_error, never free text", () => {
    const deliveries = doc.paths['/v1/operator/webhooks/{webhook_id}/deliveries'].get.responses['200'];
    const item = deliveries.content['application/json'].schema.properties.data.properties.items.items;
    const lastError = JSON.stringify(item.properties.last_error);
    const categories = [
      'timeout',
      'connection_refused',
      'tls_error',
      'dns_error',
      'address_not_allowed',
      'http_status',
    ];
    expect(lastError).toContain(`"enum":${JSON.stringify(categories)}`);
    expect(item.required).toContain('last_error');
  });

  it('names the platform it was fetched from in servers', async () => {
    expect(doc.servers).toEqual([
      {
        url: tp.url,
        description: 'Production: this platform (where this document was fetched from)',
        'x-environment': 'production',
      },
    ]);
    // (A name the test certificate carries: undici checks the certificate against the Host asked.)
    const viaName = await tp.http.get('/v1/openapi.json', { headers: { host: 'localhost:8443' } });
    expect(viaName.body.servers[0].url).toBe('https://localhost:8443');
    const v6 = await tp.http.get('/v1/openapi.json', { headers: { host: '[::1]:8443' } });
    expect(v6.body.servers[0].url).toBe('https://[::1]:8443');
    // Anything else in Host is not echoed: the template with a variable instead.
    const lenient = new Agent({ connect: { ca: tp.ca, checkServerIdentity: () => undefined } });
    const odd = await request(`${tp.url}/v1/openapi.json`, {
      headers: { host: 'evil"/><script>' },
      dispatcher: lenient,
    }).then(async (res) => ({ status: res.statusCode, body: (await res.body.json()) as typeof doc }));
    await lenient.close();
    expect(odd.status).toBe(200);
    expect(odd.body.servers).toEqual([
      expect.objectContaining({ url: 'https://{host}', variables: { host: expect.any(Object) } }),
    ]);
    // The rest of the document is the same whatever the host.
    expect({ ...viaName.body, servers: [] }).toEqual({ ...doc, servers: [] });
  });

  it('generates client types with openapi-typescript in which integer parameters are numbers', async () => {
    const types = astToString(await openapiTS(structuredClone(doc)));
    const op = (path: string, method: string) => {
      const start = types.indexOf(`"${path}": {`);
      expect(start, path).toBeGreaterThan(0);
      const at = types.indexOf(`${method}: operations["`, start);
      const id = types.slice(at).match(/operations\["([^"]+)"\]/)![1]!;
      const body = types.slice(types.indexOf(`    ${id}: {`));
      return body.slice(0, body.indexOf('\n    };\n'));
    };
    const stop = op('/v1/operator/devices/{device_id}/connectors/{connector_id}/stop', 'post');
    expect(stop).toMatch(/path: \{\s+device_id: string;\s+connector_id: number;/);
    const records = op('/v1/operator/charging-records', 'get');
    expect(records).toMatch(/connector_id\?: number;/);
    expect(records).toMatch(/page\?: number;/);
    expect(records).toMatch(/size\?: number;/);
    expect(op('/v1/device/commands', 'get')).toMatch(/wait\?: number;/);
    const token = op('/v1/operator/oauth/token', 'post');
    expect(token).toMatch(/400: \{[\s\S]*components\["schemas"\]\["OAuthErrorResponse"\]/);
    expect(types).toMatch(
      /error: "invalid_request" \| "invalid_client" \| "unsupported_grant_type" \| "invalid_scope";/,
    );
  });
});

describe('a generated client (openapi-typescript)', () => {
  it('names every operation, and its types compile under strict TypeScript', async () => {
    const types = astToString(await openapiTS(structuredClone(doc)));
    const all = operations();
    // Each operation of `paths` refers to its named entry of `operations`, none is inline.
    const names = [...types.matchAll(/(get|put|post|delete|patch): operations\["([^"]+)"\];/g)].map(
      (m) => m[2],
    );
    // (The webhooks' operations too: they are named in the document's `webhooks`.)
    const webhooks = Object.values(doc.webhooks as Record<string, { post: { operationId: string } }>);
    const expected = [...all.map(({ op }) => op.operationId), ...webhooks.map((w) => w.post.operationId)];
    expect(names.sort()).toEqual(expected.sort());
    expect(new Set(names).size).toBe(all.length + webhooks.length);
    const file = join(tp.dataDir, 'api.d.ts');
    await writeFile(file, types);
    const program = ts.createProgram([file], { strict: true, noEmit: true, skipLibCheck: false });
    const diagnostics = ts
      .getPreEmitDiagnostics(program)
      .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    expect(diagnostics).toEqual([]);
  });
});

describe('the rules the server enforces, as the document states them', () => {
  const ajv = new Ajv2020({ strict: false, discriminator: true });
  const bodySchema = (path: string, media = 'application/json') =>
    ajv.compile(doc.paths[path].post.requestBody.content[media].schema);

  it.each([
    [
      'site without target_ids',
      { target_type: 'site', command: 'pause_charging', params: { duration: 60 } },
      false,
    ],
    [
      'operator without',
      { target_type: 'operator', command: 'pause_charging', params: { duration: 60 } },
      false,
    ],
    ['all without', { target_type: 'all', command: 'pause_charging', params: { duration: 60 } }, true],
    [
      'site with',
      { target_type: 'site', target_ids: ['SITE'], command: 'pause_charging', params: { duration: 60 } },
      true,
    ],
    [
      'a limit without its percent',
      { target_type: 'all', command: 'set_power_limit', params: { duration: 60 } },
      false,
    ],
    ['an unknown command', { target_type: 'all', command: 'explode', params: { duration: 60 } }, false],
  ])('flexibility, %s: the document and the server agree', async (_name, given, valid) => {
    const tenant = await createTenant(tp, `flex-${_name}`);
    const body = JSON.parse(JSON.stringify(given).replace('SITE', tenant.siteId));
    const validate = bodySchema('/v1/operator/control/flexibility');
    expect(validate(body), JSON.stringify(validate.errors)).toBe(valid);
    const res = await tp.http.post('/v1/operator/control/flexibility', { token: tenant.token, json: body });
    expect(res.status === 400, res.text).toBe(!valid);
  });

  it('flexibility: a bad field gives one error under the discriminator, not one per branch', () => {
    const validate = bodySchema('/v1/operator/control/flexibility');
    validate({ target_type: 'all', command: 'pause_charging', params: { duration: 0 } });
    expect(validate.errors).toHaveLength(1);
    expect(validate.errors![0]!.instancePath).toBe('/params/duration');
  });

  it('the token request with HTTP Basic: a body of grant_type alone is valid, and the server issues a token', async () => {
    const tenant = await createTenant(tp, 'basic-shape');
    for (const media of ['application/json', 'application/x-www-form-urlencoded'])
      expect(bodySchema('/v1/operator/oauth/token', media)({ grant_type: 'client_credentials' })).toBe(true);
    const res = await tp.http.post('/v1/operator/oauth/token', {
      raw: 'grant_type=client_credentials',
      contentType: 'application/x-www-form-urlencoded',
      headers: {
        authorization: `Basic ${Buffer.from(`${tenant.clientId}:${tenant.clientSecret}`).toString('base64')}`,
      },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.access_token).toEqual(expect.any(String));
  });

  it('the energy read names its rule across device_id and site_id', () => {
    const energy = doc.paths['/v1/operator/energy'].get;
    for (const name of ['device_id', 'site_id']) {
      const p = energy.parameters.find((x: { name: string }) => x.name === name);
      expect(p.description).toContain('exactly one of device_id and site_id');
    }
  });

  it('says that unknown query parameters are refused', () => {
    expect(doc.info.description).toContain('Unknown query parameters are refused');
    expect(doc.components.responses.E400.description).toContain(
      'refuses query parameters it does not declare',
    );
  });
});

describe('the check of recorded answers (run at the end of every test run)', () => {
  const answer = (r: Partial<RecordedResponse>): RecordedResponse => ({
    m: 'POST',
    p: '/v1/device/heartbeat',
    s: 400,
    ct: 'application/json',
    b: '{"code":1001,"message":"Invalid parameter status","details":{"field":"status","value":"x"}}',
    ...r,
  });

  it('accepts declared answers and leaves out what is not an operation', () => {
    const d = doc as OpenApiDocument;
    expect(
      checkResponses(d, [
        answer({}),
        answer({
          p: '/v1/operator/devices/dev_1/connectors/2/stop',
          s: 404,
          b: '{"code":3001,"message":"Device not found"}',
        }),
        answer({
          m: 'GET',
          p: '/v1/nope',
          s: 404,
          b: '{"code":3001,"message":"Route GET /v1/nope not found"}',
        }),
        answer({ m: 'OPTIONS', s: 204, ct: '', b: '' }),
        answer({ m: 'GET', p: '/healthz', s: 200, b: '{"status":"ok","version":"1.3.0","instance":"i"}' }),
      ]),
    ).toEqual([]);
  });

  it('refuses an undeclared status, a body off its schema and an undeclared media type', () => {
    const offenders = checkResponses(doc as OpenApiDocument, [
      answer({ s: 418 }),
      answer({
        s: 200,
        b: '{"code":0,"message":"success","data":{"commands":[],"server_time":"x","extra":1}}',
      }),
      answer({ s: 400, b: '{"code":1001,"message":"m","stack":"at x"}' }),
      answer({ s: 400, ct: 'text/html', b: '<h1>400</h1>' }),
      answer({ m: 'GET', p: '/v1/operator/sites', s: 409, b: '{"code":4001,"message":"m"}' }),
    ]);
    expect(offenders).toHaveLength(5);
    expect(offenders[0]).toMatch(/^POST \/v1\/device\/heartbeat: status 418 is not declared/);
    expect(offenders[1]).toMatch(/^POST \/v1\/device\/heartbeat 200: body does not match its schema/);
    expect(offenders[2]).toMatch(
      /400: body does not match its schema \(\/ must NOT have additional properties\)/,
    );
    expect(offenders[3]).toMatch(/media type "text\/html" is not one of application\/json/);
    expect(offenders[4]).toMatch(/^GET \/v1\/operator\/sites: status 409 is not declared/);
  });
});
