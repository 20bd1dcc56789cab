/**
 * The checks of the way to the platform, each bounded by the diag timeout: DNS, a TCP connection, and the TLS
 * handshake (trust, the certificate's name and expiry).
 */
import { promises as dns } from 'node:dns';
import net from 'node:net';
import tls from 'node:tls';
import type { DiagContext, Target } from './context.js';
import { codeOf, errorText, fail, type Outcome, pass, skip, warn, withTimeout } from './outcome.js';

const CERT_EXPIRY_WARN_DAYS = 30;

const DAY_MS = 86_400_000;

export const NETWORK_HINT =
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

export async function dnsCheck(ctx: DiagContext): Promise<Outcome> {
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

export async function tcpCheck(ctx: DiagContext): Promise<Outcome> {
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

export async function tlsCheck(ctx: DiagContext): Promise<Outcome> {
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
