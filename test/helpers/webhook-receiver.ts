import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { ensureSelfSignedCertificate } from '../../platform/http/tls.js';
import type { WebhookRow } from '../../platform/storage/store.js';

export interface ReceivedDelivery {
  id: string;
  /** The request's path and query: the endpoint's URL as registered, to tell endpoints apart. */
  path: string;
  timestamp: number;
  signature: string;
  body: string;
  /** The secrets whose signature the Standard Webhooks verifier accepted. */
  verifiedWith: string[];
  // biome-ignore lint/suspicious/noExplicitAny: events are inspected field by field
  event: any;
  /** The status answered; 0 while held, or if the sender went away first. */
  status: number;
}

export type Answer = { status: number; headers?: Record<string, string>; delayMs?: number };

/**
 * A real HTTPS webhook receiver on loopback that checks every delivery with `standardwebhooks` (the reference
 * verifier) against the secrets it is given, and answers as `respond` says (200 by default).
 */
export async function startWebhookReceiver(
  /** Another receiver's certificate, so that a platform trusting one trusts both. */
  sharedTls?: { cert: string; key: string },
) {
  const dir = await mkdtemp(join(tmpdir(), 'cp-receiver-'));
  const tls = sharedTls ?? (await ensureSelfSignedCertificate(dir));
  const received: ReceivedDelivery[] = [];
  const secrets = new Set<string>();
  let respond: (d: ReceivedDelivery) => Answer = () => ({ status: 200 });
  let server: Server | undefined;
  let port = 0;

  const listen = async () => {
    const s = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const headers = {
          'webhook-id': String(req.headers['webhook-id'] ?? ''),
          'webhook-timestamp': String(req.headers['webhook-timestamp'] ?? ''),
          'webhook-signature': String(req.headers['webhook-signature'] ?? ''),
        };
        const verifiedWith: string[] = [];
        let event: unknown;
        for (const secret of secrets) {
          try {
            event = new Webhook(secret).verify(body, headers);
            verifiedWith.push(secret);
          } catch {
            // not signed with this secret (or too old / too new)
          }
        }
        const d: ReceivedDelivery = {
          id: headers['webhook-id'],
          path: req.url ?? '',
          timestamp: Number(headers['webhook-timestamp']),
          signature: headers['webhook-signature'],
          body,
          verifiedWith,
          event,
          status: 0,
        };
        const answer = verifiedWith.length > 0 ? respond(d) : { status: 401 };
        received.push(d);
        // `status` is set once the answer is sent: a held answer the sender never got stays 0.
        const send = () => {
          if (res.destroyed) return;
          d.status = answer.status;
          res.writeHead(answer.status, answer.headers);
          res.end();
        };
        if (answer.delayMs) setTimeout(send, answer.delayMs);
        else send();
      });
    });
    await new Promise<void>((resolve) => s.listen(port, '127.0.0.1', resolve));
    port = (s.address() as AddressInfo).port;
    server = s;
  };
  await listen();

  return {
    ca: tls.cert,
    tls: { cert: tls.cert, key: tls.key },
    /** The receiver's own certificate as a file, for `NODE_EXTRA_CA_CERTS` (none with a shared one). */
    caPath: sharedTls ? undefined : join(dir, 'tls', 'cert.pem'),
    get url() {
      return `https://127.0.0.1:${port}/hooks`;
    },
    received,
    /** Deliveries whose signature verified, of one type. */
    // biome-ignore lint/suspicious/noExplicitAny: see ReceivedDelivery.event
    events(type?: string): any[] {
      return received
        .filter((d) => d.verifiedWith.length > 0 && (!type || d.event.type === type))
        .map((d) => d.event);
    },
    trust(secret: string) {
      secrets.add(secret);
    },
    distrust(secret: string) {
      secrets.delete(secret);
    },
    answer(fn: (d: ReceivedDelivery) => Answer) {
      respond = fn;
    },
    /** Stops listening (connections refused) until `restart`, on the same port. */
    async stop() {
      const s = server;
      server = undefined;
      if (!s) return;
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    },
    restart: listen,
    async close() {
      const s = server;
      server = undefined;
      if (s) {
        s.closeAllConnections();
        await new Promise<void>((resolve) => s.close(() => resolve()));
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
export type WebhookReceiver = Awaited<ReturnType<typeof startWebhookReceiver>>;

/** A stored endpoint as the repository keeps it, for the storage-level tests. */
export function webhookRow(id: string, extra: Partial<WebhookRow> = {}): WebhookRow {
  return {
    webhook_id: id,
    client_id: 'cli_a',
    url: `https://example.com/${id}`,
    events: ['*'],
    description: null,
    status: 'enabled',
    disabled_reason: null,
    secret_sealed: 'sealed',
    previous_secret_sealed: null,
    previous_secret_until_ms: null,
    failing_since_ms: null,
    created_ms: 0,
    updated_ms: 0,
    ...extra,
  };
}
