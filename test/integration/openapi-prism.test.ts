import { type ChildProcess, spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_REFERENCE_ASSETS } from '../../platform/http/api-reference-page.js';
import type { AnyRoute } from '../../platform/http/route-spec.js';
import { AuthMatrix, type AuthWorld } from '../helpers/auth-matrix.js';
import { key } from '../helpers/auth-matrix-requests.js';
import { REPO_ROOT } from '../helpers/cli.js';
import { type HttpClient, type HttpResult, httpClient } from '../helpers/platform.js';

/**
 * A session through Prism's validating proxy (`@stoplight/prism-cli`, issue 38) in front of a real platform: every
 * operation of the route table with its valid request, HTTP Basic client authentication, the flexibility and
 * energy rules, and bad inputs. Prism checks each request and each answer against the served document and says
 * what it found in `sl-violations`. No answer may break the document, no request the platform accepts may break
 * it, and a request Prism finds invalid must be one the platform refuses.
 */

const PRISM = join(REPO_ROOT, 'node_modules', '@stoplight', 'prism-cli', 'dist', 'index.js');

interface Violation {
  location: string[];
  severity: string;
  code: string | number;
  message: string;
}
interface Exchange {
  label: string;
  status: number;
  violations: Violation[];
}

const matrix = new AuthMatrix();
let w: AuthWorld;
let prism: ChildProcess;
let viaPrism: HttpClient;
const exchanges: Exchange[] = [];

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return typeof address === 'object' && address ? address.port : 0;
}

/** Prism's proxy to the platform, once it says it listens. */
async function startPrism(documentFile: string, caFile: string, upstream: string): Promise<string> {
  const port = await freePort();
  prism = spawn(process.execPath, [PRISM, 'proxy', documentFile, upstream, '--port', String(port)], {
    env: { ...process.env, NODE_EXTRA_CA_CERTS: caFile, FORCE_COLOR: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`Prism did not start:\n${output}`)), 60_000);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Prism is listening')) {
        clearTimeout(timer);
        resolve();
      }
    };
    prism.stdout!.on('data', read);
    prism.stderr!.on('data', read);
    prism.once('exit', (code) => reject(new Error(`Prism exited (${code}):\n${output}`)));
  });
  return `http://127.0.0.1:${port}`;
}

function violationsOf(res: HttpResult): Violation[] {
  const header = res.headers['sl-violations'];
  return typeof header === 'string' ? (JSON.parse(header) as Violation[]) : [];
}

function noted(label: string, res: HttpResult): HttpResult {
  exchanges.push({ label, status: res.status, violations: violationsOf(res) });
  return res;
}

const responseViolations = (e: Exchange) => e.violations.filter((v) => v.location[0] === 'response');
const requestViolations = (e: Exchange) => e.violations.filter((v) => v.location[0] === 'request');

beforeAll(async () => {
  w = await matrix.start();
  const documentFile = join(w.tp.dataDir, 'openapi.json');
  const caFile = join(w.tp.dataDir, 'ca.pem');
  await writeFile(documentFile, (await w.tp.http.get('/v1/openapi.json')).text);
  await writeFile(caFile, w.tp.ca);
  viaPrism = httpClient(await startPrism(documentFile, caFile, w.tp.url), w.tp.ca);
}, 90_000);

afterAll(async () => {
  prism?.kill();
  await viaPrism?.close();
  await w?.tp.stop();
});

/** The right credential for a route of the table. */
function credentialOf(route: AnyRoute): string | undefined {
  if (route.auth.kind === 'operator') return `Bearer ${w.alpha.token}`;
  if (route.auth.kind === 'device') return `Bearer ${w.devA.token}`;
  return undefined;
}

describe('a session through Prism (validating proxy) in front of the platform', () => {
  it('every operation of the table with its valid request: nothing flagged', async () => {
    // Operations that end something (a DELETE) go last, so the others still find what they name.
    const ordered = [...w.routes].sort(
      (a, b) => Number(a.method === 'DELETE') - Number(b.method === 'DELETE'),
    );
    for (const route of ordered) {
      if (route.auth.kind === 'none') continue; // the token endpoint: below, in both of its shapes
      noted(key(route), await matrix.call(route, credentialOf(route), undefined, viaPrism));
    }
    const flagged = exchanges.filter((e) => e.violations.length > 0);
    expect(flagged).toEqual([]);
    expect(exchanges.length).toBeGreaterThan(60);
  });

  it('the operations outside the table (but the WebSocket stream): health, readiness, reference, dashboard, document', async () => {
    const paths = [
      '/healthz',
      '/readyz',
      '/docs',
      ...API_REFERENCE_ASSETS.map((name) => `/docs/assets/${name}`),
      '/dashboard',
      '/dashboard/assets/dashboard.js',
      '/dashboard/assets/dashboard.css',
      '/v1/openapi.json',
    ];
    for (const path of paths) {
      const res = noted(`GET ${path}`, await viaPrism.get(path));
      expect({ path, status: res.status, violations: violationsOf(res) }).toEqual({
        path,
        status: 200,
        violations: [],
      });
    }
  });

  it('the token endpoint: credentials in a JSON body, in a form body, and as HTTP Basic', async () => {
    const { clientId, clientSecret } = w.alpha;
    const json = noted(
      'token, JSON body',
      await viaPrism.post('/v1/operator/oauth/token', {
        json: { client_id: clientId, client_secret: clientSecret, grant_type: 'client_credentials' },
      }),
    );
    const form = noted(
      'token, form body',
      await viaPrism.post('/v1/operator/oauth/token', {
        raw: new URLSearchParams({
          client_id: clientId,
          client_secret: clientSecret,
          grant_type: 'client_credentials',
        }).toString(),
        contentType: 'application/x-www-form-urlencoded',
      }),
    );
    const basic = noted(
      'token, HTTP Basic',
      await viaPrism.post('/v1/operator/oauth/token', {
        raw: 'grant_type=client_credentials',
        contentType: 'application/x-www-form-urlencoded',
        headers: { authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}` },
      }),
    );
    for (const res of [json, form, basic]) {
      expect(res.status, res.text).toBe(200);
      expect(violationsOf(res)).toEqual([]);
    }
  });

  it('the rules and bad inputs: the platform refuses with a documented answer whatever Prism flags', async () => {
    const token = w.alpha.token;
    const flex = (body: unknown) => viaPrism.post('/v1/operator/control/flexibility', { token, json: body });
    const pause = { command: 'pause_charging', params: { duration: 60 } };
    const cases: Array<[string, Promise<HttpResult>, number]> = [
      ['flexibility, site without target_ids', flex({ target_type: 'site', ...pause }), 400],
      ['flexibility, operator without target_ids', flex({ target_type: 'operator', ...pause }), 400],
      [
        'flexibility, a bad duration',
        flex({ target_type: 'all', command: 'pause_charging', params: { duration: 0 } }),
        400,
      ],
      ['flexibility, an unknown field', flex({ target_type: 'all', ...pause, colour: 'red' }), 400],
      ['flexibility, all', flex({ target_type: 'all', ...pause }), 200],
      [
        'energy without device_id or site_id',
        viaPrism.get(
          `/v1/operator/energy?start_time=${new Date(Date.now() - 3_600_000).toISOString()}&end_time=${new Date().toISOString()}`,
          { token },
        ),
        400,
      ],
      [
        'energy with both',
        viaPrism.get(
          `/v1/operator/energy?device_id=${w.devA.deviceId}&site_id=${w.alpha.siteId}&start_time=${new Date(Date.now() - 3_600_000).toISOString()}&end_time=${new Date().toISOString()}`,
          { token },
        ),
        400,
      ],
      ['an unknown query parameter', viaPrism.get(`/v1/operator/devices?colour=red`, { token }), 400],
      [
        'a query parameter where none is taken',
        viaPrism.get(`/v1/operator/devices/${w.devA.deviceId}?x=1`, { token }),
        400,
      ],
      ['page 0', viaPrism.get('/v1/operator/devices?page=0', { token }), 400],
      ['a missing device', viaPrism.get('/v1/operator/devices/dev_missing', { token }), 404],
      ['no token', viaPrism.get('/v1/operator/devices'), 401],
      [
        'a device token on an operator read',
        viaPrism.get('/v1/operator/devices', { token: w.devA.token }),
        401,
      ],
      [
        'a stream ticket with a read-only token',
        viaPrism.post('/v1/operator/stream/tickets', { token: w.readOnly.token }),
        200,
      ],
      [
        'a write-only token on a read',
        viaPrism.get('/v1/operator/devices', { token: w.writeOnly.token }),
        403,
      ],
      [
        'telemetry without its state',
        viaPrism.post('/v1/device/telemetry', {
          token: w.devA.token,
          json: { timestamp: new Date().toISOString(), connector_id: 1 },
        }),
        400,
      ],
      [
        'a heartbeat with a bad status',
        viaPrism.post('/v1/device/heartbeat', {
          token: w.devA.token,
          json: { timestamp: new Date().toISOString(), status: 'sleepy', fault_code: 0 },
        }),
        400,
      ],
    ];
    for (const [label, sent, status] of cases) {
      const res = noted(label, await sent);
      expect({ label, status: res.status }, res.text).toEqual({ label, status });
    }
    const mine = exchanges.filter((e) => cases.some(([label]) => label === e.label));
    // No answer breaks the document; a request Prism finds invalid is one the platform refused.
    expect(mine.filter((e) => responseViolations(e).length > 0)).toEqual([]);
    expect(mine.filter((e) => requestViolations(e).length > 0 && e.status < 400)).toEqual([]);
    // The rules the document states are seen by Prism too.
    const flaggedRequests = mine.filter((e) => requestViolations(e).length > 0).map((e) => e.label);
    expect(flaggedRequests).toEqual(
      expect.arrayContaining([
        'flexibility, site without target_ids',
        'flexibility, operator without target_ids',
        'flexibility, a bad duration',
        'flexibility, an unknown field',
        'page 0',
        'no token',
        'telemetry without its state',
        'a heartbeat with a bad status',
      ]),
    );
  });
});
