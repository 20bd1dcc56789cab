/**
 * An operator client's lifecycle (DESIGN.md §18), as pure rules.
 *
 * A client is `active` until an operator revokes it; a revoked client's secret and every token it holds are
 * refused, for good. `rotate-secret` makes a new secret the current one and moves the client to the next secret
 * generation; the secret it replaced (the previous generation) and the tokens issued with it keep working until
 * the grace the operator chose is over. A second rotation within the grace ends the first one's grace at once:
 * only the generation just replaced is kept beside the current one.
 */

export type ClientStatus = 'active' | 'revoked';

/** Default grace of `clients rotate-secret`: a day, as for a charger's secret (domain/secret-rotation.ts). */
export const CLIENT_ROTATION_GRACE_SECONDS = 86_400;

/** Tokens issued before operator tokens carried a generation are of the generation every client starts at. */
export const FIRST_CLIENT_SECRET_GEN = 1;

export interface ClientCredentialState {
  status: ClientStatus;
  secret_gen: number;
  /** Until when the previous generation's secret and tokens are live (null: no rotation in its grace). */
  previous_secret_until_ms: number | null;
}

/** True while the previous generation (the secret a rotation replaced) still works. */
export function previousSecretLive(client: ClientCredentialState, nowMs: number): boolean {
  return client.previous_secret_until_ms !== null && nowMs < client.previous_secret_until_ms;
}

/** Whether a token of generation `gen` still admits its client now. */
export function operatorTokenLive(client: ClientCredentialState, gen: number, nowMs: number): boolean {
  if (client.status !== 'active') return false;
  if (gen === client.secret_gen) return true;
  return gen === client.secret_gen - 1 && previousSecretLive(client, nowMs);
}

/**
 * Which stored secret a presented one stands for at the token endpoint: the current one, the previous one
 * while its grace lasts, or none (a revoked client matches none).
 */
export type ClientSecretMatch = 'current' | 'previous' | 'none';

export function clientSecretMatch(
  client: ClientCredentialState,
  equals: { current: boolean; previous: boolean },
  nowMs: number,
): ClientSecretMatch {
  if (client.status !== 'active') return 'none';
  if (equals.current) return 'current';
  if (equals.previous && previousSecretLive(client, nowMs)) return 'previous';
  return 'none';
}

/**
 * A token issued with the previous secret ends with its grace, so that `expires_in` tells the truth; one
 * issued with the current secret lives its full TTL.
 */
export function tokenExpirySeconds(
  client: ClientCredentialState,
  match: Exclude<ClientSecretMatch, 'none'>,
  normalExp: number,
): number {
  if (match === 'current' || client.previous_secret_until_ms === null) return normalExp;
  return Math.min(normalExp, Math.floor(client.previous_secret_until_ms / 1000));
}

/**
 * The scopes a token is issued with: all the client's, or those the request names (space-separated, RFC 6749
 * §3.3) without repeats; undefined when it names none, or one the client is not granted (`invalid_scope`).
 */
export function grantedScopes<S extends string>(
  clientScopes: readonly S[],
  asked: string | undefined,
): S[] | undefined {
  if (asked === undefined) return [...clientScopes];
  const names = asked.split(' ').filter(Boolean);
  if (names.length === 0 || names.some((s) => !clientScopes.includes(s as S))) return undefined;
  return [...new Set(names)] as S[];
}
