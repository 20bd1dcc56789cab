/**
 * The checks against the platform API (see run-diag.ts for why they do not disturb a running agent): a token
 * exchange with the stored credentials, a command poll that acts on nothing, and the clock skew they measure.
 */
import { type Agent, request } from 'undici';
import * as z from 'zod/mini';
import { DeviceToken } from '../../../shared/device-api.js';
import { ErrorResponse, envelopeOf } from '../../../shared/envelope.js';
import { CLOCK_SKEW_WARN_SECONDS } from '../../../shared/limits.js';
import { Timestamp } from '../../../shared/primitives.js';
import { AGENT_VERSION } from '../../version.js';
import { clip, duration, signedSeconds } from '../format.js';
import type { DiagContext } from './context.js';
import { NETWORK_HINT } from './network-checks.js';
import { errorText, fail, type Outcome, pass, skip, warn } from './outcome.js';

const SKEW_FAIL_MS = 60_000;

const TokenAnswer = envelopeOf(DeviceToken);

/** Commands are only counted, never parsed further: diag does not act on them. */
const PollAnswer = envelopeOf(z.object({ commands: z.array(z.unknown()), server_time: Timestamp }));

interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  sentAt: number;
  receivedAt: number;
}

async function call(
  ctx: DiagContext,
  dispatcher: Agent,
  method: 'GET' | 'POST',
  pathAndQuery: string,
  options: { body?: unknown; token?: string } = {},
): Promise<HttpAnswer> {
  const headers: Record<string, string> = {
    accept: 'application/json',
    'user-agent': `charger-agent-diag/${AGENT_VERSION}`,
  };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  const sentAt = Date.now();
  const res = await request(`${ctx.platformUrl}${pathAndQuery}`, {
    method,
    headers,
    ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
    dispatcher,
    headersTimeout: ctx.timeoutMs,
    bodyTimeout: ctx.timeoutMs,
    signal: AbortSignal.timeout(ctx.timeoutMs),
  });
  const text = await res.body.text();
  const receivedAt = Date.now();
  let body: unknown;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: res.statusCode, headers: res.headers, body, sentAt, receivedAt };
}

function errorOf(answer: HttpAnswer): string {
  const parsed = ErrorResponse.safeParse(answer.body);
  return parsed.success
    ? `HTTP ${answer.status}, code ${parsed.data.code}: ${parsed.data.message}`
    : `HTTP ${answer.status} (not the platform's error format: a proxy in between?)`;
}

function answerHint(answer: HttpAnswer, what: 'token' | 'poll'): string {
  if (answer.status === 401) {
    return what === 'token'
      ? 'the platform refuses the stored device credentials: an operator may have reset this charger — a running agent registers again by itself (see `charger-agent status` and the log); if it cannot, ask the operator to reset the device'
      : 'the fresh token was refused: the charger was reset or revoked just now — run diag again';
  }
  if (answer.status === 429) return 'rate limited: wait a minute and run diag again';
  if (answer.status >= 500)
    return 'the platform has an internal problem: tell the platform operator (the agent retries by itself)';
  if (answer.status === 404)
    return 'the URL is not the charger platform API: check --platform-url (no path, https://HOST:PORT)';
  return 'unexpected answer: check --platform-url, and report the detail to the platform operator';
}

function noteDateSkew(ctx: DiagContext, answer: HttpAnswer): void {
  const date = answer.headers.date;
  const parsed = typeof date === 'string' ? Date.parse(date) : Number.NaN;
  if (Number.isNaN(parsed) || ctx.skew) return;
  // The Date header has 1 s resolution and is truncated: the server's instant lies in [date, date + 1 s).
  ctx.skew = { ms: parsed + 500 - (answer.sentAt + answer.receivedAt) / 2, source: 'Date header, ±0.5 s' };
}

export async function tokenCheck(ctx: DiagContext, dispatcher: Agent): Promise<Outcome> {
  if (!ctx.identity) {
    const last = ctx.store?.getState('last_error');
    return fail(
      'not registered: no device credentials stored yet',
      `the agent registers at its first successful contact with the platform; fix what the checks above report${last ? ` — its last error (${last.where}, ${last.at}): ${clip(last.message, 200)}` : ''}`,
    );
  }
  if (!ctx.tlsOk) return skip('needs a trusted TLS connection');
  const identity = ctx.identity;
  const ask = (secret: string) =>
    call(ctx, dispatcher, 'POST', '/v1/device/token', {
      body: { device_id: identity.deviceId, device_secret: secret, grant_type: 'client_credentials' },
    });
  let answer: HttpAnswer;
  let withPending = false;
  try {
    // The confirmed secret, which leaves a rotation under way to the agent. Only when the platform refuses it
    // is the stored new secret tried: the platform may have switched to it (the agent switches at its next
    // token renewal).
    answer = await ask(identity.secret);
    if (answer.status === 401 && identity.pendingSecret !== undefined) {
      answer = await ask(identity.pendingSecret);
      withPending = true;
    }
  } catch (error) {
    return fail(`POST /v1/device/token: ${errorText(error)}`, NETWORK_HINT);
  }
  const ms = answer.receivedAt - answer.sentAt;
  noteDateSkew(ctx, answer);
  if (answer.status !== 200) {
    return fail(`POST /v1/device/token: ${errorOf(answer)}`, answerHint(answer, 'token'), {
      status: answer.status,
    });
  }
  const parsed = TokenAnswer.safeParse(answer.body);
  if (!parsed.success) {
    return fail(
      'POST /v1/device/token answered 200 without a token',
      'something between the charger and the platform rewrites answers (a captive portal or proxy?), or --platform-url points elsewhere',
    );
  }
  const data: DeviceToken = parsed.data.data;
  ctx.token = data.access_token;
  const whose = withPending ? ' with the new secret of the rotation under way' : '';
  return pass(
    `issued${whose} in ${ms} ms, valid ${duration(data.expires_in * 1000)} (the agent’s own token is unaffected)`,
    { round_trip_ms: ms, expires_in: data.expires_in },
  );
}

export async function roundTripCheck(ctx: DiagContext, dispatcher: Agent): Promise<Outcome> {
  if (!ctx.token) return skip('needs a token');
  let answer: HttpAnswer;
  try {
    answer = await call(ctx, dispatcher, 'GET', '/v1/device/commands?wait=0', { token: ctx.token });
  } catch (error) {
    return fail(`GET /v1/device/commands: ${errorText(error)}`, NETWORK_HINT);
  }
  const ms = answer.receivedAt - answer.sentAt;
  if (answer.status !== 200) {
    return fail(`GET /v1/device/commands: ${errorOf(answer)}`, answerHint(answer, 'poll'), {
      status: answer.status,
    });
  }
  const parsed = PollAnswer.safeParse(answer.body);
  if (!parsed.success) {
    return fail('GET /v1/device/commands answered 200 without the expected body', 'check --platform-url');
  }
  const serverTime = Date.parse(parsed.data.data.server_time);
  if (!Number.isNaN(serverTime)) {
    ctx.skew = {
      ms: serverTime - (answer.sentAt + answer.receivedAt) / 2,
      source: 'server_time',
    };
  }
  const pending = parsed.data.data.commands.length;
  const beat = ctx.store?.getState('last_heartbeat');
  const agentSide = beat
    ? beat.ok
      ? ` (agent’s last heartbeat: ${beat.roundTripMs ?? '?'} ms)`
      : ` (agent’s last heartbeat FAILED: ${clip(beat.error ?? '?', 80)})`
    : '';
  return pass(`GET /v1/device/commands?wait=0 in ${ms} ms, ${pending} pending${agentSide}`, {
    round_trip_ms: ms,
    pending_commands: pending,
  });
}

export function skewCheck(ctx: DiagContext): Outcome {
  const stored = ctx.store?.getState('clock_skew');
  if (!ctx.skew) {
    if (stored) {
      return warn(
        `not measured now; the agent measured ${signedSeconds(stored.ms)} at ${stored.at}`,
        'the platform could not be reached: see the checks above',
        { skew_ms: stored.ms, source: 'stored' },
      );
    }
    return skip('needs an answer from the platform');
  }
  const ms = Math.round(ctx.skew.ms);
  const detail = `${signedSeconds(ms)} platform minus charger (${ctx.skew.source}${stored ? `; agent measured ${signedSeconds(stored.ms)}` : ''})`;
  const data = { skew_ms: ms, source: ctx.skew.source };
  const ntp =
    'enable time synchronisation (timedatectl set-ntp true, chrony or systemd-timesyncd) and check the RTC battery';
  if (Math.abs(ms) > SKEW_FAIL_MS) {
    return fail(`${detail}: schedules run at the wrong time`, ntp, data);
  }
  if (Math.abs(ms) > CLOCK_SKEW_WARN_SECONDS * 1000) {
    return warn(`${detail}: more than ${CLOCK_SKEW_WARN_SECONDS} s`, ntp, data);
  }
  return pass(detail, data);
}
