/**
 * The operator API as the dashboard calls it: same origin, bearer token, the spec's envelope unwrapped, and every
 * error kept as the API words it (`ApiError.message`, `code`, `details`). Requests carry no cookies
 * (`credentials: 'omit'`): the token is the only credential, and the browser never answers the token endpoint's
 * Basic challenge with a password prompt of its own.
 */

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: number | undefined,
    readonly details: Record<string, unknown> | undefined,
  ) {
    super(message);
  }

  /** The message, then the field it names, as the API gave them. */
  describe(): string {
    const field = typeof this.details?.field === 'string' ? this.details.field : undefined;
    const retry = this.details?.retry_after_seconds;
    const parts = [this.message];
    // The API's messages usually name the field already ("Invalid parameter duration: ...").
    if (field && !this.message.includes(field)) parts.push(`(field: ${field})`);
    if (typeof retry === 'number') parts.push(`(retry after ${retry} s)`);
    if (this.code !== undefined) parts.push(`[${this.code}]`);
    return parts.join(' ');
  }
}

export interface Api {
  get<T>(path: string, query?: Record<string, string | number | undefined>): Promise<T>;
  post<T>(path: string, body?: unknown): Promise<T>;
  put<T>(path: string, body: unknown): Promise<T>;
  patch<T>(path: string, body: unknown): Promise<T>;
  del<T>(path: string): Promise<T>;
  /** A file the API serves (not enveloped), read whole with the token: save it through a Blob URL. */
  blob(path: string): Promise<Blob>;
}

export interface TokenAnswer {
  access_token: string;
  expires_in: number;
  scope?: string;
}

/** Client credentials for a token (`POST /v1/operator/oauth/token`, not enveloped). */
export async function requestToken(clientId: string, clientSecret: string): Promise<TokenAnswer> {
  const response = await fetchOrExplain('/v1/operator/oauth/token', {
    method: 'POST',
    credentials: 'omit',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: clientSecret,
    }),
  });
  const body = await readJson(response);
  if (!response.ok) throw errorFrom(response, body);
  const token = body as Partial<TokenAnswer>;
  if (typeof token.access_token !== 'string' || typeof token.expires_in !== 'number') {
    throw new ApiError('The token endpoint answered without a token', response.status, undefined, undefined);
  }
  return { access_token: token.access_token, expires_in: token.expires_in, scope: token.scope };
}

/**
 * `onUnauthorized` runs when the API refuses the token (expired or revoked: 401), so that the page signs out
 * instead of showing the same error everywhere.
 */
export function createApi(token: string, onUnauthorized: (error: ApiError) => void): Api {
  const send = async (method: string, path: string, body?: unknown, accept = 'application/json') => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const response = await fetchOrExplain(path, {
      method,
      credentials: 'omit',
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!response.ok) {
      const error = errorFrom(response, await readJson(response));
      if (response.status === 401) onUnauthorized(error);
      throw error;
    }
    return response;
  };
  const call = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const envelope = (await readJson(await send(method, path, body))) as { code?: number; data?: T };
    return envelope.data as T;
  };
  return {
    get: (path, query) => call('GET', withQuery(path, query)),
    post: (path, body) => call('POST', path, body ?? {}),
    put: (path, body) => call('PUT', path, body),
    patch: (path, body) => call('PATCH', path, body),
    del: (path) => call('DELETE', path),
    blob: async (path) => {
      const response = await send('GET', path, undefined, '*/*');
      try {
        return await response.blob();
      } catch {
        throw new ApiError('The download was cut off; try again', response.status, undefined, undefined);
      }
    },
  };
}

export function withQuery(path: string, query?: Record<string, string | number | undefined>): string {
  if (!query) return path;
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') params.set(k, String(v));
  const q = params.toString();
  return q ? `${path}?${q}` : path;
}

async function fetchOrExplain(path: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(path, init);
  } catch {
    throw new ApiError(
      'The platform cannot be reached; check the connection and try again',
      0,
      undefined,
      undefined,
    );
  }
}

async function readJson(response: Response): Promise<unknown> {
  const text = await response.text();
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function errorFrom(response: Response, body: unknown): ApiError {
  return errorFromBody(response.status, response.statusText, body);
}

export function errorFromBody(status: number, statusText: string, body: unknown): ApiError {
  const b = (body ?? {}) as { code?: unknown; message?: unknown; details?: unknown };
  const message = typeof b.message === 'string' ? b.message : `HTTP ${status} ${statusText}`;
  const details =
    typeof b.details === 'object' && b.details !== null ? (b.details as Record<string, unknown>) : undefined;
  return new ApiError(message, status, typeof b.code === 'number' ? b.code : undefined, details);
}

/** Any failure as a line for the page: an API error as the API worded it. */
export function describeError(err: unknown): string {
  if (err instanceof ApiError) return err.describe();
  return err instanceof Error ? err.message : String(err);
}
