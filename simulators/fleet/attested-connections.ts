import { createSecureContext } from 'node:tls';
import { Agent, Client } from 'undici';
import { chargerCertificate, checkEnrolmentCa, type EnrolmentCa } from './charger-certificates.js';

/**
 * Connections for a fleet under attested registration (DESIGN.md §18): a client certificate is per connection,
 * so each charger gets a small pool of its own and its own long-poll connection, both presenting the certificate
 * made for its serial — what `charger-agent run --client-cert/--client-key` does on a real charger.
 */
export interface AttestedConnections {
  /** The charger's pool and a maker of its long-poll connection (`charger-link.ts`). */
  forCharger(sn: string): Promise<{ pool: Agent; poll: () => Client }>;
  /** Closes every pool made (the poll connections are the caller's, through `onPollConnection`). */
  close(): Promise<void>;
}

export function createAttestedConnections(options: {
  enrolmentCa: EnrolmentCa;
  /** PEM of the CA that signed the platform's certificate; the system CAs otherwise. */
  platformCa?: string | undefined;
  origin: string;
  onRequestConnect: () => void;
  onPollConnection: (client: Client) => void;
}): AttestedConnections {
  const { keyType } = checkEnrolmentCa(options.enrolmentCa);
  const pools = new Set<Agent>();
  return {
    async forCharger(sn) {
      const identity = await chargerCertificate(sn, options.enrolmentCa, keyType);
      const connect = {
        secureContext: createSecureContext({
          ...(options.platformCa !== undefined ? { ca: options.platformCa } : {}),
          ...identity,
        }),
      };
      const pool = new Agent({ connect, keepAliveTimeout: 60_000, connections: 2, pipelining: 1 });
      pool.on('connect', options.onRequestConnect);
      pools.add(pool);
      const poll = () => {
        const client = new Client(options.origin, { connect, keepAliveTimeout: 60_000, pipelining: 1 });
        options.onPollConnection(client);
        return client;
      };
      return { pool, poll };
    },
    async close() {
      await Promise.all([...pools].map((p) => p.destroy().catch(() => undefined)));
    },
  };
}
