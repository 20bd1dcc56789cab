import type { ClientCredentialState } from '../domain/client-credentials.js';

/**
 * What the principal directory (services/principal-directory.ts) holds of a device, as storage returns it: its
 * secret generation and the age of a pending rotation (token revocation), its site and operator (tenancy of
 * stream messages), and whether it must sign requests.
 */
export interface DeviceEntry {
  device_id: string;
  secret_gen: number;
  secret_sealed: string | null;
  /** When a rotation's pending secret was created: past its grace, the current generation is revoked. */
  pending_since_ms: number | null;
  require_signature: boolean;
  site_id: string | null;
  operator_id: string | null;
}
/** What the principal directory holds of a client: its status, secret generation, grace, signing, operators. */
export interface ClientEntry extends ClientCredentialState {
  client_id: string;
  secret_sealed: string;
  require_signature: boolean;
  operator_ids: string[];
}
