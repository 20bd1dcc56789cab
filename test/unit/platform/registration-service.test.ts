import { describe, expect, it, vi } from 'vitest';
import {
  createRegistrationService,
  type RegistrationTerms,
  registerCharger,
} from '../../../platform/services/registration-service.js';
import type {
  DeviceRepository,
  DeviceRow,
  EnrolmentRepository,
  RegistrationWrite,
  SerialState,
} from '../../../platform/storage/store.js';

const input = { sn: 'SN-1', model: 'M', manufacturer: 'A', firmware_version: '1' };
const seal = (plain: string) => `sealed:${plain}`;

/** A device repository that decides on `state` as a backend would, and keeps what it was asked to write. */
function fakeStore(state: SerialState) {
  const writes: RegistrationWrite[] = [];
  const store = {
    async registerDevice(_input, write) {
      writes.push(write);
      const decision = write.decide(state);
      if (decision !== 'register_new' && decision !== 'register_again') return { kind: decision };
      const device = { device_id: 'dev_1', sn: input.sn, secret_sealed: write.secretSealed } as DeviceRow;
      return { kind: 'registered', device };
    },
    async activeEnrolments() {
      return [];
    },
  } as Pick<DeviceRepository, 'registerDevice'> & Pick<EnrolmentRepository, 'activeEnrolments'>;
  // Only what registration calls: the rest of the repositories is never reached.
  return { store: store as unknown as DeviceRepository & EnrolmentRepository, writes };
}

const fresh: SerialState = { allowed: false, existing: undefined };
const group = { enrolment_id: 'enr_1', operator_id: 'op1' };

describe('registerCharger: the rule bound to the terms, the secret sealed above storage', () => {
  it.each<[string, RegistrationTerms, SerialState, string]>([
    ['open, new serial', { registration: 'open' }, fresh, 'registered'],
    ['allowlist, not on it', { registration: 'allowlist' }, fresh, 'not_allowed'],
    ['allowlist, on it', { registration: 'allowlist' }, { ...fresh, allowed: true }, 'registered'],
    ['attested without a group', { registration: 'attested' }, fresh, 'not_allowed'],
    ['attested with a group', { registration: 'attested', enrolment: group }, fresh, 'registered'],
    [
      "attested, reset charger in another operator's site",
      { registration: 'attested', enrolment: group },
      { allowed: false, existing: { registered: false, operatorId: 'op2' } },
      'other_operator',
    ],
    [
      'open, registered serial',
      { registration: 'open' },
      { allowed: false, existing: { registered: true, operatorId: null } },
      'already_registered',
    ],
  ])('%s: %s', async (_name, terms, state, want) => {
    const { store, writes } = fakeStore(state);
    const outcome = await registerCharger({ store, keys: { sealSecret: seal } }, input, {
      ...terms,
      defaultSiteId: 'site_1',
    });
    expect(outcome.kind).toBe(want);
    expect(writes).toHaveLength(1);
    expect(writes[0]?.defaultSiteId).toBe('site_1');
    // Storage gets the sealed secret only; the caller gets it in the clear, once.
    if (outcome.kind === 'registered') expect(writes[0]?.secretSealed).toBe(seal(outcome.secret));
  });
});

describe('createRegistrationService', () => {
  const service = (registration: RegistrationTerms['registration'], state = fresh) => {
    const { store, writes } = fakeStore(state);
    const directory = { refreshDevice: vi.fn(async () => undefined) };
    const webhooks = { deviceRegistered: vi.fn() };
    const registrations = createRegistrationService({
      store,
      keys: { sealSecret: seal },
      directory,
      webhooks,
      options: { registration, defaultSiteId: 'site_default' },
      now: () => 1_000,
    });
    return { registrations, writes, directory, webhooks };
  };

  it('registers, refreshes the directory and queues device.registered', async () => {
    const { registrations, writes, directory, webhooks } = service('open');
    const outcome = await registrations.register(input, []);
    expect(outcome.kind).toBe('registered');
    expect(writes[0]?.defaultSiteId).toBe('site_default');
    expect(directory.refreshDevice).toHaveBeenCalledWith('dev_1');
    expect(webhooks.deviceRegistered).toHaveBeenCalledWith(
      expect.objectContaining({ device_id: 'dev_1' }),
      1_000,
    );
  });

  it('answers a refusal without touching the directory or webhooks', async () => {
    const { registrations, directory, webhooks } = service('allowlist');
    expect(await registrations.register(input, [])).toEqual({ kind: 'not_allowed' });
    expect(directory.refreshDevice).not.toHaveBeenCalled();
    expect(webhooks.deviceRegistered).not.toHaveBeenCalled();
  });

  it('under attested, refuses a charger without a certificate before storage is asked', async () => {
    const { registrations, writes } = service('attested');
    expect(await registrations.register(input, [])).toEqual({
      kind: 'not_attested',
      refusal: 'no_certificate',
    });
    expect(writes).toHaveLength(0);
  });
});
