import { constants, X509Certificate } from 'node:crypto';
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';

/**
 * The certificates the client presented at the TLS handshake, leaf first, then the rest of the chain it sent
 * (DESIGN.md §18). Nothing is verified here: the server only requests a certificate and lets every handshake
 * through, and domain/attestation.ts decides what the chain is worth. Empty for no certificate or plain TCP.
 */
export function presentedChain(socket: Socket): X509Certificate[] {
  if (!(socket instanceof TLSSocket)) return [];
  const chain: X509Certificate[] = [];
  const seen = new Set<string>();
  // A self-signed certificate is its own issuer: the walk ends where it loops.
  for (let c = socket.getPeerCertificate(true); c?.raw && chain.length < 8; c = c.issuerCertificate) {
    if (seen.has(c.fingerprint256)) break;
    seen.add(c.fingerprint256);
    try {
      chain.push(new X509Certificate(c.raw));
    } catch {
      break;
    }
  }
  return chain;
}

/**
 * The server's TLS options for attested registration (DESIGN.md §18): every handshake asks for a client
 * certificate but lets a client without one (or with any) through, since the register route judges the chain
 * itself. Sessions are not resumed: a resumed handshake carries no certificates, and OpenSSL then keeps only the
 * leaf, so a charger whose certificate comes from an intermediate would be refused. Nothing is asked otherwise,
 * so that browsers on the dashboard are not offered a certificate prompt.
 */
export function clientCertificateRequest(opts: { registration: string }) {
  return opts.registration === 'attested'
    ? { requestCert: true, rejectUnauthorized: false, secureOptions: constants.SSL_OP_NO_TICKET }
    : {};
}
