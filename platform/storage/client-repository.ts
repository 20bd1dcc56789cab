import type { Scope } from '../../shared/index.js';
import type { ClientStatus } from '../domain/client-credentials.js';

/** Operator API clients and their lifecycle (DESIGN.md §18): created, listed, revoked, their secret rotated. */
export interface ClientRow {
  client_id: string;
  secret_sealed: string;
  scopes: Scope[];
  operator_ids: string[];
  status: ClientStatus;
  /** Bumped by every secret rotation; operator tokens carry it (domain/client-credentials.ts). */
  secret_gen: number;
  /** The secret a rotation replaced, and until when it (and its tokens) still work. */
  previous_secret_sealed: string | null;
  previous_secret_until_ms: number | null;
}
/** What `clients list` shows of a client: never a secret. */
export interface ClientSummary {
  client_id: string;
  operator_ids: string[];
  scopes: Scope[];
  status: ClientStatus;
  created_ms: number;
}
/** What a rotation stored: the new generation, or why nothing. */
export type StoredClientRotation =
  | { outcome: 'rotated'; secret_gen: number }
  | { outcome: 'revoked' | 'unknown' };

export interface ClientRepository {
  /** Stores a new active client, its secret sealed by the caller (services/client-secrets.ts). */
  createClient(input: { operator_ids: string[]; scopes: Scope[]; secret_sealed: string }): Promise<ClientRow>;
  getClient(clientId: string): Promise<ClientRow | undefined>;
  /** Every client, oldest first. */
  listClients(): Promise<ClientSummary[]>;
  /**
   * Revokes a client for good and disables its webhook endpoints (reason `client_revoked`), in one transaction;
   * `already_revoked` changes nothing.
   */
  revokeClient(clientId: string): Promise<'revoked' | 'already_revoked' | 'unknown'>;
  /**
   * `secretSealed` becomes the current secret, in the next generation; the replaced secret stays live for
   * `graceMs` (0: not at all). A revoked client is not rotated.
   */
  rotateClientSecret(clientId: string, graceMs: number, secretSealed: string): Promise<StoredClientRotation>;
}
