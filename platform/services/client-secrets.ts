import type { Scope } from '../../shared/index.js';
import { newSecret } from '../domain/ids.js';
import type { PlatformKeys } from '../storage/platform-keys.js';
import type { ClientRepository, ClientRow } from '../storage/store.js';

/**
 * Operator API clients' secrets (DESIGN.md §18): made and sealed here, stored sealed. The secret in the clear
 * is answered once, to whoever created or rotated it (the admin CLI, the sandbox seed).
 */
type Deps = { store: ClientRepository; keys: Pick<PlatformKeys, 'sealSecret'> };

/** A rotation's outcome: the new secret, or why there is none. */
export type ClientRotation =
  | { outcome: 'rotated'; secret: string; secret_gen: number }
  | { outcome: 'revoked' | 'unknown' };

export async function createClient(
  deps: Deps,
  input: { operator_ids: string[]; scopes: Scope[] },
): Promise<{ client: ClientRow; secret: string }> {
  const secret = newSecret();
  const client = await deps.store.createClient({ ...input, secret_sealed: deps.keys.sealSecret(secret) });
  return { client, secret };
}

/** A new current secret and the next generation; the replaced one stays live for `graceMs` (0: not at all). */
export async function rotateClientSecret(
  deps: Deps,
  clientId: string,
  graceMs: number,
): Promise<ClientRotation> {
  const secret = newSecret();
  const stored = await deps.store.rotateClientSecret(clientId, graceMs, deps.keys.sealSecret(secret));
  return stored.outcome === 'rotated' ? { ...stored, secret } : stored;
}
