/**
 * Registration policy (DESIGN.md §3, §18), pure: whether a serial number may register, and how.
 *
 * - `allowlist`: only serials an operator allowed (`devices allow`); `open` (the sandbox): any; `attested`:
 *   only a charger whose TLS client certificate an enrolment group vouches for (domain/attestation.ts decides
 *   that before storage is asked, and says so here through `attested`).
 * - A serial that is registered stays so until an operator resets it: a second registration is refused (409),
 *   so a cloned serial cannot take over a charger's identity.
 * - A reset charger registers again under its old device id (its history stays with it) with a new secret;
 *   under `attested` that, too, needs the certificate, and a group of the operator whose site holds the charger:
 *   another operator's group cannot take over a charger and its history (`other_operator`, 403).
 */
export type RegistrationPolicy = 'open' | 'allowlist' | 'attested';
export const REGISTRATION_POLICIES: readonly RegistrationPolicy[] = ['open', 'allowlist', 'attested'];

export type RegistrationDecision =
  | 'not_allowed'
  | 'other_operator'
  | 'already_registered'
  | 'register_new'
  | 'register_again';

export function decideRegistration(input: {
  policy: RegistrationPolicy;
  /** The serial is on the allowlist. */
  allowed: boolean;
  /** An enrolment group vouched for the charger's certificate. */
  attested: boolean;
  /** The operator of the group that vouched for it (under `attested`). */
  groupOperatorId?: string | undefined;
  /** The device of that serial, if one was ever registered, and the operator of the site that holds it. */
  existing: { registered: boolean; operatorId?: string | null | undefined } | undefined;
}): RegistrationDecision {
  if (input.policy === 'allowlist' && !input.allowed) return 'not_allowed';
  if (input.policy === 'attested' && !input.attested) return 'not_allowed';
  if (input.existing === undefined) return 'register_new';
  if (input.existing.registered) return 'already_registered';
  const holder = input.existing.operatorId;
  if (input.policy === 'attested' && holder && holder !== input.groupOperatorId) return 'other_operator';
  return 'register_again';
}
