/**
 * The agent's HTTP client for the charger surface (`/v1/device/...`), on undici.
 *
 * - Every response is checked against the shared zod schemas: a platform (or a proxy in between) that answers
 *   something unexpected produces a `PlatformError`, never a crash or a half-read value.
 * - Failures are classified once, here, so that every loop treats them alike: network errors, timeouts, 5xx,
 *   429 and malformed answers are retryable (429 carries the server's `retry_after`); other 4xx are permanent
 *   for that request.
 * - Authenticated calls take a `TokenSource`. On 401 with code 2002 (expired) — and also 2001, which is what a
 *   revoked or unknown token answers — the token is renewed and the request retried once.
 */
import { Agent, type Dispatcher, request } from 'undici';
import { z } from 'zod';
import {
  type ChargingRecordUpload,
  CommandStatusAck,
  type CommandStatusReport,
  type DeviceEvent,
  DeviceToken,
  FirmwareStatusAck,
  type FirmwareStatusReport,
  type HeartbeatRequest,
  type RegisterRequest,
  Registration,
  SecretRotated,
  TelemetryAccepted,
  TelemetryBatchAccepted,
  type TelemetryRecord,
  UploadAccepted,
} from '../shared/device-api.js';
import { ErrorResponse, envelopeOf } from '../shared/envelope.js';
import { ErrorCode } from '../shared/error-codes.js';
import { Identifier, Timestamp } from '../shared/primitives.js';
import { SIGNATURE_HEADER, signRequest, TIMESTAMP_HEADER } from '../shared/request-signing.js';
import { AGENT_VERSION } from './version.js';

export type FailureKind =
  /** No HTTP answer: DNS, TCP, TLS, reset, timeout. */
  | 'network'
  /** 5xx. */
  | 'server'
  /** 429. */
  | 'rate_limited'
  /** A 2xx whose body is not the documented envelope, or an error that is not an ErrorResponse. */
  | 'malformed'
  /** 401 that survived a token renewal (or on the credential endpoints). */
  | 'unauthorized'
  /** 403. */
  | 'forbidden'
  /** 404. */
  | 'not_found'
  /** 409. */
  | 'conflict'
  /** Any other 4xx: the request itself is wrong and will not get better by repeating it. */
  | 'rejected';

const RETRYABLE: ReadonlySet<FailureKind> = new Set(['network', 'server', 'rate_limited', 'malformed']);

export class PlatformError extends Error {
  readonly kind: FailureKind;
  readonly retryable: boolean;
  readonly status?: number;
  readonly code?: number;
  /** What the server asked us to wait, seconds (429). */
  readonly retryAfterSeconds?: number;
  readonly details?: Record<string, unknown>;
  constructor(
    kind: FailureKind,
    message: string,
    extra: {
      status?: number;
      code?: number;
      retryAfterSeconds?: number;
      details?: Record<string, unknown>;
      cause?: unknown;
    } = {},
  ) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.name = 'PlatformError';
    this.kind = kind;
    this.retryable = RETRYABLE.has(kind);
    if (extra.status !== undefined) this.status = extra.status;
    if (extra.code !== undefined) this.code = extra.code;
    if (extra.retryAfterSeconds !== undefined) this.retryAfterSeconds = extra.retryAfterSeconds;
    if (extra.details !== undefined) this.details = extra.details;
  }
}

export function isPlatformError(error: unknown): error is PlatformError {
  return error instanceof PlatformError;
}

/** `Retry-After`: delta-seconds or an HTTP date. */
export function parseRetryAfter(value: string | string[] | undefined, nowMs: number): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (raw === undefined || raw.trim() === '') return undefined;
  if (/^\d+$/.test(raw.trim())) return Number(raw.trim());
  const at = Date.parse(raw);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, Math.ceil((at - nowMs) / 1000));
}

function kindOfStatus(status: number): FailureKind {
  if (status === 429) return 'rate_limited';
  if (status >= 500) return 'server';
  if (status === 401) return 'unauthorized';
  if (status === 403) return 'forbidden';
  if (status === 404) return 'not_found';
  if (status === 409) return 'conflict';
  if (status === 408) return 'network';
  return 'rejected';
}

/** The error a non-2xx answer stands for. Pure, for tests. */
export function failureOf(
  status: number,
  body: unknown,
  headers: Record<string, string | string[] | undefined>,
  nowMs: number,
): PlatformError {
  const parsed = ErrorResponse.safeParse(body);
  const kind = kindOfStatus(status);
  const fromHeader = parseRetryAfter(headers['retry-after'], nowMs);
  if (!parsed.success) {
    return new PlatformError(kind, `HTTP ${status} without an error envelope`, {
      status,
      ...(fromHeader !== undefined ? { retryAfterSeconds: fromHeader } : {}),
    });
  }
  const { code, message, details } = parsed.data;
  const fromBody = details?.retry_after_seconds;
  const retryAfterSeconds =
    typeof fromBody === 'number' && Number.isFinite(fromBody) && fromBody >= 0 ? fromBody : fromHeader;
  return new PlatformError(kind, `HTTP ${status} code ${code}: ${message}`, {
    status,
    code,
    ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}),
    ...(details !== undefined ? { details } : {}),
  });
}

/**
 * A command as delivered, checked only as far as the agent needs to answer for it: a command with a valid id
 * but an unknown name or bad params must still be journaled and refused, not make the whole heartbeat fail.
 */
export const IncomingCommand = z.object({
  command_id: Identifier,
  command: z.string(),
  params: z.unknown(),
  expiry: z.string(),
});
export type IncomingCommand = z.infer<typeof IncomingCommand>;
const CommandsPayload = z.object({ commands: z.array(z.unknown()), server_time: Timestamp });

export interface CommandsReceived {
  commands: IncomingCommand[];
  /** Entries without even a usable command_id: they cannot be answered, only logged. */
  unusable: number;
  serverTime: string;
}

function commandsOf(data: z.infer<typeof CommandsPayload>): CommandsReceived {
  const commands: IncomingCommand[] = [];
  let unusable = 0;
  for (const item of data.commands) {
    const parsed = IncomingCommand.safeParse(item);
    if (parsed.success) commands.push(parsed.data);
    else unusable += 1;
  }
  return { commands, unusable, serverTime: data.server_time };
}

/** Envelope schemas, built once per data schema: building zod schemas on every response costs memory and CPU. */
const envelopes = new WeakMap<z.ZodType, z.ZodType>();
function envelopeSchema(schema: z.ZodType): z.ZodType {
  let envelope = envelopes.get(schema);
  if (!envelope) {
    envelope = envelopeOf(schema);
    envelopes.set(schema, envelope);
  }
  return envelope;
}

export interface TokenSource {
  /** A token valid now (renewed ahead of its expiry). */
  token(): Promise<string>;
  /** Discards the current token and obtains a new one (after a 401). */
  renew(): Promise<string>;
}

export interface PlatformClientOptions {
  baseUrl: string;
  /** PEM of the CA that signed the platform's certificate (`--ca`); the system CAs otherwise. */
  ca?: string;
  /** Overrides the connection pool entirely (tests: undici MockAgent). */
  dispatcher?: Dispatcher;
  /** Per request, ms; default 15 s. Long polls add their wait. */
  timeoutMs?: number;
  now?: () => number;
  /**
   * Signs authenticated writes (DESIGN.md §8) when it returns a key: the device secret, and the Unix second to
   * stamp (platform time — the platform refuses stamps more than 300 s off its clock).
   */
  signing?: () => { secret: string; timestampSeconds: number } | undefined;
}

export interface DeviceApi {
  heartbeat(body: HeartbeatRequest): Promise<CommandsReceived>;
  pollCommands(waitSeconds: number, signal?: AbortSignal): Promise<CommandsReceived>;
  reportCommandStatus(
    commandId: string,
    report: CommandStatusReport,
  ): Promise<z.infer<typeof CommandStatusAck>>;
  sendTelemetry(record: TelemetryRecord): Promise<z.infer<typeof TelemetryAccepted>>;
  sendTelemetryBatch(records: readonly TelemetryRecord[]): Promise<z.infer<typeof TelemetryBatchAccepted>>;
  sendEvents(events: readonly DeviceEvent[]): Promise<z.infer<typeof UploadAccepted>>;
  sendChargingRecords(records: readonly ChargingRecordUpload[]): Promise<z.infer<typeof UploadAccepted>>;
  reportFirmwareStatus(report: FirmwareStatusReport): Promise<z.infer<typeof FirmwareStatusAck>>;
  /** The old secret and its tokens stop working as soon as the platform answers: store the new one first. */
  rotateSecret(): Promise<z.infer<typeof SecretRotated>>;
}

export interface PlatformClient {
  readonly baseUrl: string;
  register(body: RegisterRequest): Promise<z.infer<typeof Registration>>;
  exchangeToken(deviceId: string, secret: string): Promise<z.infer<typeof DeviceToken>>;
  /** The authenticated surface, with `tokens` supplying (and renewing) the bearer token. */
  withTokens(tokens: TokenSource): DeviceApi;
  close(): Promise<void>;
}

interface Call {
  method: 'GET' | 'POST';
  path: string;
  body?: unknown;
  token?: string;
  signal?: AbortSignal;
  timeoutMs?: number;
}

interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

export function createPlatformClient(options: PlatformClientOptions): PlatformClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const now = options.now ?? Date.now;
  const timeoutMs = options.timeoutMs ?? 15_000;
  const ownDispatcher =
    options.dispatcher === undefined && options.ca !== undefined
      ? new Agent({ connect: { ca: options.ca }, keepAliveTimeout: 60_000 })
      : undefined;
  const dispatcher = options.dispatcher ?? ownDispatcher;

  async function send(call: Call): Promise<RawResponse> {
    const headers: Record<string, string> = {
      accept: 'application/json',
      'user-agent': `charger-agent/${AGENT_VERSION}`,
    };
    let body: string | undefined;
    if (call.body !== undefined) {
      body = JSON.stringify(call.body);
      headers['content-type'] = 'application/json';
    }
    if (call.token) {
      headers.authorization = `Bearer ${call.token}`;
      const key = call.method === 'POST' ? options.signing?.() : undefined;
      if (key) {
        // Over exactly the bytes sent; a retry is signed afresh (a signature is accepted once).
        headers[TIMESTAMP_HEADER] = String(key.timestampSeconds);
        headers[SIGNATURE_HEADER] = signRequest(
          key.secret,
          call.method,
          call.path,
          key.timestampSeconds,
          body ?? '',
        );
      }
    }
    const limit = call.timeoutMs ?? timeoutMs;
    let res: Dispatcher.ResponseData;
    try {
      res = await request(`${baseUrl}${call.path}`, {
        method: call.method,
        headers,
        body,
        ...(dispatcher ? { dispatcher } : {}),
        ...(call.signal ? { signal: call.signal } : {}),
        headersTimeout: limit,
        bodyTimeout: limit,
      });
    } catch (error) {
      throw new PlatformError('network', `${call.method} ${call.path}: ${describeNetworkError(error)}`, {
        cause: error,
      });
    }
    let text: string;
    try {
      text = await res.body.text();
    } catch (error) {
      throw new PlatformError('network', `${call.method} ${call.path}: reading the answer failed`, {
        cause: error,
      });
    }
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    return { status: res.statusCode, headers: res.headers, body: parsed };
  }

  function dataOf<S extends z.ZodType>(schema: S, call: Call, res: RawResponse): z.infer<S> {
    if (res.status < 200 || res.status > 299) throw failureOf(res.status, res.body, res.headers, now());
    const envelope = envelopeSchema(schema).safeParse(res.body);
    if (!envelope.success) {
      const issue = envelope.error.issues[0];
      const where = issue ? `${issue.path.join('.') || 'body'}: ${issue.message}` : 'unexpected body';
      throw new PlatformError('malformed', `${call.method} ${call.path}: malformed answer (${where})`, {
        status: res.status,
      });
    }
    return (envelope.data as { data: z.infer<S> }).data;
  }

  async function unauthenticated<S extends z.ZodType>(schema: S, call: Call): Promise<z.infer<S>> {
    return dataOf(schema, call, await send(call));
  }

  function withTokens(tokens: TokenSource): DeviceApi {
    async function authed<S extends z.ZodType>(schema: S, call: Omit<Call, 'token'>): Promise<z.infer<S>> {
      let res = await send({ ...call, token: await tokens.token() });
      if (res.status === 401) {
        const failure = failureOf(401, res.body, res.headers, now());
        if (failure.code === ErrorCode.TOKEN_EXPIRED || failure.code === ErrorCode.UNAUTHORIZED) {
          res = await send({ ...call, token: await tokens.renew() });
        }
      }
      return dataOf(schema, call, res);
    }
    return {
      async heartbeat(body) {
        return commandsOf(
          await authed(CommandsPayload, { method: 'POST', path: '/v1/device/heartbeat', body }),
        );
      },
      async pollCommands(waitSeconds, signal) {
        const wait = Math.max(0, Math.min(30, Math.floor(waitSeconds)));
        return commandsOf(
          await authed(CommandsPayload, {
            method: 'GET',
            path: `/v1/device/commands?wait=${wait}`,
            ...(signal ? { signal } : {}),
            timeoutMs: timeoutMs + wait * 1000,
          }),
        );
      },
      reportCommandStatus(commandId, report) {
        return authed(CommandStatusAck, {
          method: 'POST',
          path: `/v1/device/commands/${encodeURIComponent(commandId)}/status`,
          body: report,
        });
      },
      sendTelemetry(record) {
        return authed(TelemetryAccepted, { method: 'POST', path: '/v1/device/telemetry', body: record });
      },
      sendTelemetryBatch(records) {
        return authed(TelemetryBatchAccepted, {
          method: 'POST',
          path: '/v1/device/telemetry/batch',
          body: { records },
        });
      },
      sendEvents(events) {
        return authed(UploadAccepted, { method: 'POST', path: '/v1/device/events', body: { events } });
      },
      sendChargingRecords(records) {
        return authed(UploadAccepted, {
          method: 'POST',
          path: '/v1/device/charging-records',
          body: { records },
        });
      },
      reportFirmwareStatus(report) {
        return authed(FirmwareStatusAck, {
          method: 'POST',
          path: '/v1/device/firmware/status',
          body: report,
        });
      },
      rotateSecret() {
        return authed(SecretRotated, { method: 'POST', path: '/v1/device/secret/rotate', body: {} });
      },
    };
  }

  return {
    baseUrl,
    register(body) {
      return unauthenticated(Registration, { method: 'POST', path: '/v1/device/register', body });
    },
    exchangeToken(deviceId, secret) {
      return unauthenticated(DeviceToken, {
        method: 'POST',
        path: '/v1/device/token',
        body: { device_id: deviceId, device_secret: secret, grant_type: 'client_credentials' },
      });
    },
    withTokens,
    async close() {
      await ownDispatcher?.close();
    },
  };
}

function describeNetworkError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return `${typeof code === 'string' ? `${code} ` : ''}${error.message}${cause}`;
}
