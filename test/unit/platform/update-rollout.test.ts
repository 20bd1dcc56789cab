import { describe, expect, it } from 'vitest';
import {
  batchesOf,
  batchToWaive,
  type DeviceObservation,
  nextRolloutStep,
  observeDevice,
  planBatches,
  progressOf,
  rolloutSettings,
  skipReasonOf,
} from '../../../platform/domain/update-rollout.js';
import type { UpdateDeviceState } from '../../../shared/index.js';

const devicesAt = (sites: Array<string | null>) =>
  sites.map((site_id, i) => ({ device_id: `dev_${i}`, site_id }));

describe('planBatches', () => {
  it.each([
    // sites of the chargers in order, batch_size, max_site_percent, batches wanted
    [['a', 'a', 'a', 'a'], 4, 100, [1, 1, 1, 1]],
    [['a', 'a', 'a', 'a', 'a'], 2, 100, [1, 1, 2, 2, 3]],
    // Sites take turns, so a batch mixes sites.
    [['a', 'a', 'b', 'b'], 2, 100, [1, 2, 1, 2]],
    // At most half of a site's four chargers per batch, even with room in the batch.
    [['a', 'a', 'a', 'a'], 10, 50, [1, 1, 2, 2]],
    // A site of one still moves (at least one per batch).
    [['a', 'b', 'b', 'b', 'b'], 10, 25, [1, 1, 2, 3, 4]],
    // Chargers without a site are bounded by the batch size only.
    [[null, null, null], 10, 10, [1, 1, 1]],
    [[], 5, 100, []],
  ] as const)('%j in batches of %i, %i %% of a site: %j', (sites, batch_size, max_site_percent, want) => {
    expect(planBatches(devicesAt([...sites]), { batch_size, max_site_percent })).toEqual(want);
  });

  it('places 1,000 chargers of 10 sites in batches of 100 holding every site', () => {
    const sites = Array.from({ length: 1000 }, (_, i) => `site_${i % 10}`);
    const batches = planBatches(devicesAt(sites), { batch_size: 100, max_site_percent: 100 });
    for (let b = 1; b <= 10; b++) {
      const members = sites.filter((_, i) => batches[i] === b);
      expect(members).toHaveLength(100);
      expect(new Set(members).size).toBe(10);
    }
  });
});

describe('rolloutSettings', () => {
  it('fills a missing batch size with every charger, at least one', () => {
    const given = { max_failure_percent: 20, health_seconds: 600, max_site_percent: 100 };
    expect(rolloutSettings(given, 7).batch_size).toBe(7);
    expect(rolloutSettings(given, 0).batch_size).toBe(1);
    expect(rolloutSettings({ ...given, batch_size: 5 }, 7).batch_size).toBe(5);
  });
});

describe('skipReasonOf', () => {
  const agent = { kind: 'agent' as const, version: '2.0.0' };
  const firmware = { kind: 'firmware' as const, version: '5.1' };
  it.each([
    ['an agent release, charger on another agent', agent, '1.0.0', '5.0', undefined],
    ['an agent release, charger on it already', agent, '2.0.0', '5.0', 'already on 2.0.0'],
    ['an agent release, charger reporting no agent', agent, null, '5.0', 'reports no agent_version'],
    ['firmware, charger on other firmware', firmware, '1.0.0', '5.0', undefined],
    ['firmware, charger on it already', firmware, '1.0.0', '5.1', 'already on 5.1'],
    // Firmware does not need the agent's version: whatever runs on the charger may install it.
    ['firmware, charger reporting no agent', firmware, null, '5.0', undefined],
    ['firmware, charger reporting no firmware', firmware, '1.0.0', null, undefined],
  ] as const)('%s', (_name, artifact, agent_version, firmware_version, reason) => {
    const got = skipReasonOf(artifact, { agent_version, firmware_version });
    if (reason === undefined) expect(got).toBeUndefined();
    else expect(got).toContain(reason);
  });
});

const healthy: DeviceObservation = {
  command_status: 'accepted',
  command_reason: null,
  report: null,
  online: true,
  fault: false,
  bad_events: 0,
};
const report = (status: string, version: string | null = null, message: string | null = null) => ({
  status,
  version,
  message,
});

describe('observeDevice', () => {
  const now = 1_000_000;
  const health = 600_000;
  it.each([
    // state, entered at, observation, change wanted
    ['queued', now, { ...healthy, command_status: 'delivered' as const }, undefined],
    ['queued', now, { ...healthy, report: report('downloading') }, { state: 'downloading', reason: null }],
    ['downloading', now, { ...healthy, report: report('signature_verified') }, undefined],
    [
      'downloading',
      now,
      { ...healthy, report: report('install_scheduled') },
      { state: 'install_scheduled', reason: null },
    ],
    [
      'install_scheduled',
      now,
      { ...healthy, report: report('install_rebooting') },
      { state: 'installing', reason: null },
    ],
    [
      'installing',
      now,
      { ...healthy, report: report('installed', '2.0.0') },
      { state: 'installed', reason: null, version_after: '2.0.0' },
    ],
    // Installed, says the charger, but not the update's version.
    [
      'installing',
      now,
      { ...healthy, report: report('installed', '1.9.9') },
      { state: 'failed', reason: 'installed 1.9.9, not 2.0.0', version_after: '1.9.9' },
    ],
    // A command that succeeded without an installed report counts as installed.
    [
      'installing',
      now,
      { ...healthy, command_status: 'succeeded' as const },
      { state: 'installed', reason: null, version_after: null },
    ],
    [
      'downloading',
      now,
      { ...healthy, report: report('invalid_signature', null, 'no trusted key signed it') },
      { state: 'failed', reason: 'invalid_signature: no trusted key signed it' },
    ],
    [
      'installing',
      now,
      { ...healthy, report: report('install_verification_failed') },
      { state: 'failed', reason: 'install_verification_failed' },
    ],
    [
      'installing',
      now,
      {
        ...healthy,
        command_status: 'failed' as const,
        report: report('rolled_back', '1.0.0', 'exited 3 times'),
      },
      { state: 'rolled_back', reason: 'rolled back: exited 3 times' },
    ],
    [
      'queued',
      now,
      { ...healthy, command_status: 'rejected' as const, command_reason: 'trusts no update key' },
      { state: 'failed', reason: 'command rejected: trusts no update key' },
    ],
    [
      'queued',
      now,
      { ...healthy, command_status: 'expired' as const },
      { state: 'failed', reason: 'command expired' },
    ],
    // The health check: passes after health_seconds, fails on the first bad sign.
    ['installed', now - health + 1, healthy, undefined],
    ['installed', now - health, healthy, { state: 'succeeded', reason: null }],
    [
      'installed',
      now,
      { ...healthy, online: false },
      { state: 'failed', reason: 'went offline during the health check' },
    ],
    [
      'installed',
      now,
      { ...healthy, fault: true },
      { state: 'failed', reason: 'reported a fault during the health check' },
    ],
    [
      'installed',
      now,
      { ...healthy, bad_events: 1 },
      { state: 'failed', reason: 'sent an error or critical event during the health check' },
    ],
    // Final and not-yet-started chargers are not watched.
    ['succeeded', now, { ...healthy, report: report('failed') }, undefined],
    ['pending', now, { ...healthy, report: report('downloading') }, undefined],
  ] as const)('%s since %i, %j → %j', (state, stateMs, obs, want) => {
    expect(observeDevice({ state, state_ms: stateMs }, obs, now, health, '2.0.0')).toEqual(want);
  });
});

const batchOf = (batch: number, states: UpdateDeviceState[]) => states.map((state) => ({ batch, state }));

describe('nextRolloutStep', () => {
  const running = { status: 'running' as const, current_batch: 1, waived_batch: 0, max_failure_percent: 20 };
  it.each([
    [
      'nothing started',
      { ...running, current_batch: 0 },
      [...batchOf(1, ['pending'])],
      { kind: 'start_batch', batch: 1 },
    ],
    [
      'batch under way',
      running,
      [...batchOf(1, ['installed', 'succeeded']), ...batchOf(2, ['pending'])],
      { kind: 'wait' },
    ],
    [
      'batch healthy',
      running,
      [...batchOf(1, ['succeeded', 'skipped', 'succeeded']), ...batchOf(2, ['pending'])],
      { kind: 'start_batch', batch: 2 },
    ],
    // One failure in five is 20 %: not more than the threshold.
    [
      'at the threshold',
      running,
      [
        ...batchOf(1, ['failed', 'succeeded', 'succeeded', 'succeeded', 'succeeded']),
        ...batchOf(2, ['pending']),
      ],
      { kind: 'start_batch', batch: 2 },
    ],
    [
      'over the threshold, batch not done yet',
      running,
      [
        ...batchOf(1, ['failed', 'rolled_back', 'installing', 'queued', 'queued']),
        ...batchOf(2, ['pending']),
      ],
      {
        kind: 'pause',
        reason: 'batch 1 of 2: 2 of 5 chargers failed (more than max_failure_percent 20)',
      },
    ],
    [
      'over the threshold but waived by the operator',
      { ...running, waived_batch: 1 },
      [...batchOf(1, ['failed', 'failed', 'succeeded']), ...batchOf(2, ['pending'])],
      { kind: 'start_batch', batch: 2 },
    ],
    [
      'last batch done',
      { ...running, current_batch: 2 },
      [...batchOf(1, ['succeeded']), ...batchOf(2, ['succeeded'])],
      { kind: 'complete' },
    ],
    ['every charger skipped', running, batchOf(1, ['skipped', 'skipped']), { kind: 'complete' }],
    ['paused', { ...running, status: 'paused' as const }, batchOf(1, ['succeeded']), { kind: 'wait' }],
    ['cancelled', { ...running, status: 'cancelled' as const }, batchOf(1, ['cancelled']), { kind: 'wait' }],
  ] as const)('%s', (_, update, devices, want) => {
    expect(nextRolloutStep(update, devices)).toEqual(want);
  });

  it('pauses at any failure with a threshold of 0', () => {
    const step = nextRolloutStep({ ...running, max_failure_percent: 0 }, batchOf(1, ['failed', 'queued']));
    expect(step.kind).toBe('pause');
  });
});

describe('batchToWaive and batchesOf', () => {
  const update = { current_batch: 1, max_failure_percent: 20, waived_batch: 0 };
  const devices = [...batchOf(1, ['failed', 'failed', 'succeeded']), ...batchOf(2, ['pending', 'pending'])];
  it('waives the current batch when it is over the threshold, else keeps the earlier waiver', () => {
    expect(batchToWaive(update, devices)).toBe(1);
    expect(batchToWaive(update, batchOf(1, ['succeeded', 'queued']))).toBe(0);
    expect(batchToWaive({ ...update, current_batch: 0 }, devices)).toBe(0);
  });
  it('shows each batch as failed, running, completed or pending', () => {
    expect(batchesOf(update, devices)).toEqual([
      { index: 1, status: 'failed', device_count: 3 },
      { index: 2, status: 'pending', device_count: 2 },
    ]);
    expect(
      batchesOf({ ...update, current_batch: 2 }, [...batchOf(1, ['succeeded']), ...batchOf(2, ['queued'])]),
    ).toEqual([
      { index: 1, status: 'completed', device_count: 1 },
      { index: 2, status: 'running', device_count: 1 },
    ]);
  });
  it('counts chargers by state', () => {
    expect(progressOf(devices)).toEqual({ failed: 2, succeeded: 1, pending: 2 });
  });
});
