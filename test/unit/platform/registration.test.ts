import { describe, expect, it } from 'vitest';
import { decideRegistration, type RegistrationDecision } from '../../../platform/domain/registration.js';

describe('decideRegistration', () => {
  // policy, on the allowlist, existing device, decision
  it.each<['open' | 'allowlist', boolean, { registered: boolean } | undefined, RegistrationDecision]>([
    ['open', false, undefined, 'register_new'],
    ['open', true, undefined, 'register_new'],
    ['open', false, { registered: true }, 'already_registered'],
    ['open', false, { registered: false }, 'register_again'],
    ['allowlist', false, undefined, 'not_allowed'],
    ['allowlist', false, { registered: false }, 'not_allowed'],
    ['allowlist', false, { registered: true }, 'not_allowed'],
    ['allowlist', true, undefined, 'register_new'],
    ['allowlist', true, { registered: true }, 'already_registered'],
    ['allowlist', true, { registered: false }, 'register_again'],
  ])('%s, allowed %s, existing %j: %s', (policy, allowed, existing, want) => {
    expect(decideRegistration({ policy, allowed, existing })).toBe(want);
  });
});
