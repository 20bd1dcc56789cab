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
