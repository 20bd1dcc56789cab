/**
 * What the checks learn as they go and hand on to the next: the stored identity and configuration, the
 * platform target, the CA, whether TCP and TLS worked, the fresh token and the measured clock skew.
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import type { AgentStore, Identity } from '../../store/agent-store.js';
import { codeOf, errorText } from './outcome.js';

export interface Target {
  url: URL;
  host: string;
  port: number;
  /** SNI and certificate name; undefined for an IP address. */
  servername: string | undefined;
}

export function targetOf(platformUrl: string): Target | undefined {
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

export interface DiagContext {
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

export function loadCa(ctx: DiagContext): void {
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
