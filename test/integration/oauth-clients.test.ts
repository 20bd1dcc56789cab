import * as oauth from 'oauth4webapi';
import * as openid from 'openid-client';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * The operator token endpoint as two real OAuth 2.0 client libraries see it (DESIGN.md §15): tokens with
 * client_secret_basic and client_secret_post, and each refusal surfaced as the library's typed OAuth error.
 *
 * `invalid_client` carries `WWW-Authenticate: Basic realm="charger-platform", error="invalid_client", …`
 * (RFC 6749 §5.2 requires the challenge when the client authenticated with HTTP Basic). Both libraries look at
 * that header before the body and throw their WWWAuthenticateChallengeError (status 401), whose parsed
 * challenge names `invalid_client`; the body with `error` is on its `response` too. The other refusals are ResponseBodyError with `.error`.
 */

let tp: TestPlatform;
let agent: Agent;
let readOnly: Awaited<ReturnType<typeof createTenant>>;
let both: Awaited<ReturnType<typeof createTenant>>;

/** fetch over undici trusting the platform's self-signed certificate. */
const fetchWithCa = ((url: string, init: RequestInit) =>
  undiciFetch(url, { ...(init as object), dispatcher: agent })) as unknown as typeof fetch;

beforeAll(async () => {
  tp = await startTestPlatform();
  agent = new Agent({ connect: { ca: tp.ca } });
  readOnly = await createTenant(tp, 'OAuth Read', ['read']);
  both = await createTenant(tp, 'OAuth Both', ['read', 'write']);
});
afterAll(async () => {
  await agent?.close();
  await tp?.stop();
});

const tokenEndpoint = () => `${tp.url}/v1/operator/oauth/token`;

/** Resolves to what a call threw (it must throw). */
async function thrown(call: () => Promise<unknown>): Promise<unknown> {
  try {
    await call();
  } catch (err) {
    return err;
  }
  throw new Error('expected the call to throw');
}

/** The ErrorResponse + RFC 6749 body the platform answered, as a library's error carries it. */
async function bodyOf(err: unknown): Promise<Record<string, unknown>> {
  if (err instanceof oauth.ResponseBodyError) return err.cause as Record<string, unknown>;
  if (err instanceof oauth.WWWAuthenticateChallengeError) return (await err.response.json()) as never;
  throw err;
}

async function expectInvalidClient(err: unknown): Promise<void> {
  expect(err).toBeInstanceOf(oauth.WWWAuthenticateChallengeError);
  const challenge = err as oauth.WWWAuthenticateChallengeError;
  expect(challenge.status).toBe(401);
  // The typed error names the OAuth error itself (the challenge's auth parameters).
  expect(challenge.cause).toEqual([
    {
      scheme: 'basic',
      parameters: {
        realm: 'charger-platform',
        error: 'invalid_client',
        error_description: 'Invalid client credentials',
      },
    },
  ]);
  expect(challenge.response.headers.get('cache-control')).toBe('no-store');
  expect(await bodyOf(err)).toEqual({
    code: 2001,
    message: 'Invalid client credentials',
    error: 'invalid_client',
    error_description: 'Invalid client credentials',
  });
}

function expectBodyError(err: unknown, error: string, status = 400): oauth.ResponseBodyError {
  expect(err, String(err)).toBeInstanceOf(oauth.ResponseBodyError);
  const e = err as oauth.ResponseBodyError;
  expect({ error: e.error, status: e.status }).toEqual({ error, status });
  expect(e.error_description).toBe((e.cause as { message: string }).message);
  expect(e.response.headers.get('cache-control')).toBe('no-store');
  return e;
}

describe('oauth4webapi', () => {
  const as = (): oauth.AuthorizationServer => ({ issuer: tp.url, token_endpoint: tokenEndpoint() });
  const options = () => ({ [oauth.customFetch]: fetchWithCa });

  async function grant(
    clientId: string,
    auth: oauth.ClientAuth,
    parameters: Record<string, string> = {},
  ): Promise<oauth.TokenEndpointResponse> {
    const client: oauth.Client = { client_id: clientId };
    const response = await oauth.clientCredentialsGrantRequest(as(), client, auth, parameters, options());
    return oauth.processClientCredentialsResponse(as(), client, response);
  }

  it('obtains a token with client_secret_basic and with client_secret_post, and the token works', async () => {
    const basic = await grant(both.clientId, oauth.ClientSecretBasic(both.clientSecret));
    expect(basic).toMatchObject({ token_type: 'bearer', expires_in: 86_400, scope: 'read write' });
    const post = await grant(readOnly.clientId, oauth.ClientSecretPost(readOnly.clientSecret), {
      scope: 'read',
    });
    expect(post).toMatchObject({ token_type: 'bearer', scope: 'read' });
    const sites = await tp.http.get('/v1/operator/sites', { token: post.access_token });
    expect(sites.status).toBe(200);
  });

  it('invalid_client: a wrong secret, by Basic and in the body; an unknown client', async () => {
    await expectInvalidClient(await thrown(() => grant(both.clientId, oauth.ClientSecretBasic('wrong'))));
    await expectInvalidClient(await thrown(() => grant(both.clientId, oauth.ClientSecretPost('wrong'))));
    await expectInvalidClient(await thrown(() => grant('cli_nobody', oauth.ClientSecretBasic('x'))));
  });

  it('unsupported_grant_type: a grant other than client_credentials', async () => {
    const client: oauth.Client = { client_id: both.clientId };
    const response = await oauth.genericTokenEndpointRequest(
      as(),
      client,
      oauth.ClientSecretBasic(both.clientSecret),
      'password',
      new URLSearchParams({ username: 'u', password: 'p' }),
      options(),
    );
    const err = expectBodyError(
      await thrown(() => oauth.processGenericTokenEndpointResponse(as(), client, response)),
      'unsupported_grant_type',
    );
    expect(err.cause).toMatchObject({ code: 1001, details: { field: 'grant_type', value: 'password' } });
  });

  it('invalid_scope: a scope the client is not granted', async () => {
    const err = expectBodyError(
      await thrown(() =>
        grant(readOnly.clientId, oauth.ClientSecretBasic(readOnly.clientSecret), { scope: 'read write' }),
      ),
      'invalid_scope',
    );
    expect(err.cause).toMatchObject({ code: 1001, details: { field: 'scope', value: 'read write' } });
  });

  it('invalid_request: no client_secret (a public client)', async () => {
    const err = expectBodyError(await thrown(() => grant(both.clientId, oauth.None())), 'invalid_request');
    expect(err.cause).toMatchObject({ code: 1001, details: { field: 'client_secret', value: '[redacted]' } });
  });
});

describe('openid-client', () => {
  function configuration(clientId: string, secret: string | undefined, auth?: openid.ClientAuth) {
    const config = new openid.Configuration(
      { issuer: tp.url, token_endpoint: tokenEndpoint() },
      clientId,
      secret,
      auth,
    );
    config[openid.customFetch] = fetchWithCa;
    return config;
  }

  it('obtains a token with client_secret_basic and with client_secret_post', async () => {
    const basic = configuration(
      both.clientId,
      both.clientSecret,
      openid.ClientSecretBasic(both.clientSecret),
    );
    const viaBasic = await openid.clientCredentialsGrant(basic);
    expect(viaBasic).toMatchObject({ token_type: 'bearer', scope: 'read write' });
    // client_secret_post is the library's default when given a secret.
    const post = configuration(readOnly.clientId, readOnly.clientSecret);
    const viaPost = await openid.clientCredentialsGrant(post, { scope: 'read' });
    expect(viaPost).toMatchObject({ token_type: 'bearer', scope: 'read' });
    const device = await tp.http.get('/v1/operator/sites', { token: viaPost.access_token });
    expect(device.status).toBe(200);
  });

  it('invalid_client: a wrong secret, by Basic and in the body', async () => {
    const basic = configuration(both.clientId, 'wrong', openid.ClientSecretBasic('wrong'));
    await expectInvalidClient(await thrown(() => openid.clientCredentialsGrant(basic)));
    await expectInvalidClient(
      await thrown(() => openid.clientCredentialsGrant(configuration(both.clientId, 'wrong'))),
    );
  });

  it('unsupported_grant_type, invalid_scope and invalid_request', async () => {
    const config = configuration(both.clientId, both.clientSecret);
    expectBodyError(
      await thrown(() => openid.genericGrantRequest(config, 'password', { username: 'u', password: 'p' })),
      'unsupported_grant_type',
    );
    const narrow = configuration(readOnly.clientId, readOnly.clientSecret);
    expectBodyError(
      await thrown(() => openid.clientCredentialsGrant(narrow, { scope: 'write' })),
      'invalid_scope',
    );
    const publicClient = configuration(both.clientId, undefined, openid.None());
    expectBodyError(await thrown(() => openid.clientCredentialsGrant(publicClient)), 'invalid_request');
  });
});

describe('the refusals on the wire', () => {
  const path = '/v1/operator/oauth/token';

  it('malformed bodies are invalid_request, keeping their ErrorResponse code and status', async () => {
    const cases: Array<[string, string, number, number]> = [
      ['{"client_id":', 'application/json', 400, 1002],
      ['grant_type=client_credentials', 'application/x-www-form-urlencoded', 400, 1001],
      ['x', 'text/plain', 415, 1002],
    ];
    for (const [raw, contentType, status, code] of cases) {
      const res = await tp.http.post(path, { raw, contentType });
      expect({ raw, status: res.status, code: res.body.code, error: res.body.error }).toEqual({
        raw,
        status,
        code,
        error: 'invalid_request',
      });
      expect(res.body.error_description).toBe(res.body.message);
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.headers['www-authenticate']).toBeUndefined();
    }
  });

  it('error_description keeps to RFC 6749’s character set', async () => {
    // An unknown key is ignored (RFC 6749 §3.2); a missing grant_type names the field in the message.
    const res = await tp.http.post(path, {
      json: { client_id: both.clientId, client_secret: both.clientSecret, 'é"\\': 1 },
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
    expect(res.body.details).toEqual({ field: 'grant_type', value: null });
    expect(res.body.message).toContain('"client_credentials"');
    expect(res.body.error_description).toMatch(/^[\x20\x21\x23-\x5b\x5d-\x7e]+$/);
  });

  it('a malformed Basic header is invalid_client; 429 stays a plain ErrorResponse with Retry-After', async () => {
    const malformed = await tp.http.post(path, {
      raw: 'grant_type=client_credentials',
      contentType: 'application/x-www-form-urlencoded',
      headers: { authorization: `Basic ${Buffer.from('no-colon').toString('base64')}` },
    });
    expect(malformed.status).toBe(401);
    expect(malformed.body).toMatchObject({ code: 2001, error: 'invalid_client' });
    expect(malformed.headers['www-authenticate']).toBe(
      'Basic realm="charger-platform", error="invalid_client", error_description="Invalid client credentials"',
    );

    const t = await createTenant(tp, 'OAuth Throttled', ['read']);
    let last = malformed;
    for (let i = 0; i < 11 && last.status !== 429; i++) {
      last = await tp.http.post(path, {
        json: { client_id: t.clientId, client_secret: 'wrong', grant_type: 'client_credentials' },
      });
    }
    expect(last.status).toBe(429);
    expect(last.body).toEqual({
      code: 5001,
      message: 'Too many requests',
      details: { retry_after_seconds: expect.any(Number) },
    });
    expect(Number(last.headers['retry-after'])).toBeGreaterThan(0);
    expect(last.headers['cache-control']).toBe('no-store');
  });
});
