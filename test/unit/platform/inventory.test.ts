import { describe, expect, it } from 'vitest';
import {
  agentVersionFromEvents,
  isVersionText,
  versionsFromFirmwareReport,
} from '../../../platform/domain/inventory.js';

describe('versionsFromFirmwareReport', () => {
  it.each([
    // status, version, update_id, update kind, versions set
    ['installed', '2.0.0', undefined, undefined, { firmware_version: '2.0.0' }],
    ['installed', '2.0.0', null, undefined, { firmware_version: '2.0.0' }],
    ['installed', undefined, undefined, undefined, {}],
    ['installed', '', undefined, undefined, {}],
    ['downloading', '2.0.0', undefined, undefined, {}],
    ['failed', '2.0.0', undefined, undefined, {}],
    ['rolled_back', '2.0.0', 'upd_1', 'agent', {}],
    ['installed', '2.0.0', 'upd_1', undefined, {}],
    ['installed', '0.2.0', 'upd_1', 'agent', { agent_version: '0.2.0' }],
    ['installed', '2.0.0', 'upd_1', 'firmware', { firmware_version: '2.0.0' }],
    ['installed', undefined, 'upd_1', 'agent', {}],
  ] as const)('%s %s (update %s, kind %s): %j', (status, version, update_id, kind, want) => {
    expect(versionsFromFirmwareReport({ status, version, update_id }, kind)).toEqual(want);
  });
});

describe('isVersionText', () => {
  it.each([
    ['1.0.0', true],
    ['x'.repeat(64), true],
    ['x'.repeat(65), false],
    ['', false],
    ['1.0\n', false],
    [7, false],
    [null, false],
  ])('%j: %s', (value, want) => {
    expect(isVersionText(value)).toBe(want);
  });
});

describe('agentVersionFromEvents', () => {
  const boot = (ts_ms: number, data: Record<string, unknown> | null, kind = 'boot') => ({
    kind,
    ts_ms,
    data,
  });
  it.each([
    ['no events', [], undefined],
    ['one boot', [boot(1, { version: '0.1.0' })], '0.1.0'],
    ['the newest boot wins, whatever the order', [boot(2, { version: 'b' }), boot(1, { version: 'a' })], 'b'],
    ['equal times: the later in the upload', [boot(1, { version: 'a' }), boot(1, { version: 'b' })], 'b'],
    ['a newer malformed boot is skipped', [boot(1, { version: 'a' }), boot(2, { version: 3 })], 'a'],
    ['a boot without data', [boot(1, null)], undefined],
    ['not a boot', [boot(1, { version: 'a' }, 'vehicle_plugged')], undefined],
    ['too long', [boot(1, { version: 'v'.repeat(65) })], undefined],
  ] as const)('%s', (_label, events, want) => {
    expect(agentVersionFromEvents(events)).toBe(want);
  });
});
