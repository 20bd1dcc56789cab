import { describe, expect, it } from 'vitest';
import {
  type ClientCredentialState,
  type ClientSecretMatch,
  clientSecretMatch,
  grantedScopes,
  operatorTokenLive,
  tokenExpirySeconds,
} from '../../../platform/domain/client-credentials.js';

const T = Date.UTC(2030, 0, 1);
const active = (gen: number, until: number | null = null): ClientCredentialState => ({
  status: 'active',
  secret_gen: gen,
  previous_secret_until_ms: until,
});
const revoked: ClientCredentialState = { status: 'revoked', secret_gen: 2, previous_secret_until_ms: null };

describe('operatorTokenLive', () => {
  it.each<[string, ClientCredentialState, number, number, boolean]>([
    ['current generation', active(1), 1, T, true],
    ['older generation, no rotation in its grace', active(2), 1, T, false],
    ['previous generation within the grace', active(2, T + 1000), 1, T, true],
    ['previous generation at the end of the grace', active(2, T + 1000), 1, T + 1000, false],
    ['two generations back, whatever the grace', active(3, T + 1000), 1, T, false],
    ['a generation the client never had', active(2), 3, T, false],
    ['revoked: current generation', revoked, 2, T, false],
    ['revoked: previous generation', { ...revoked, previous_secret_until_ms: T + 1000 }, 1, T, false],
  ])('%s', (_name, client, gen, now, want) => {
    expect(operatorTokenLive(client, gen, now)).toBe(want);
  });
});

describe('clientSecretMatch', () => {
  it.each<[string, ClientCredentialState, boolean, boolean, number, ClientSecretMatch]>([
    ['current secret', active(1), true, false, T, 'current'],
    ['wrong secret', active(1), false, false, T, 'none'],
    ['previous secret within the grace', active(2, T + 1000), false, true, T, 'previous'],
    ['previous secret after the grace', active(2, T + 1000), false, true, T + 1000, 'none'],
    ['previous secret with no grace', active(2), false, true, T, 'none'],
    ['revoked client, its current secret', revoked, true, false, T, 'none'],
  ])('%s', (_name, client, current, previous, now, want) => {
    expect(clientSecretMatch(client, { current, previous }, now)).toBe(want);
  });
});

describe('tokenExpirySeconds', () => {
  it('a token of the current secret keeps its full life', () => {
    expect(tokenExpirySeconds(active(2, T + 60_000), 'current', T / 1000 + 86_400)).toBe(T / 1000 + 86_400);
  });
  it('a token of the previous secret ends with the grace, never later than its own TTL', () => {
    expect(tokenExpirySeconds(active(2, T + 60_500), 'previous', T / 1000 + 86_400)).toBe(T / 1000 + 60);
    expect(tokenExpirySeconds(active(2, T + 10 * 86_400_000), 'previous', T / 1000 + 86_400)).toBe(
      T / 1000 + 86_400,
    );
  });
});

describe('grantedScopes: what a token is issued with', () => {
  const both = ['read', 'write'];
  it.each<[string, readonly string[], string | undefined, string[] | undefined]>([
    ['none asked: all the client’s', both, undefined, ['read', 'write']],
    ['one granted', both, 'read', ['read']],
    ['both, repeated and spaced', both, ' write  read write ', ['write', 'read']],
    ['one not granted', ['read'], 'read write', undefined],
    ['an unknown scope', both, 'admin', undefined],
    ['an empty request', both, '', undefined],
    ['only spaces', both, '   ', undefined],
  ])('%s', (_name, granted, asked, want) => {
    expect(grantedScopes(granted, asked)).toEqual(want);
  });
});
