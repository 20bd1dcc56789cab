/**
 * `charger-agent diag --data-dir DIR [--json] [--timeout SECONDS]`: checks a technician can act on, each
 * `pass`, `warn`, `fail` or `skip` (a check that needs an earlier one that failed), with a hint.
 *
 * store → configuration → agent_process → dns → tcp → tls → token → round_trip → clock_skew → disk → logs
 *
 * What touches the platform, and why it does not disturb a running agent:
 * - `token`: a real `POST /v1/device/token` with the stored credentials. Tokens do not invalidate each other;
 *   the agent's own token stays valid. The new one is used for `round_trip` and then forgotten (never stored,
 *   never printed).
 * - `round_trip`: `GET /v1/device/commands?wait=0`, NOT a heartbeat. A heartbeat would record a status for the
 *   charger; both answer with the pending commands and mark them `delivered`, but delivered commands stay
 *   pending until the agent reports a status, so the agent still gets them at its next poll (at most one
 *   heartbeat period later). diag never acts on a command. Like any authenticated request it counts as a
 *   sign of life: a stopped agent's charger shows online for up to 90 s after a diag.
 * - `clock_skew`: `server_time` of that answer against the midpoint of the request (the agent's own method);
 *   without it (not registered, or the poll failed), the token answer's `Date` header (1 s resolution).
 * Every network step has its own timeout (default 5 s), so diag ends in bounded time even on a dead link.
 */

import { X509Certificate } from 'node:crypto';
import { promises as dns } from 'node:dns';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { open, statfs } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import { Agent, request } from 'undici';
import { z } from 'zod';
import { DeviceToken } from '../../shared/device-api.js';
import { ErrorResponse, envelopeOf } from '../../shared/envelope.js';
import { CLOCK_SKEW_WARN_SECONDS } from '../../shared/limits.js';
import { Timestamp } from '../../shared/primitives.js';
import { LOG_DIR, LOG_FILE } from '../logger.js';
import {
  AGENT_SCHEMA_VERSION,
  type AgentStore,
  agentStoreFile,
  type Identity,
} from '../store/agent-store.js';
import { AGENT_VERSION } from '../version.js';
import { bytes, clip, duration, signedSeconds } from './format.js';
import {
  agentProcessState,
  DEFAULT_DIAG_TIMEOUT_MS,
  isAgentProcessAlive,
  openStoreForReading,
  type StoreAccess,
  TECH_EXIT,
} from './read-store.js';

export type CheckStatus = 'pass' | 'warn' | 'fail' | 'skip';

export interface Check {
  name: string;
  status: CheckStatus;
  detail: string;
  /** What to do about it; null when there is nothing to do. */
  hint: string | null;
  duration_ms: number;
  /** Measured values for scripts (addresses, TLS version, days to expiry, skew...). */
  data?: Record<string, unknown>;
}

export interface DiagReport {
  /** True when no check failed (warnings and skips allowed). */
  ok: boolean;
  checked_at: string;
  data_dir: string;
  sn: string | null;
  device_id: string | null;
  platform_url: string | null;
  checks: Check[];
}

export interface DiagOptions {
  dataDir: string;
  /** Per network step, ms (default 5 s). */
  timeoutMs?: number;
  isAlive?: (pid: number) => boolean;
}

export { DEFAULT_DIAG_TIMEOUT_MS };

/** Below this much free space the outbox (16 MiB cap) and logs (20 MiB) may no longer fit. */
const DISK_WARN_BYTES = 50 * 1024 * 1024;
const DISK_FAIL_BYTES = 10 * 1024 * 1024;
/** Logs are capped at 4 files of 5 MiB; more means something else writes there. */
const LOGS_WARN_BYTES = 25 * 1024 * 1024;
const CERT_EXPIRY_WARN_DAYS = 30;
const SKEW_FAIL_MS = 60_000;
const LOG_TAIL_BYTES = 256 * 1024;
const DAY_MS = 86_400_000;

const TokenAnswer = envelopeOf(DeviceToken);
/** Commands are only counted, never parsed further: diag does not act on them. */
const PollAnswer = envelopeOf(z.object({ commands: z.array(z.unknown()), server_time: Timestamp }));

type Outcome = Omit<Check, 'name' | 'duration_ms'>;

const pass = (detail: string, data?: Record<string, unknown>): Outcome => ({
  status: 'pass',
  detail,
  hint: null,
  ...(data ? { data } : {}),
});
const warn = (detail: string, hint: string, data?: Record<string, unknown>): Outcome => ({
  status: 'warn',
  detail,
  hint,
  ...(data ? { data } : {}),
});
const fail = (detail: string, hint: string, data?: Record<string, unknown>): Outcome => ({
  status: 'fail',
  detail,
  hint,
  ...(data ? { data } : {}),
});
const skip = (detail: string): Outcome => ({ status: 'skip', detail, hint: null });

function errorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  const cause = error.cause instanceof Error ? ` (${error.cause.message})` : '';
  return `${typeof code === 'string' && !error.message.includes(code) ? `${code} ` : ''}${error.message}${cause}`;
}

function codeOf(error: unknown): string | undefined {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(Object.assign(new Error(`${what} timed out after ${ms} ms`), { code: 'ETIMEDOUT' })),
      ms,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

interface Target {
  url: URL;
  host: string;
  port: number;
  /** SNI and certificate name; undefined for an IP address. */
  servername: string | undefined;
}

function targetOf(platformUrl: string): Target | undefined {
  let url: URL;
  try {
    url = new URL(platformUrl);
  } catch {
    return undefined;
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const port = url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
  return { url, host, port, servername: net.isIP(host) ? undefined : host };
}

const NETWORK_HINT =
  'check the charger’s uplink (cellular signal and APN, Ethernet, VPN), the firewall between charger and platform, and that the platform is up';

function tcpHint(code: string | undefined, target: Target): string {
  switch (code) {
    case 'ECONNREFUSED':
      return `nothing accepts connections on ${target.host}:${target.port}: the platform is down or listens on another port — check --platform-url and the platform`;
    case 'ETIMEDOUT':
      return `no answer from ${target.host}:${target.port}: a firewall drops the traffic or the link is down — ${NETWORK_HINT}`;
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return `no route to ${target.host}: the charger has no working network route — ${NETWORK_HINT}`;
    case 'ECONNRESET':
      return `the connection was reset: a proxy or firewall may block it — ${NETWORK_HINT}`;
    default:
      return NETWORK_HINT;
  }
}

function tlsTrustHint(code: string | undefined, caFile: string | undefined): string {
  const ca = caFile
    ? `the CA file ${caFile} (--ca) does not hold the CA that signed the platform's certificate: install the right one (for a self-signed platform, its DIR/tls/cert.pem)`
    : 'the platform certificate is not signed by a CA the system trusts: give the agent the right CA with --ca FILE (in its --config), or fix the platform certificate chain';
  switch (code) {
    case 'CERT_HAS_EXPIRED':
      return 'the platform certificate has expired (or the charger clock is far ahead): renew the certificate, check the clock';
    case 'CERT_NOT_YET_VALID':
      return 'the platform certificate is not valid yet: the charger clock is probably behind — enable NTP';
    default:
      return ca;
  }
}

interface Ctx {
  dataDir: string;
  timeoutMs: number;
  store?: AgentStore;
  identity?: Identity;
  runConfig?: Record<string, unknown>;
  platformUrl?: string;
  target?: Target;
  caFile?: string;
  ca?: string;
  caProblem?: string;
  tcpOk?: boolean;
  tlsOk?: boolean;
  token?: string;
  /** Skew measured from the round trip (preferred) or the token answer's Date header. */
  skew?: { ms: number; source: string };
}

async function timed(name: string, run: () => Outcome | Promise<Outcome>): Promise<Check> {
  const started = performance.now();
  let outcome: Outcome;
  try {
    outcome = await run();
  } catch (error) {
    outcome = fail(
      `the check itself failed: ${errorText(error)}`,
      'report this with the output of diag --json',
    );
  }
  return { name, ...outcome, duration_ms: Math.round(performance.now() - started) };
}

function storeCheck(access: StoreAccess, ctx: Ctx): Outcome {
  if (!access.ok) return fail(access.message, access.hint);
  const store = access.store;
  const rows = store.db.pragma('integrity_check') as Array<{ integrity_check: string }>;
  const problems = rows.map((r) => r.integrity_check).filter((m) => m !== 'ok');
  const file = agentStoreFile(ctx.dataDir);
  let size = 0;
  for (const f of [file, `${file}-wal`]) {
    try {
      size += statSync(f).size;
    } catch {
      // no WAL file: the agent is stopped and checkpointed
    }
  }
  const mode = statSync(file).mode & 0o777;
  const data = { schema_version: access.schemaVersion, bytes: size, mode: mode.toString(8) };
  if (problems.length > 0) {
    return fail(
      `SQLite integrity_check: ${clip(problems.slice(0, 3).join('; '), 200)}`,
      'stop the agent, copy the data directory for analysis, then restore a backup or start from an empty data directory (the charger re-registers after an operator resets it)',
      { ...data, problems },
    );
  }
  const detail = `integrity ok, schema v${access.schemaVersion}, ${bytes(size)}`;
  if ((mode & 0o077) !== 0) {
    return warn(
      `${detail}; file mode ${mode.toString(8)}: others can read the device secret`,
      `chmod 600 ${file}`,
      data,
    );
  }
  if (access.schemaVersion < AGENT_SCHEMA_VERSION) {
    return warn(
      `${detail}; older schema`,
      'the agent migrates the store itself at its next start (keep the data directory)',
      data,
    );
  }
  return pass(detail, data);
}

function configurationCheck(ctx: Ctx): Outcome {
  const rc = ctx.runConfig;
  const notes: string[] = [];
  const warnings: Array<[string, string]> = [];
  const url = ctx.platformUrl;
  if (!url) {
    return fail(
      'no platform URL stored: the agent has not started with this data directory',
      'start the agent once with --platform-url (or "platform-url" in --config)',
    );
  }
  const target = ctx.target;
  if (!target) return fail(`platform URL ${url} is not a URL`, 'fix --platform-url (https://HOST:PORT)');
  if (target.url.protocol !== 'https:') {
    return fail(
      `platform URL ${url} is not https://`,
      'the platform serves HTTPS only: use https://HOST:PORT',
    );
  }
  notes.push(url);
  if (!rc) {
    warnings.push([
      'no run configuration stored',
      'start the agent with this version once; it records its configuration for diag',
    ]);
  }
  const sn = typeof rc?.sn === 'string' ? rc.sn : undefined;
  if (ctx.identity && sn && sn !== ctx.identity.sn) {
    return fail(
      `configured serial number ${sn} differs from the registered one (${ctx.identity.sn})`,
      `the agent refuses to start so: run it with --sn ${ctx.identity.sn}, or give ${sn} its own empty --data-dir`,
    );
  }
  if (
    ctx.identity &&
    rc &&
    typeof rc.platformUrl === 'string' &&
    rc.platformUrl !== ctx.identity.platformUrl
  ) {
    warnings.push([
      `registered at ${ctx.identity.platformUrl} but now configured for ${rc.platformUrl}`,
      'a charger keeps its identity only on the platform it registered with: check --platform-url',
    ]);
  }
  if (ctx.caFile) {
    if (ctx.caProblem) {
      return fail(
        `CA file ${ctx.caFile}: ${ctx.caProblem}`,
        'fix --ca (a PEM certificate file readable by the agent)',
      );
    }
    notes.push(`CA ${ctx.caFile}`);
  } else notes.push('system CAs');
  if (rc?.hal === 'simulated') {
    warnings.push(['simulated HAL', 'on a real charger run with --hal /path/to/the-oem-hal.js']);
  } else if (typeof rc?.hal === 'string') notes.push(`HAL ${rc.hal}`);
  if (rc?.logLevel === 'debug' || rc?.logLevel === 'trace') {
    warnings.push([
      `log level ${rc.logLevel}`,
      'verbose logs wear the flash: use "log-level": "info" in production',
    ]);
  }
  try {
    const mode = statSync(ctx.dataDir).mode & 0o777;
    if ((mode & 0o077) !== 0) {
      warnings.push([`data directory mode ${mode.toString(8)}`, `chmod 700 ${ctx.dataDir}`]);
    }
  } catch {
    // reported by the store check
  }
  const data = { ...(rc ?? {}), platformUrl: url };
  if (warnings.length > 0) {
    return warn(
      [...notes, ...warnings.map(([w]) => w)].join('; '),
      warnings.map(([, h]) => h).join('; '),
      data,
    );
  }
  return pass(notes.join('; '), data);
}

function processCheck(ctx: Ctx, isAlive: (pid: number) => boolean): Outcome {
  if (!ctx.store) return skip('needs the store');
  const proc = agentProcessState(ctx.store, isAlive);
  const data = { running: proc.running, pid: proc.pid ?? null, version: proc.version ?? null };
  if (proc.running) {
    return pass(`running (pid ${proc.pid}, v${proc.version ?? '?'})`, data);
  }
  return warn(
    `the agent is not running: ${proc.note}`,
    'start it (systemctl start charger-agent) and read why it stopped: journalctl -u charger-agent, DIR/logs/agent.log',
    data,
  );
}

async function dnsCheck(ctx: Ctx): Promise<Outcome> {
  const target = ctx.target;
  if (!target) return skip('needs a valid https:// platform URL');
  if (net.isIP(target.host))
    return pass(`${target.host} is an IP address: no lookup`, { addresses: [target.host] });
  try {
    const found = await withTimeout(dns.lookup(target.host, { all: true }), ctx.timeoutMs, 'DNS lookup');
    const addresses = found.map((a) => a.address);
    return pass(`${target.host} → ${addresses.join(', ')}`, { addresses });
  } catch (error) {
    const code = codeOf(error);
    return fail(
      `cannot resolve ${target.host}: ${errorText(error)}`,
      code === 'ENOTFOUND'
        ? `the name does not exist for this charger’s resolver: check the spelling in --platform-url and /etc/resolv.conf (or the DNS the cellular APN hands out)`
        : `the resolver does not answer: check /etc/resolv.conf and the uplink — ${NETWORK_HINT}`,
      { code: code ?? null },
    );
  }
}

async function tcpCheck(ctx: Ctx): Promise<Outcome> {
  const target = ctx.target;
  if (!target) return skip('needs a valid https:// platform URL');
  const started = performance.now();
  try {
    const remote = await new Promise<string>((resolve, reject) => {
      const socket = net.connect({ host: target.host, port: target.port });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(Object.assign(new Error(`no connection within ${ctx.timeoutMs} ms`), { code: 'ETIMEDOUT' }));
      }, ctx.timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        const address = `${socket.remoteAddress}:${socket.remotePort}`;
        socket.destroy();
        resolve(address);
      });
      socket.once('error', (error) => {
        clearTimeout(timer);
        socket.destroy();
        reject(error);
      });
    });
    const ms = Math.round(performance.now() - started);
    ctx.tcpOk = true;
    return pass(`connected to ${remote} in ${ms} ms`, { remote, connect_ms: ms });
  } catch (error) {
    const code = codeOf(error);
    return fail(
      `cannot connect to ${target.host}:${target.port}: ${errorText(error)}`,
      tcpHint(code, target),
      {
        code: code ?? null,
      },
    );
  }
}

async function tlsCheck(ctx: Ctx): Promise<Outcome> {
  const target = ctx.target;
  if (!target) return skip('needs a valid https:// platform URL');
  if (!ctx.tcpOk) return skip('needs a TCP connection');
  if (ctx.caProblem) return skip('the CA file cannot be used (see configuration)');
  let socket: tls.TLSSocket | undefined;
  try {
    socket = await new Promise<tls.TLSSocket>((resolve, reject) => {
      const s = tls.connect({
        host: target.host,
        port: target.port,
        ...(target.servername ? { servername: target.servername } : {}),
        ...(ctx.ca !== undefined ? { ca: ctx.ca } : {}),
        // Verified below, so that diag can say what exactly is wrong instead of a bare handshake error.
        rejectUnauthorized: false,
      });
      const timer = setTimeout(() => {
        s.destroy();
        reject(
          Object.assign(new Error(`no TLS handshake within ${ctx.timeoutMs} ms`), { code: 'ETIMEDOUT' }),
        );
      }, ctx.timeoutMs);
      s.once('secureConnect', () => {
        clearTimeout(timer);
        resolve(s);
      });
      s.once('error', (error) => {
        clearTimeout(timer);
        s.destroy();
        reject(error);
      });
    });
  } catch (error) {
    return fail(
      `TLS handshake with ${target.host}:${target.port} failed: ${errorText(error)}`,
      /protocol|version|cipher/i.test(errorText(error))
        ? 'the platform offers no TLS version or cipher this agent accepts (TLS 1.2 or newer): update the platform TLS settings'
        : `is the platform serving HTTPS on this port? — ${NETWORK_HINT}`,
      { code: codeOf(error) ?? null },
    );
  }
  try {
    const protocol = socket.getProtocol() ?? 'unknown';
    const peer = socket.getPeerX509Certificate();
    const authorized = socket.authorized;
    const authError = socket.authorizationError ? String(socket.authorizationError) : undefined;
    if (!peer) return fail('the platform sent no certificate', 'fix the platform TLS configuration');
    const validTo = Date.parse(peer.validTo);
    const validFrom = Date.parse(peer.validFrom);
    const now = Date.now();
    const daysLeft = Math.floor((validTo - now) / DAY_MS);
    const nameOk = net.isIP(target.host)
      ? peer.checkIP(target.host) !== undefined
      : peer.checkHost(target.host) !== undefined;
    const subject = peer.subject.replace(/\n/g, ', ');
    const data = {
      protocol,
      authorized,
      authorization_error: authError ?? null,
      subject,
      issuer: peer.issuer.replace(/\n/g, ', '),
      subject_alt_name: peer.subjectAltName ?? null,
      valid_from: new Date(validFrom).toISOString(),
      valid_to: new Date(validTo).toISOString(),
      days_to_expiry: daysLeft,
      fingerprint256: peer.fingerprint256,
    };
    const summary = `${protocol}, ${subject || '(no subject)'}, expires ${new Date(validTo).toISOString().slice(0, 10)} (${daysLeft} d)`;
    if (protocol !== 'TLSv1.2' && protocol !== 'TLSv1.3') {
      return fail(
        `${summary}: ${protocol} is older than TLS 1.2`,
        'enable TLS 1.2 or 1.3 on the platform',
        data,
      );
    }
    if (now < validFrom) {
      return fail(
        `${summary}: not valid before ${new Date(validFrom).toISOString()}`,
        tlsTrustHint('CERT_NOT_YET_VALID', ctx.caFile),
        data,
      );
    }
    if (now >= validTo) {
      return fail(`${summary}: EXPIRED`, tlsTrustHint('CERT_HAS_EXPIRED', ctx.caFile), data);
    }
    if (!authorized) {
      return fail(
        `${summary}: not trusted (${authError ?? 'unknown reason'})`,
        tlsTrustHint(authError, ctx.caFile),
        data,
      );
    }
    if (!nameOk) {
      return fail(
        `${summary}: not valid for ${target.host} (it names ${peer.subjectAltName ?? subject})`,
        `the certificate does not name ${target.host}: use the host name it was issued for in --platform-url, or reissue it with ${target.host} in its subjectAltName`,
        data,
      );
    }
    ctx.tlsOk = true;
    if (daysLeft < CERT_EXPIRY_WARN_DAYS) {
      return warn(
        `${summary}: expires in ${daysLeft} days`,
        'renew the platform certificate before it expires: chargers cannot connect after that',
        data,
      );
    }
    return pass(`${summary}, trusted, names ${target.host}`, data);
  } finally {
    socket.destroy();
  }
}

interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  sentAt: number;
  receivedAt: number;
}

async function call(
  ctx: Ctx,
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

function noteDateSkew(ctx: Ctx, answer: HttpAnswer): void {
  const date = answer.headers.date;
  const parsed = typeof date === 'string' ? Date.parse(date) : Number.NaN;
  if (Number.isNaN(parsed) || ctx.skew) return;
  // The Date header has 1 s resolution and is truncated: the server's instant lies in [date, date + 1 s).
  ctx.skew = { ms: parsed + 500 - (answer.sentAt + answer.receivedAt) / 2, source: 'Date header, ±0.5 s' };
}

async function tokenCheck(ctx: Ctx, dispatcher: Agent): Promise<Outcome> {
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

async function roundTripCheck(ctx: Ctx, dispatcher: Agent): Promise<Outcome> {
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

function skewCheck(ctx: Ctx): Outcome {
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

async function diskCheck(ctx: Ctx): Promise<Outcome> {
  let stats: Awaited<ReturnType<typeof statfs>>;
  try {
    stats = await statfs(ctx.dataDir);
  } catch (error) {
    return fail(`cannot stat the file system of ${ctx.dataDir}: ${errorText(error)}`, 'check --data-dir');
  }
  const free = stats.bavail * stats.bsize;
  const total = stats.blocks * stats.bsize;
  const detail = `${bytes(free)} free of ${bytes(total)} (${ctx.dataDir})`;
  const data = { free_bytes: free, total_bytes: total };
  const hint =
    'free space on the data partition: remove old files (not agent.sqlite*), check what else writes there; the agent needs room for its outbox (≤ 16 MiB) and logs (≤ 20 MiB)';
  if (free < DISK_FAIL_BYTES) return fail(detail, hint, data);
  if (free < DISK_WARN_BYTES) return warn(`${detail}: less than ${bytes(DISK_WARN_BYTES)}`, hint, data);
  return pass(detail, data);
}

async function recentErrors(
  file: string,
): Promise<{ count: number; latest?: { time: string; msg: string } }> {
  let handle: Awaited<ReturnType<typeof open>> | undefined;
  try {
    handle = await open(file, 'r');
    const { size } = await handle.stat();
    const length = Math.min(size, LOG_TAIL_BYTES);
    const buffer = Buffer.alloc(length);
    await handle.read(buffer, 0, length, size - length);
    const since = Date.now() - DAY_MS;
    let count = 0;
    let latest: { time: string; msg: string } | undefined;
    for (const line of buffer.toString('utf8').split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        const entry = JSON.parse(line) as { level?: number; time?: string; msg?: string };
        if ((entry.level ?? 0) >= 50 && entry.time && Date.parse(entry.time) >= since) {
          count += 1;
          latest = { time: entry.time, msg: entry.msg ?? '' };
        }
      } catch {
        // a line cut by the tail window
      }
    }
    return latest ? { count, latest } : { count };
  } catch {
    return { count: 0 };
  } finally {
    await handle?.close();
  }
}

async function logsCheck(ctx: Ctx): Promise<Outcome> {
  const dir = path.join(ctx.dataDir, LOG_DIR);
  let files: string[];
  try {
    files = readdirSync(dir);
  } catch {
    return warn(
      `no log directory at ${dir}`,
      'the agent has not logged here yet: is it running with this --data-dir?',
    );
  }
  let total = 0;
  for (const f of files) {
    try {
      total += statSync(path.join(dir, f)).size;
    } catch {
      // rotated away meanwhile
    }
  }
  const errors = await recentErrors(path.join(dir, LOG_FILE));
  const data = { dir, files: files.length, bytes: total, errors_last_24h: errors.count };
  const detail = `${files.length} file(s), ${bytes(total)} of 20 MiB cap (${dir})`;
  if (total > LOGS_WARN_BYTES) {
    return warn(
      `${detail}: larger than the agent writes`,
      `something else writes into ${dir}: remove foreign files`,
      data,
    );
  }
  if (errors.latest) {
    return warn(
      `${detail}, ${errors.count} error(s) in 24 h, latest ${errors.latest.time}: ${clip(errors.latest.msg, 120)}`,
      `read them: grep '"level":[56]0' ${path.join(dir, LOG_FILE)}`,
      data,
    );
  }
  return pass(`${detail}, no errors in 24 h`, data);
}

function loadCa(ctx: Ctx): void {
  const ca = ctx.runConfig?.ca;
  if (typeof ca !== 'string') return;
  ctx.caFile = ca;
  try {
    const pem = readFileSync(ca, 'utf8');
    const cert = new X509Certificate(pem);
    ctx.ca = pem;
    if (Date.parse(cert.validTo) <= Date.now())
      ctx.caProblem = `the CA certificate expired on ${cert.validTo}`;
  } catch (error) {
    ctx.caProblem =
      codeOf(error) === 'ENOENT' ? 'file not found' : `not a readable PEM certificate (${errorText(error)})`;
  }
}

export async function runDiag(options: DiagOptions): Promise<{ report: DiagReport; exitCode: number }> {
  const ctx: Ctx = { dataDir: options.dataDir, timeoutMs: options.timeoutMs ?? DEFAULT_DIAG_TIMEOUT_MS };
  const isAlive = options.isAlive ?? isAgentProcessAlive;
  const checks: Check[] = [];
  const access = openStoreForReading(options.dataDir);
  let dispatcher: Agent | undefined;
  try {
    checks.push(await timed('store', () => storeCheck(access, ctx)));
    if (access.ok) {
      ctx.store = access.store;
      const identity = access.store.getIdentity();
      if (identity) ctx.identity = identity;
      const rc = access.store.getState('run_config');
      if (rc) ctx.runConfig = rc;
      // What the agent runs with now (it moves its identity to a changed URL at start), else where it registered.
      const url = (typeof rc?.platformUrl === 'string' ? rc.platformUrl : undefined) ?? identity?.platformUrl;
      if (url) {
        ctx.platformUrl = url.replace(/\/+$/, '');
        const target = targetOf(ctx.platformUrl);
        if (target) ctx.target = target;
      }
      loadCa(ctx);
      checks.push(await timed('configuration', () => configurationCheck(ctx)));
      checks.push(await timed('agent_process', () => processCheck(ctx, isAlive)));
    } else {
      checks.push({ name: 'configuration', ...skip('needs the store'), duration_ms: 0 });
      checks.push({ name: 'agent_process', ...skip('needs the store'), duration_ms: 0 });
    }
    dispatcher = new Agent({
      connect: { timeout: ctx.timeoutMs, ...(ctx.ca !== undefined ? { ca: ctx.ca } : {}) },
      headersTimeout: ctx.timeoutMs,
      bodyTimeout: ctx.timeoutMs,
    });
    // Only what the agent would contact: an https:// URL (the configuration check fails anything else).
    if (ctx.target?.url.protocol !== 'https:') delete ctx.target;
    checks.push(await timed('dns', () => dnsCheck(ctx)));
    checks.push(await timed('tcp', () => tcpCheck(ctx)));
    checks.push(await timed('tls', () => tlsCheck(ctx)));
    if (access.ok) {
      const http = dispatcher;
      checks.push(await timed('token', () => tokenCheck(ctx, http)));
      checks.push(await timed('round_trip', () => roundTripCheck(ctx, http)));
    } else {
      checks.push({ name: 'token', ...skip('needs the store'), duration_ms: 0 });
      checks.push({ name: 'round_trip', ...skip('needs the store'), duration_ms: 0 });
    }
    checks.push(await timed('clock_skew', () => skewCheck(ctx)));
    if (existsSync(ctx.dataDir)) {
      checks.push(await timed('disk', () => diskCheck(ctx)));
      checks.push(await timed('logs', () => logsCheck(ctx)));
    } else {
      checks.push({ name: 'disk', ...skip(`${ctx.dataDir} does not exist`), duration_ms: 0 });
      checks.push({ name: 'logs', ...skip(`${ctx.dataDir} does not exist`), duration_ms: 0 });
    }
  } finally {
    delete ctx.token;
    if (access.ok) access.store.close();
    await dispatcher?.destroy().catch(() => undefined);
  }
  const ok = checks.every((c) => c.status !== 'fail');
  const report: DiagReport = {
    ok,
    checked_at: new Date().toISOString(),
    data_dir: options.dataDir,
    sn: ctx.identity?.sn ?? (typeof ctx.runConfig?.sn === 'string' ? ctx.runConfig.sn : null),
    device_id: ctx.identity?.deviceId ?? null,
    platform_url: ctx.platformUrl ?? null,
    checks,
  };
  const exitCode =
    !access.ok && (access.reason === 'missing' || access.reason === 'uninitialised')
      ? TECH_EXIT.notRegistered
      : ok
        ? TECH_EXIT.ok
        : TECH_EXIT.problem;
  return { report, exitCode };
}

const LABEL: Record<CheckStatus, string> = { pass: 'PASS', warn: 'WARN', fail: 'FAIL', skip: 'SKIP' };

export function renderDiag(report: DiagReport): string {
  const who = report.sn
    ? `${report.sn}${report.device_id ? ` (${report.device_id})` : ' (not registered)'}`
    : report.data_dir;
  const lines = [`charger-agent diag — ${who}${report.platform_url ? `, ${report.platform_url}` : ''}`, ''];
  const width = Math.max(...report.checks.map((c) => c.name.length));
  for (const c of report.checks) {
    lines.push(`${LABEL[c.status]}  ${c.name.padEnd(width)}  ${c.detail}`);
    if (c.hint && c.status !== 'pass') lines.push(`${' '.repeat(6 + width + 2)}hint: ${c.hint}`);
  }
  const failed = report.checks.filter((c) => c.status === 'fail').length;
  const warned = report.checks.filter((c) => c.status === 'warn').length;
  lines.push('');
  lines.push(
    failed === 0
      ? `All checks passed${warned > 0 ? ` (${warned} warning${warned > 1 ? 's' : ''})` : ''}.`
      : `${failed} check${failed > 1 ? 's' : ''} failed${warned > 0 ? `, ${warned} warning${warned > 1 ? 's' : ''}` : ''}.`,
  );
  return `${lines.join('\n')}\n`;
}
