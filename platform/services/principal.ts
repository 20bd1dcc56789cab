import type { Scope } from '../../shared/index.js';

/**
 * Who calls: an API client with its scopes and the operators it acts for, or a charger. Owned here, below
 * http/, because services act for a principal; authentication (http/auth/authenticate.ts) produces them.
 */
export interface OperatorPrincipal {
  clientId: string;
  scopes: readonly Scope[];
  operatorIds: readonly string[];
}
export interface DevicePrincipal {
  deviceId: string;
}
