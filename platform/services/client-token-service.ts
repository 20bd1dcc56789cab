import { ErrorCode, type Scope } from '../../shared/index.js';
import { ApiError } from '../domain/api-error.js';
import {
  type ClientSecretMatch,
  clientSecretMatch,
  grantedScopes,
  tokenExpirySeconds,
} from '../domain/client-credentials.js';
import type { PlatformKeys } from '../storage/platform-keys.js';
import type { ClientRow, Store } from '../storage/store.js';
import { secretsEqual, type TokenService, tokenTimes } from './access-tokens.js';
import type { PrincipalDirectory } from './principal-directory.js';

export interface ClientTokenServiceDeps {
  store: Pick<Store, 'getClient'>;
  keys: PlatformKeys;
  tokens: TokenService;
  directory: PrincipalDirectory;
  now: () => number;
  tokenTtlSeconds: number;
}

/** A client that proved one of its live secrets, and when. */
export interface AuthenticatedClient {
  client: ClientRow;
  match: Exclude<ClientSecretMatch, 'none'>;
  atMs: number;
}

// Compared against when the client is unknown, so the answer takes as long either way.
const DUMMY_SECRET = 'x'.repeat(43);

/**
 * Operator access tokens (OAuth 2.0 client credentials, DESIGN.md §18) in two steps, so that the endpoint can
 * spend its issuance budget between them, only for a caller that proved the secret: `authenticate`, then
 * `issue`.
 */
export function createClientTokenService(deps: ClientTokenServiceDeps) {
  const { keys } = deps;

  /**
   * Which of the client's secrets the presented one is. Both stored secrets are compared whatever the outcome,
   * and a dummy stands in for a missing one, so the answer takes as long for an unknown or revoked client.
   */
  function matchSecret(client: ClientRow | undefined, presented: string, nowMs: number): ClientSecretMatch {
    const current = secretsEqual(presented, client ? keys.openSecret(client.secret_sealed) : DUMMY_SECRET);
    const previousSealed = client?.previous_secret_sealed;
    const previous = secretsEqual(presented, previousSealed ? keys.openSecret(previousSealed) : DUMMY_SECRET);
    if (!client) return 'none';
    return clientSecretMatch(client, { current, previous: previous && !!previousSealed }, nowMs);
  }

  return {
    /** The client, when `presented` is its current secret or its previous one within the grace. */
    async authenticate(clientId: string, presented: string): Promise<AuthenticatedClient | undefined> {
      const client = await deps.store.getClient(clientId);
      const atMs = deps.now();
      const match = matchSecret(client, presented, atMs);
      return client && match !== 'none' ? { client, match, atMs } : undefined;
    },
    /**
     * A token with the scopes asked for (all the client's when none are), refused with `invalid_scope` when
     * one is not granted. A token of the previous secret ends with the rotation's grace.
     */
    async issue({ client, match, atMs }: AuthenticatedClient, scope: string | undefined) {
      await deps.directory.refreshClient(client.client_id);
      const scopes = grantedScopes<Scope>(client.scopes, scope);
      if (!scopes) {
        throw new ApiError(ErrorCode.VALIDATION, 'Requested scope is not granted to this client', {
          details: { field: 'scope', value: scope },
          oauth: 'invalid_scope',
        });
      }
      const ttlSeconds = deps.tokenTtlSeconds;
      const times = tokenTimes(atMs, ttlSeconds);
      // A token of the previous secret ends with the rotation's grace (domain/client-credentials.ts).
      const exp = tokenExpirySeconds(client, match, times.exp);
      const access_token = deps.tokens.issueOperatorToken({
        sub: client.client_id,
        scp: scopes,
        ops: client.operator_ids,
        gen: match === 'current' ? client.secret_gen : client.secret_gen - 1,
        iat: times.iat,
        exp,
      });
      const expires_in = Math.max(1, ttlSeconds - (times.exp - exp));
      return { access_token, token_type: 'Bearer' as const, expires_in, scope: scopes.join(' ') };
    },
  };
}
export type ClientTokenService = ReturnType<typeof createClientTokenService>;
