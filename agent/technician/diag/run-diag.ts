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
import { existsSync } from 'node:fs';
import { Agent } from 'undici';
import {
  DEFAULT_DIAG_TIMEOUT_MS,
  isAgentProcessAlive,
  openStoreForReading,
  TECH_EXIT,
} from '../read-store.js';
import { type DiagContext, loadCa, targetOf } from './context.js';
import { diskCheck, logsCheck } from './host-checks.js';
import { dnsCheck, tcpCheck, tlsCheck } from './network-checks.js';
import { type Check, type Outcome, skip, timed } from './outcome.js';
import { roundTripCheck, skewCheck, tokenCheck } from './platform-checks.js';
import { configurationCheck, processCheck, storeCheck } from './store-checks.js';
import { timeZonesCheck } from './time-zone-checks.js';

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
  /**
   * Run only what lies on the charger: dns, tcp, tls, token and round_trip are skipped and nothing is sent
   * (the diagnostics archive, agent/diagnostics/). clock_skew then reports the skew the agent stored.
   */
  offline?: boolean;
}

const OFFLINE = 'offline: not run for a diagnostics archive';

export async function runDiag(options: DiagOptions): Promise<{ report: DiagReport; exitCode: number }> {
  const ctx: DiagContext = {
    dataDir: options.dataDir,
    timeoutMs: options.timeoutMs ?? DEFAULT_DIAG_TIMEOUT_MS,
  };
  const isAlive = options.isAlive ?? isAgentProcessAlive;
  const checks: Check[] = [];
  const access = openStoreForReading(options.dataDir);
  let dispatcher: Agent | undefined;
  const network = (name: string, run: () => Promise<Outcome>): Promise<Check> =>
    options.offline ? Promise.resolve({ name, ...skip(OFFLINE), duration_ms: 0 }) : timed(name, run);
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
    checks.push(await network('dns', () => dnsCheck(ctx)));
    checks.push(await network('tcp', () => tcpCheck(ctx)));
    checks.push(await network('tls', () => tlsCheck(ctx)));
    if (access.ok) {
      const http = dispatcher;
      checks.push(await network('token', () => tokenCheck(ctx, http)));
      checks.push(await network('round_trip', () => roundTripCheck(ctx, http)));
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
    checks.push(await timed('time_zones', () => timeZonesCheck(ctx)));
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
