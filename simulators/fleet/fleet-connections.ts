/**
 * The fleet's connections to the platform, shared by every charger: a bounded keep-alive pool for short
 * requests, one long-poll connection per charger, and, under attested registration, each charger's own.
 * Counts the TLS connections opened (the summary's `connections`).
 */
import { createSecureContext } from 'node:tls';
import { Agent, Client } from 'undici';
import { type AttestedConnections, createAttestedConnections } from './attested-connections.js';
import { defaultConnections, type FleetOptions } from './fleet-options.js';

export interface FleetConnections {
  /** The pool every request but the long polls shares. */
  readonly pool: Agent;
  /** Makes one charger's long-poll connection (`charger-link.ts`). */
  pollConnection(): Client;
  /** With an enrolment CA, each charger's connections carry its own client certificate. */
  readonly attested: AttestedConnections | undefined;
  /** TLS connections opened so far: for requests, for long polls. */
  readonly opened: { requests: number; polls: number };
  /** Closes every long-poll connection (the first step of the stop). */
  closePolls(): Promise<void>;
  /** Closes the rest, once every agent has stopped. */
  close(): Promise<void>;
}

export function createFleetConnections(options: FleetOptions, count: number): FleetConnections {
  // One TLS context for every connection: building one per connection (what `connect: { ca }` does) parses
  // the CA again each time and costs milliseconds of CPU per connection.
  const connect = { secureContext: createSecureContext(options.ca !== undefined ? { ca: options.ca } : {}) };
  // Short requests share a bounded keep-alive pool: under load, a pool that opens a connection for every
  // request that finds none idle spends its CPU on TLS handshakes. Long polls hold their connection for the
  // whole wait, so they get a pool of their own with as many connections as chargers polling.
  const pool = new Agent({
    connect,
    keepAliveTimeout: 60_000,
    keepAliveMaxTimeout: 600_000,
    connections: options.connections ?? defaultConnections(count),
    pipelining: 1,
  });
  const opened = { requests: 0, polls: 0 };
  pool.on('connect', () => {
    opened.requests += 1;
  });
  // Each charger's long poll has a connection of its own (a `Client`, made at its first poll): in one pool of
  // thousands of connections, undici would look through them all for a free one on every poll.
  const pollConnections = new Set<Client>();
  const platformOrigin = new URL(options.platformUrl).origin;
  const pollConnection = (): Client => {
    const client = new Client(platformOrigin, {
      connect,
      keepAliveTimeout: 60_000,
      keepAliveMaxTimeout: 600_000,
      pipelining: 1,
    });
    client.on('connect', () => {
      opened.polls += 1;
    });
    pollConnections.add(client);
    return client;
  };
  const attested = options.enrolmentCa
    ? createAttestedConnections({
        enrolmentCa: options.enrolmentCa,
        platformCa: options.ca,
        origin: platformOrigin,
        onRequestConnect: () => {
          opened.requests += 1;
        },
        onPollConnection: (client) => {
          client.on('connect', () => {
            opened.polls += 1;
          });
          pollConnections.add(client);
        },
      })
    : undefined;
  return {
    pool,
    pollConnection,
    attested,
    opened,
    async closePolls() {
      await Promise.all([...pollConnections].map((c) => c.destroy().catch(() => undefined)));
    },
    async close() {
      // Every agent has stopped: nothing is in flight. (`close()` would reconnect idle clients on its way out.)
      await pool.destroy().catch(() => undefined);
      await attested?.close();
    },
  };
}
