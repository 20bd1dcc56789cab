import { describe, expect, it } from 'vitest';
import { withMaintenance } from '../../../platform/storage/maintenance-scheduler.js';
import type {
  OpenedBackend,
  Repositories,
  RetentionSteps,
} from '../../../platform/storage/maintenance-steps.js';
import {
  DIAGNOSTICS_BATCH,
  RETENTION_BATCH,
  type RetentionPolicy,
} from '../../../platform/storage/retention-policy.js';
import { gate } from '../../helpers/held-jobs.js';

/**
 * The scheduler above the backends (`maintenance-scheduler.ts`) over steps that only record what they are
 * asked: which kinds a policy prunes and from when, the batches it repeats, what it counts, one pass at a time.
 */

const DAY = 86_400_000;
const NOW = Date.UTC(2026, 5, 1);

interface Fake {
  calls: string[];
  steps: RetentionSteps;
}

/** Steps with `batches[kind]` counts to answer in turn (then 0), over devices d1 and d2. */
function fakeSteps(batches: Partial<Record<string, number[]>> = {}, alone = true): Fake {
  const calls: string[] = [];
  const next = (kind: string) => batches[kind]?.shift() ?? 0;
  const day = (ms: number) => (NOW - ms) / DAY;
  return {
    calls,
    steps: {
      async alone(pass) {
        calls.push('alone');
        if (!alone) return false;
        await pass();
        return true;
      },
      async pruneTelemetry(before, count) {
        calls.push(`telemetry ${day(before)}`);
        count('telemetry', next('telemetry'));
      },
      async devicesAfter(after) {
        return after === '' ? ['d1', 'd2'] : [];
      },
      async pruneDeviceHistory(id, before) {
        calls.push(`history ${id} ${day(before)}`);
        return { events: next(`events ${id}`), firmware: next(`firmware ${id}`) };
      },
      async pruneCommands(before, count) {
        calls.push(`commands ${day(before)}`);
        count('commands', next('commands'));
      },
      async pruneControls(before) {
        calls.push(`controls ${day(before)}`);
        return next('controls');
      },
      async pruneRollups(id, before) {
        calls.push(`rollups ${id} ${day(before)}`);
        return next(`rollups ${id}`);
      },
      async pruneDiagnostics(before) {
        calls.push(`diagnostics ${day(before)}`);
        return next('diagnostics');
      },
    },
  };
}

function storeOver(steps: RetentionSteps, policy: RetentionPolicy) {
  const backend: OpenedBackend = {
    repositories: {} as Repositories,
    upkeep: {
      rollups: { catchUp: async () => undefined, lagRows: () => 7, idle: async () => undefined },
      retention: steps,
      exclusively: async (_job, run) => ({ ran: true, value: await run() }),
    },
    close: async () => undefined,
  };
  return withMaintenance(backend, { policy, now: () => NOW, background: false });
}

describe('retention passes above the backends', () => {
  it.each([
    {
      policy: { telemetryDays: 30, historyDays: 180, rollupDays: 1830 },
      calls: [
        'alone',
        'telemetry 30',
        'history d1 180',
        'history d2 180',
        'commands 180',
        'controls 180',
        'rollups d1 1830',
        'rollups d2 1830',
        'diagnostics 30',
      ],
    },
    // Diagnostics go after 30 days whatever the policy (DESIGN.md §20).
    { policy: { telemetryDays: 0, historyDays: 0, rollupDays: 0 }, calls: ['alone', 'diagnostics 30'] },
    {
      policy: { telemetryDays: 7, historyDays: 0, rollupDays: 10 },
      calls: ['alone', 'telemetry 7', 'rollups d1 10', 'rollups d2 10', 'diagnostics 30'],
    },
  ])('prunes the kinds $policy keeps for a while, each from its own cutoff', async ({ policy, calls }) => {
    const fake = fakeSteps();
    const store = storeOver(fake.steps, policy);
    await store.runMaintenance();
    expect(fake.calls).toEqual(calls);
    expect(store.maintenanceStats()).toMatchObject({
      retentionPasses: 1,
      lastRetentionPassMs: NOW,
      lastRetentionPassDurationMs: 0,
      rollupLagRows: 7,
    });
  });

  it('repeats a device or controls batch while it was whole, and counts every row by kind', async () => {
    const B = RETENTION_BATCH;
    const fake = fakeSteps({
      telemetry: [5],
      'events d1': [B, 3],
      'firmware d1': [1, B, 0],
      commands: [4],
      controls: [B, B, 2],
      'rollups d2': [B, 1],
      diagnostics: [DIAGNOSTICS_BATCH, 2],
    });
    const store = storeOver(fake.steps, { telemetryDays: 30, historyDays: 180, rollupDays: 1830 });
    await store.runMaintenance();
    expect(fake.calls.filter((c) => c.startsWith('history d1'))).toHaveLength(3);
    expect(fake.calls.filter((c) => c.startsWith('history d2'))).toHaveLength(1);
    expect(fake.calls.filter((c) => c.startsWith('controls'))).toHaveLength(3);
    expect(fake.calls.filter((c) => c.startsWith('rollups d2'))).toHaveLength(2);
    expect(fake.calls.filter((c) => c.startsWith('diagnostics'))).toHaveLength(2);
    expect(store.maintenanceStats().pruned).toEqual({
      telemetry: 5,
      device_events: B + 3,
      firmware_status: B + 1,
      commands: 4,
      controls: 2 * B + 2,
      energy_rollups: B + 1,
      diagnostics: DIAGNOSTICS_BATCH + 2,
    });
  });

  it('counts no pass when another instance was pruning', async () => {
    const fake = fakeSteps({}, false);
    const store = storeOver(fake.steps, { telemetryDays: 30, historyDays: 180, rollupDays: 1830 });
    await store.runMaintenance();
    expect(fake.calls).toEqual(['alone']);
    expect(store.maintenanceStats()).toMatchObject({ retentionPasses: 0, lastRetentionPassMs: null });
  });

  it('runs one pass at a time: calls during a pass share it', async () => {
    const held = gate();
    const fake = fakeSteps();
    const steps: RetentionSteps = {
      ...fake.steps,
      async alone(pass) {
        await held.promise;
        return fake.steps.alone(pass);
      },
    };
    const store = storeOver(steps, { telemetryDays: 30, historyDays: 0, rollupDays: 0 });
    const first = store.runMaintenance();
    const second = store.runMaintenance();
    held.open();
    await Promise.all([first, second]);
    expect(fake.calls).toEqual(['alone', 'telemetry 30', 'diagnostics 30']);
    expect(store.maintenanceStats().retentionPasses).toBe(1);
    await store.runMaintenance();
    expect(store.maintenanceStats().retentionPasses).toBe(2);
  });
});
