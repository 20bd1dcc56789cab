import type { WebSocket } from 'ws';

/**
 * The live telemetry stream (DESIGN.md §8). Subscribers are indexed by device and by site, so a telemetry POST
 * costs one map lookup per index and one JSON serialisation, whatever the number of subscribers. Tenancy is
 * checked on every message against the principal directory, so a charger moved to another tenant's site stops
 * streaming to the old one at once. A subscriber that falls more than 1 MiB behind is closed (4008) instead of
 * being buffered without bound or slowing anyone else. With several instances, the subscription sets held are
 * also registered with the others (`SubscriptionRegistry`), so that a duplicate is refused on any of them.
 */
export interface Subscriber {
  socket: WebSocket;
  clientId: string;
  operatorIds: readonly string[];
  tokenExpiresMs: number;
  /** The client secret generation of the token it opened with: a revocation or a rotation's end closes it. */
  tokenGen: number;
  key: string | undefined;
  deviceIds: readonly string[];
  siteIds: readonly string[];
  alive: boolean;
  /** This connection's name in the subscription registry (unique across instances and restarts). */
  connectionId: string;
  /** Subscribe messages received so far (each is numbered as it arrives)... */
  requests: number;
  /** ... and the number of the one whose set is in place: an earlier one still waiting on the registry is dropped. */
  applied: number;
  /** Keys this connection's subscribe messages are claiming in the registry now, with how many claims each. */
  claiming: Map<string, number>;
}

/**
 * Who holds each subscription set across the instances of one platform (DESIGN.md §13): the spec's "one
 * connection per client_id per subscription set" then holds whichever instance a connection reaches. Keys are
 * the stream's subscription keys (client id and sorted set); `connectionId` names one connection of this
 * instance. Answers must not reject or throw: a registry that cannot tell (Redis away) says yes, and the
 * instance's own check still applies.
 */
export interface SubscriptionRegistry {
  /** True if the set is now held for this connection (or already was), false if another connection holds it. */
  claim(key: string, connectionId: string): boolean | Promise<boolean>;
  /** Gives the set up, if this connection holds it. */
  release(key: string, connectionId: string): void;
  /** Keeps the sets these connections hold (every ping period), so that a dead instance's claims lapse on their own. */
  refresh(held: ReadonlyArray<readonly [key: string, connectionId: string]>): void;
}
