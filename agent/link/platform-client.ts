/**
 * The agent's HTTP client for the charger surface (`/v1/device/...`), on undici.
 *
 * - Every response is checked against the shared zod schemas: a platform (or a proxy in between) that answers
 *   something unexpected produces a `PlatformError`, never a crash or a half-read value.
 * - Failures are classified once, here, so that every loop treats them alike: network errors, timeouts, 5xx,
 *   429 and malformed answers are retryable (429 carries the server's `retry_after`); other 4xx are permanent
 *   for that request — when they are the platform's own refusal (its error envelope, with a code documented
 *   for the status). A 3xx or a 4xx page from a proxy in between is malformed, hence retried.
 *   (platform-errors.ts classifies; platform-answers.ts reads the answers.)
 * - Authenticated calls take a `TokenSource`. On 401 with code 2002 (expired) — and also 2001, which is what a
 *   revoked or unknown token answers — the token is renewed and the request retried once.
 */
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import * as z from 'zod/mini';
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
} from '../../shared/device-api.js';
import { DiagnosticsUploadState } from '../../shared/diagnostics.js';
import { ErrorCode } from '../../shared/error-codes.js';
import { SIGNATURE_HEADER, signRequest, TIMESTAMP_HEADER } from '../../shared/request-signing.js';
import { AGENT_VERSION } from '../version.js';
import { AnswerCollector, type Call, type RawResponse } from './answer-collector.js';
import { type ArtifactAnswer, ArtifactStream } from './artifact-stream.js';
import { CommandsPayload, type CommandsReceived, commandsOf, envelopeSchema } from './platform-answers.js';
import { failureOf, isPlatformError, PlatformError } from './platform-errors.js';
import { Agent, getGlobalDispatcher } from './undici-parts.js';

export { ANSWER_MAX_BYTES } from './answer-collector.js';

const USER_AGENT = `charger-agent/${AGENT_VERSION}`;

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
  /**
   * The charger's TLS client certificate (PEM, intermediates after it) and key (`--client-cert`,
   * `--client-key`), presented on every connection: attested registration (DESIGN.md §18).
   */
  clientCert?: { cert: string; key: string };
  /** Overrides the connection pool entirely (tests: undici MockAgent). */
  dispatcher?: Dispatcher;
  /** Per request, ms; default 15 s. Long polls add their wait. */
  timeoutMs?: number;
  /** How long an idle connection is kept, whatever longer the platform offers; default 60 s (tests shorten it). */
  keepAliveMs?: number;
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
  /**
   * Streams an update's artifact (DESIGN.md §19). With `from`, asks for the rest (`Range: bytes=from-`), and with
   * `ifRange` too (the sha256 the platform gives as its ETag), only if the file is still that one — a 200 then
   * means the whole file again. A refusal throws its PlatformError (404: no update for it; 429 with its wait).
   */
  downloadArtifact(artifactId: string, options?: ArtifactRequest): Promise<ArtifactBody>;
  /** How much of a diagnostics archive the platform holds (DESIGN.md §20), to resume an upload from there. */
  diagnosticsState(diagnosticsId: string): Promise<DiagnosticsUploadState>;
  /** Sends the archive from byte `first` to its end (`Content-Range`); `open` streams exactly those bytes. */
  uploadDiagnostics(diagnosticsId: string, part: DiagnosticsPart): Promise<DiagnosticsUploadState>;
}

export interface DiagnosticsPart {
  first: number;
  /** The whole archive's size. */
  size: number;
  open: () => Readable;
  signal?: AbortSignal;
  timeoutMs: number;
}

export interface ArtifactRequest {
  from?: number;
  ifRange?: string;
  signal?: AbortSignal;
}

/** A 2xx answer to `downloadArtifact`: its status (200 or 206), headers and body, read by the caller. */
export type ArtifactBody = Extract<ArtifactAnswer, { ok: true }>;

export interface PlatformClient {
  readonly baseUrl: string;
  register(body: RegisterRequest): Promise<z.infer<typeof Registration>>;
  exchangeToken(deviceId: string, secret: string): Promise<z.infer<typeof DeviceToken>>;
  /** The authenticated surface, with `tokens` supplying (and renewing) the bearer token. */
  withTokens(tokens: TokenSource): DeviceApi;
  close(): Promise<void>;
}

/** Below the platform's 75 s keep-alive (DESIGN.md §18), so that the agent is the one to close. */
export const KEEP_ALIVE_MS = 60_000;

export function createPlatformClient(options: PlatformClientOptions): PlatformClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const now = options.now ?? Date.now;
  const timeoutMs = options.timeoutMs ?? 15_000;
  // Idle connections close after 60 s, whatever longer the platform offers (its Keep-Alive says 75): the agent
  // closes first, so a request never races the platform's own close of an idle connection (DESIGN.md §18).
  const ownDispatcher =
    options.dispatcher === undefined
      ? new Agent({
          connect: {
            ...(options.ca !== undefined ? { ca: options.ca } : {}),
            ...options.clientCert,
          },
          keepAliveTimeout: options.keepAliveMs ?? KEEP_ALIVE_MS,
          keepAliveMaxTimeout: options.keepAliveMs ?? KEEP_ALIVE_MS,
        })
      : undefined;
  const dispatcher = options.dispatcher ?? ownDispatcher;

  const base = new URL(baseUrl);
  const origin = base.origin;
  const basePath = base.pathname.replace(/\/+$/, '');

  function send(call: Call): Promise<RawResponse> {
    const headers: Record<string, string> = {
      accept: 'application/json',
      'user-agent': USER_AGENT,
    };
    let body: string | undefined;
    if (call.body !== undefined) {
      body = JSON.stringify(call.body);
      headers['content-type'] = 'application/json';
    }
    const raw = call.raw ? call.raw.open() : undefined;
    if (call.raw) Object.assign(headers, call.raw.headers);
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
    return new Promise<RawResponse>((resolve, reject) => {
      const answer = new AnswerCollector(call, limit, resolve, reject);
      try {
        (dispatcher ?? getGlobalDispatcher()).dispatch(
          {
            origin,
            path: basePath + call.path,
            method: call.method,
            headers,
            body: raw ?? body,
            headersTimeout: limit,
            bodyTimeout: limit,
          },
          answer,
        );
      } catch (error) {
        answer.onResponseError(undefined, error as Error);
      }
    });
  }

  function dataOf<S extends z.core.$ZodType>(schema: S, call: Call, res: RawResponse): z.infer<S> {
    if (res.status < 200 || res.status > 299) throw failureOf(res.status, res.body, res.headers, now());
    const envelope = z.safeParse(envelopeSchema(schema), res.body);
    if (!envelope.success) {
      const issue = envelope.error.issues[0];
      const where = issue ? `${issue.path.join('.') || 'body'}: ${issue.message}` : 'unexpected body';
      throw new PlatformError('malformed', `${call.method} ${call.path}: malformed answer (${where})`, {
        status: res.status,
      });
    }
    return (envelope.data as { data: z.infer<S> }).data;
  }

  function streamArtifact(path: string, token: string, request: ArtifactRequest): Promise<ArtifactAnswer> {
    const headers: Record<string, string> = {
      accept: 'application/octet-stream',
      'user-agent': USER_AGENT,
      authorization: `Bearer ${token}`,
    };
    if (request.from !== undefined && request.from > 0) {
      headers.range = `bytes=${request.from}-`;
      if (request.ifRange !== undefined) headers['if-range'] = `"${request.ifRange}"`;
    }
    return new Promise<ArtifactAnswer>((resolve, reject) => {
      const handler = new ArtifactStream(`GET ${path}`, request.signal, resolve, reject);
      try {
        (dispatcher ?? getGlobalDispatcher()).dispatch(
          {
            origin,
            path: basePath + path,
            method: 'GET',
            headers,
            headersTimeout: timeoutMs,
            bodyTimeout: timeoutMs,
          },
          handler,
        );
      } catch (error) {
        handler.onResponseError(undefined, error as Error);
      }
    });
  }

  async function unauthenticated<S extends z.core.$ZodType>(schema: S, call: Call): Promise<z.infer<S>> {
    return dataOf(schema, call, await send(call));
  }

  function withTokens(tokens: TokenSource): DeviceApi {
    /**
     * A token for `call`. Failing to get one is not the platform's answer to `call`: a permanent refusal of the
     * token exchange must not read as a refusal of what `call` carries (the uplink drops what is refused), so
     * it is reported as `unauthorized`, which every loop retries.
     */
    async function bearer(call: Omit<Call, 'token'>, get: () => Promise<string>): Promise<string> {
      try {
        return await get();
      } catch (error) {
        if (!isPlatformError(error) || error.retryable || error.kind === 'unauthorized') throw error;
        throw new PlatformError(
          'unauthorized',
          `${call.method} ${call.path}: no device token: ${error.message}`,
          {
            ...(error.status !== undefined ? { status: error.status } : {}),
            ...(error.code !== undefined ? { code: error.code } : {}),
            cause: error,
          },
        );
      }
    }
    async function authed<S extends z.core.$ZodType>(
      schema: S,
      call: Omit<Call, 'token'>,
    ): Promise<z.infer<S>> {
      let res = await send({ ...call, token: await bearer(call, () => tokens.token()) });
      if (res.status === 401) {
        const failure = failureOf(401, res.body, res.headers, now());
        if (failure.code === ErrorCode.TOKEN_EXPIRED || failure.code === ErrorCode.UNAUTHORIZED) {
          res = await send({ ...call, token: await bearer(call, () => tokens.renew()) });
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
      diagnosticsState(diagnosticsId) {
        return authed(DiagnosticsUploadState, {
          method: 'GET',
          path: `/v1/device/diagnostics/${encodeURIComponent(diagnosticsId)}`,
        });
      },
      uploadDiagnostics(diagnosticsId, part) {
        const last = part.size - 1;
        return authed(DiagnosticsUploadState, {
          method: 'PUT',
          path: `/v1/device/diagnostics/${encodeURIComponent(diagnosticsId)}`,
          raw: {
            open: part.open,
            headers: {
              'content-type': 'application/octet-stream',
              'content-length': String(part.size - part.first),
              'content-range': `bytes ${part.first}-${last}/${part.size}`,
            },
          },
          ...(part.signal ? { signal: part.signal } : {}),
          timeoutMs: part.timeoutMs,
        });
      },
      async downloadArtifact(artifactId, request = {}) {
        const path = `/v1/device/artifacts/${encodeURIComponent(artifactId)}`;
        const call = { method: 'GET' as const, path };
        let answer = await streamArtifact(path, await bearer(call, () => tokens.token()), request);
        if (!answer.ok && answer.status === 401) {
          const failure = failureOf(401, answer.body, answer.headers, now());
          if (failure.code === ErrorCode.TOKEN_EXPIRED || failure.code === ErrorCode.UNAUTHORIZED)
            answer = await streamArtifact(path, await bearer(call, () => tokens.renew()), request);
        }
        if (!answer.ok) throw failureOf(answer.status, answer.body, answer.headers, now());
        return answer;
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
