import type { TokenService } from './auth/access-tokens.js';
import type { DeviceCredentials } from './device-credentials.js';
import type { Liveness } from './liveness.js';
import type { PlatformKeys } from './platform-keys.js';
import type { Store } from './storage/store.js';

export interface PlatformOptions {
  env: 'production' | 'sandbox';
  registration: 'open' | 'allowlist';
  tokenTtlSeconds: number;
  /** Where newly registered chargers go (the sandbox's default site). */
  defaultSiteId?: string | undefined;
}

/** What every route needs, injected once: storage, clock, auth and liveness. */
export interface PlatformContext {
  options: PlatformOptions;
  store: Store;
  tokens: TokenService;
  keys: PlatformKeys;
  credentials: DeviceCredentials;
  liveness: Liveness;
  now: () => number;
}
