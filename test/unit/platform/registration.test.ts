import { describe, expect, it } from 'vitest';
import {
  decideRegistration,
  type RegistrationDecision,
  type RegistrationPolicy,
} from '../../../platform/domain/registration.js';

describe('decideRegistration', () => {
  // policy, on the allowlist, vouched for by an enrolment group, existing device, decision
  it.each<[RegistrationPolicy, boolean, boolean, { registered: boolean } | undefined, RegistrationDecision]>([
    ['open', false, false, undefined, 'register_new'],
    ['open', true, false, undefined, 'register_new'],
    ['open', false, false, { registered: true }, 'already_registered'],
    ['open', false, false, { registered: false }, 'register_again'],
    ['allowlist', false, false, undefined, 'not_allowed'],
    ['allowlist', false, false, { registered: false }, 'not_allowed'],
    ['allowlist', false, false, { registered: true }, 'not_allowed'],
    ['allowlist', true, false, undefined, 'register_new'],
    ['allowlist', true, false, { registered: true }, 'already_registered'],
    ['allowlist', true, false, { registered: false }, 'register_again'],
    ['open', false, true, { registered: true }, 'already_registered'],
    ['allowlist', false, true, undefined, 'not_allowed'],
    // Attested: the certificate is the credential, the allowlist plays no part.
    ['attested', false, false, undefined, 'not_allowed'],
    ['attested', true, false, undefined, 'not_allowed'],
    ['attested', true, false, { registered: false }, 'not_allowed'],
    ['attested', false, true, undefined, 'register_new'],
    ['attested', false, true, { registered: true }, 'already_registered'],
    ['attested', false, true, { registered: false }, 'register_again'],
  ])('%s, allowed %s, attested %s, existing %j: %s', (policy, allowed, attested, existing, want) => {
    expect(decideRegistration({ policy, allowed, attested, existing })).toBe(want);
  });
});

describe('decideRegistration: a reset charger re-registers through a group of the operator that holds it', () => {
  it.each<[string | null | undefined, string | undefined, RegistrationPolicy, RegistrationDecision]>([
    ['op1', 'op1', 'attested', 'register_again'],
    ['op1', 'op2', 'attested', 'other_operator'],
    ['op1', undefined, 'attested', 'other_operator'],
    // In no site: nobody's yet, any group may enrol it.
    [null, 'op2', 'attested', 'register_again'],
    [undefined, 'op2', 'attested', 'register_again'],
    // Without attestation there is no group to compare (an operator reset it on purpose).
    ['op1', undefined, 'open', 'register_again'],
  ])('held by %s, group of %s, %s: %s', (holder, group, policy, want) => {
    expect(
      decideRegistration({
        policy,
        allowed: true,
        attested: policy === 'attested',
        groupOperatorId: group,
        existing: { registered: false, operatorId: holder },
      }),
    ).toBe(want);
  });

  it('a registered charger stays 409 whatever group asks', () => {
    expect(
      decideRegistration({
        policy: 'attested',
        allowed: true,
        attested: true,
        groupOperatorId: 'op2',
        existing: { registered: true, operatorId: 'op1' },
      }),
    ).toBe('already_registered');
  });
});
