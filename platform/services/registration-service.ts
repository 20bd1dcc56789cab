import type { X509Certificate } from 'node:crypto';
import { type AttestationRefusal, verifyAttestation } from '../domain/attestation.js';
import { newSecret } from '../domain/ids.js';
import { decideRegistration, type RegistrationPolicy } from '../domain/registration.js';
import type { PlatformKeys } from '../storage/platform-keys.js';
import type { DeviceRepository, DeviceRow, EnrolmentRepository, RegisterInput } from '../storage/store.js';
import type { PrincipalDirectory } from './principal-directory.js';
import type { WebhookEvents } from './webhook-events.js';

/**
 * The terms one registration runs under (DESIGN.md §3, §18): the policy, where a new charger goes, and under
 * `attested` the group that vouched for the charger's certificate (its site goes in `defaultSiteId`).
 */
export interface RegistrationTerms {
  registration: RegistrationPolicy;
  defaultSiteId?: string | undefined;
  enrolment?: { enrolment_id: string; operator_id: string } | undefined;
}

/** A registration's outcome: the device and its new secret (in the clear, answered once), or the refusal. */
export type RegistrationOutcome =
  | { kind: 'registered'; device: DeviceRow; secret: string }
  | { kind: 'not_allowed' }
  | { kind: 'other_operator' }
  | { kind: 'already_registered' };

/** What `POST /v1/device/register` gets: the outcome, or why the certificate did not attest the charger. */
export type RegistrationResult = RegistrationOutcome | { kind: 'not_attested'; refusal: AttestationRefusal };

/**
 * Registers `input` under `terms`: the new secret is sealed here, and storage reads the serial's state, applies
 * the rule (domain/registration.ts) and writes what it decided, in one transaction.
 */
export async function registerCharger(
  deps: { store: DeviceRepository; keys: Pick<PlatformKeys, 'sealSecret'> },
  input: RegisterInput,
  terms: RegistrationTerms,
): Promise<RegistrationOutcome> {
  const secret = newSecret();
  const stored = await deps.store.registerDevice(input, {
    decide: (state) =>
      decideRegistration({
        policy: terms.registration,
        attested: terms.enrolment !== undefined,
        groupOperatorId: terms.enrolment?.operator_id,
        ...state,
      }),
    secretSealed: deps.keys.sealSecret(secret),
    defaultSiteId: terms.defaultSiteId,
  });
  return stored.kind === 'registered' ? { ...stored, secret } : stored;
}

export interface RegistrationServiceDeps {
  store: DeviceRepository & EnrolmentRepository;
  keys: Pick<PlatformKeys, 'sealSecret'>;
  directory: Pick<PrincipalDirectory, 'refreshDevice'>;
  webhooks: Pick<WebhookEvents, 'deviceRegistered'>;
  options: { registration: RegistrationPolicy; defaultSiteId?: string | undefined };
  now: () => number;
}

/** Chargers registering on first connection (`POST /v1/device/register`). */
export function createRegistrationService(deps: RegistrationServiceDeps) {
  const { store, options, now } = deps;

  /**
   * Under `attested` the presented certificate chain must be vouched for by an active enrolment group
   * (domain/attestation.ts); the charger then goes to the group's site, if it names one.
   */
  async function termsFor(
    sn: string,
    chain: readonly X509Certificate[],
  ): Promise<RegistrationTerms | { refusal: AttestationRefusal }> {
    const { registration, defaultSiteId } = options;
    if (registration !== 'attested') return { registration, defaultSiteId };
    // Without a certificate there is nothing to check the groups against.
    const groups = chain.length > 0 ? await store.activeEnrolments() : [];
    const outcome = verifyAttestation({ sn, chain, groups, nowMs: now() });
    if (!outcome.ok) return { refusal: outcome.refusal };
    return {
      registration,
      defaultSiteId: outcome.group.site_id ?? undefined,
      enrolment: { enrolment_id: outcome.group.enrolment_id, operator_id: outcome.group.operator_id },
    };
  }

  return {
    /**
     * Registers the charger that presented `chain` (empty: no client certificate). A registered charger is in
     * this instance's principal directory at once, and the `device.registered` webhook is queued.
     */
    async register(input: RegisterInput, chain: readonly X509Certificate[]): Promise<RegistrationResult> {
      const terms = await termsFor(input.sn, chain);
      if ('refusal' in terms) return { kind: 'not_attested', refusal: terms.refusal };
      const outcome = await registerCharger(deps, input, terms);
      if (outcome.kind !== 'registered') return outcome;
      await deps.directory.refreshDevice(outcome.device.device_id);
      deps.webhooks.deviceRegistered(outcome.device, now());
      return outcome;
    },
  };
}
export type RegistrationService = ReturnType<typeof createRegistrationService>;
