/**
 * Who this charger is to the platform: registration on first start, the bearer token and its renewal, and
 * secret rotation. Everything the platform hands out is stored (fsynced, mode 0600) before it is used, so
 * that a power cut right after registering or rotating cannot lose the charger's identity.
 *
 * - First start: `POST /v1/device/register` with the serial number; 409 (already registered) and 403 (not on
 *   the allowlist, or no acceptable client certificate under attested registration) are fatal with a hint for the technician; transient failures are retried with backoff.
 * - Token: exchanged for the secret, kept in the store across restarts, renewed ahead of its expiry (at 90 %
 *   of its lifetime, at most one hour early), and on demand after a 401.
 * - Rotation is two-phase (secret-rotation.ts): the new secret is stored beside the old one, offered first,
 *   and replaces it only once it has bought a token; the old one serves until then.
 * - The platform refuses every stored secret (an operator ran `devices reset`, which revokes them and lets the
 *   serial register again): the agent registers again, keeping its device_id, and carries on. If the serial
 *   is still registered (409) the credentials were revoked some other way: fatal, ask the operator to reset.
 */
import type { Logger } from 'pino';
import type * as z from 'zod/mini';
import type { DeviceToken, RegisterRequest, Registration } from '../../shared/device-api.js';
import { AgentFatalError, EXIT_IDENTITY_REFUSED, EXIT_USAGE } from '../agent-errors.js';
import { type Clock, iso, sleep } from '../clock.js';
import { DEFAULT_BACKOFF, nextDelayMs } from '../core/backoff.js';
import { secretsToTry } from '../core/secret-rotation-policy.js';
import type { AgentStore, Identity, StoredToken } from '../store/agent-store.js';
import type { DeviceApi, PlatformClient, TokenSource } from './platform-client.js';
import { isPlatformError, PlatformError } from './platform-errors.js';

export interface DeviceCredentialsOptions {
  store: AgentStore;
  client: PlatformClient;
  clock: Clock;
  logger: Logger;
  sn: string;
  platformUrl: string;
  /** The registration body (serial, model, connectors...). */
  registration: () => RegisterRequest;
  random?: () => number;
  backoff?: { baseMs: number; capMs: number };
}

export interface DeviceCredentials extends TokenSource {
  identity(): Identity | undefined;
  /**
   * Registers unless the store already holds an identity; retries transient failures until `signal` aborts.
   * Throws `AgentFatalError` when the platform refuses the serial number.
   */
  ensureRegistered(signal?: AbortSignal): Promise<Identity | undefined>;
  /**
   * Asks the platform for a new secret and stores it beside the current one (unless one is stored already),
   * then gets a token with it, which makes it the only secret. Rejects when a step fails; what was stored
   * stays, and a later call carries on from there.
   */
  rotateSecret(api: DeviceApi): Promise<void>;
  /** Token expiry, ms (agent clock), if a token is held. */
  tokenExpiresAt(): number | undefined;
}

/** Renew when less than this much of the token's life is left. */
export function renewMarginMs(lifetimeMs: number): number {
  return Math.min(3_600_000, Math.max(0, lifetimeMs * 0.1));
}

/** Fails fast when the data directory belongs to another charger. Pure, for tests. */
export function checkStoredIdentity(stored: Identity | undefined, sn: string): void {
  if (stored && stored.sn !== sn) {
    throw new AgentFatalError(
      `this data directory belongs to charger ${stored.sn}, not ${sn}`,
      `run with the data directory of ${sn}, or give this charger an empty --data-dir`,
      EXIT_USAGE,
    );
  }
}

function refusal(error: PlatformError, sn: string, after: 'first' | 'revoked'): AgentFatalError | undefined {
  if (error.kind === 'conflict') {
    return new AgentFatalError(
      after === 'first'
        ? `the platform already has a charger registered with serial number ${sn} (409)`
        : `the platform no longer accepts this charger's credentials, and serial number ${sn} is still registered (409)`,
      `ask the platform operator to reset this charger (charger-platform devices reset --device DEVICE_ID), then start the agent again`,
      EXIT_IDENTITY_REFUSED,
    );
  }
  if (error.kind === 'forbidden') {
    return new AgentFatalError(
      `the platform refuses to register serial number ${sn}: it is not on the registration allowlist, or the platform wants a manufacturer's client certificate naming it (${error.message})`,
      `ask the platform operator to allow this serial number (charger-platform devices allow --sn ${sn}); where the platform takes attested registrations, start the agent with the certificate the manufacturer made for this charger (--client-cert FILE --client-key FILE)`,
      EXIT_IDENTITY_REFUSED,
    );
  }
  if (!error.retryable) {
    return new AgentFatalError(
      `the platform refused the registration: ${error.message}`,
      'check the model, manufacturer, firmware and connector settings in the agent configuration',
      EXIT_USAGE,
    );
  }
  return undefined;
}

export function createDeviceCredentials(options: DeviceCredentialsOptions): DeviceCredentials {
  const { store, client, clock, logger, sn } = options;
  const random = options.random ?? Math.random;
  const backoff = options.backoff ?? DEFAULT_BACKOFF;
  let cached = store.getToken();
  let inflight: Promise<string> | undefined;
  /** A rotation's request is on its way (see `exchange`). */
  let rotating = false;

  async function register(after: 'first' | 'revoked'): Promise<Identity> {
    const previous = store.getIdentity();
    let registration: z.infer<typeof Registration>;
    try {
      registration = await client.register(options.registration());
    } catch (error) {
      const fatal = isPlatformError(error) ? refusal(error, sn, after) : undefined;
      throw fatal ?? error;
    }
    const identity: Identity = {
      deviceId: registration.device_id,
      secret: registration.device_secret,
      sn,
      platformUrl: options.platformUrl,
      registeredAt: iso(clock.now()),
    };
    // Stored (fsynced) before anything else: the platform will not hand this secret out again.
    store.saveIdentity(identity);
    cached = undefined;
    if (previous && previous.deviceId !== identity.deviceId) {
      logger.warn(
        { previous: previous.deviceId, device_id: identity.deviceId },
        'registered under a new device id',
      );
    } else {
      logger.info(
        { device_id: identity.deviceId, sn },
        after === 'first' ? 'registered' : 'registered again after a reset',
      );
    }
    return identity;
  }

  /** Offers the stored secrets in turn; the token and the secret it was issued for, or the last refusal. */
  async function tryStored(
    identity: Identity,
  ): Promise<{ token: DeviceToken; secret: string } | { refused: PlatformError }> {
    let refused: PlatformError | undefined;
    for (const secret of secretsToTry(identity)) {
      try {
        return { token: await client.exchangeToken(identity.deviceId, secret), secret };
      } catch (error) {
        if (!isPlatformError(error) || error.kind !== 'unauthorized') throw error;
        refused = error;
      }
    }
    return { refused: refused ?? new PlatformError('unauthorized', 'no device secret stored') };
  }

  async function exchange(): Promise<string> {
    let identity = store.getIdentity();
    if (!identity) throw new PlatformError('unauthorized', 'not registered yet');
    let outcome = await tryStored(identity);
    if ('refused' in outcome) {
      const current = store.getIdentity();
      if (
        current &&
        (current.secret !== identity.secret || current.pendingSecret !== identity.pendingSecret)
      ) {
        // A rotation stored a new secret while this exchange was on its way: use it.
        identity = current;
      } else if (rotating) {
        // Refused while a rotation is in flight: its answer may be the way back in. Registering again now
        // would meet 409 and end the agent; the caller retries once the rotation is over.
        throw new PlatformError('unauthorized', 'secret rotation in progress');
      } else {
        logger.warn('the platform refused the stored device secret; registering again');
        identity = await register('revoked');
      }
      outcome = await tryStored(identity);
      if ('refused' in outcome) throw outcome.refused;
    }
    const { token, secret } = outcome;
    const obtainedAt = clock.now();
    const fresh: StoredToken = {
      accessToken: token.access_token,
      expiresAt: iso(obtainedAt + token.expires_in * 1000),
      obtainedAt: iso(obtainedAt),
    };
    const pending = identity.pendingSecret;
    store.transaction(() => {
      if (pending !== undefined && secret === pending) {
        // The new secret works: the platform has retired the old one, so must we.
        store.promotePendingSecret(pending, iso(obtainedAt));
      } else if (pending !== undefined) {
        // The platform refused the new secret and took the old one: it never knew the new one. Forget it; the
        // next rotation asks afresh.
        store.discardPendingSecret(pending);
      }
      store.saveToken(fresh);
    });
    if (pending !== undefined && secret === pending) logger.info('device secret rotated');
    else if (pending !== undefined)
      logger.warn('the platform refused the new device secret; keeping the old one');
    cached = fresh;
    logger.debug({ expires_at: cached.expiresAt }, 'device token obtained');
    return cached.accessToken;
  }

  function renew(): Promise<string> {
    // One exchange at a time: loops that find the token stale together share the answer.
    inflight ??= exchange().finally(() => {
      inflight = undefined;
    });
    return inflight;
  }

  function fresh(): boolean {
    if (!cached) return false;
    const expires = Date.parse(cached.expiresAt);
    const lifetime = expires - Date.parse(cached.obtainedAt);
    return clock.now() < expires - renewMarginMs(lifetime);
  }

  return {
    identity: () => store.getIdentity(),
    async token() {
      if (fresh() && cached) return cached.accessToken;
      return renew();
    },
    renew() {
      cached = undefined;
      store.clearToken();
      return renew();
    },
    async ensureRegistered(signal) {
      const stored = store.getIdentity();
      checkStoredIdentity(stored, sn);
      if (stored) {
        if (stored.platformUrl !== options.platformUrl) {
          logger.warn(
            { from: stored.platformUrl, to: options.platformUrl },
            'platform URL changed; keeping the identity',
          );
          store.updatePlatformUrl(options.platformUrl);
        }
        return stored;
      }
      for (let attempt = 0; !signal?.aborted; attempt++) {
        try {
          return await register('first');
        } catch (error) {
          if (!isPlatformError(error)) throw error;
          const delay = nextDelayMs(attempt, {
            ...backoff,
            random,
            ...(error.retryAfterSeconds !== undefined ? { retryAfterSeconds: error.retryAfterSeconds } : {}),
          });
          logger.warn({ err: error.message, retry_in_ms: delay }, 'registration failed; will retry');
          store.setState('last_error', { at: iso(clock.now()), where: 'register', message: error.message });
          await sleep(clock, delay, signal);
        }
      }
      return undefined;
    },
    async rotateSecret(api) {
      if (store.getIdentity()?.pendingSecret === undefined) {
        rotating = true;
        try {
          const rotated = await api.rotateSecret();
          // Stored (fsynced) before it is used, beside the old secret, which stays until this one has worked.
          store.savePendingSecret(rotated.device_secret, iso(clock.now()));
          logger.info('new device secret received; switching to it');
        } finally {
          rotating = false;
        }
      }
      // An exchange already on its way offers what was stored before: let it land, then use the new secret.
      await inflight?.catch(() => undefined);
      await renew();
    },
    tokenExpiresAt() {
      return cached ? Date.parse(cached.expiresAt) : undefined;
    },
  };
}
