import { DIAGNOSTICS_RETENTION_DAYS } from '../../shared/index.js';
import type { OpenedBackend, RetentionSteps } from './maintenance-steps.js';
import {
  DIAGNOSTICS_BATCH,
  type PrunedKind,
  RETENTION_BATCH,
  type RetentionPolicy,
  type RetentionStats,
} from './retention-policy.js';
import type { ExclusiveJob, Maintenance, Store } from './store.js';

/**
 * Background upkeep above the backends (DESIGN.md §12, §22): the timers, one retention pass at a time, the
 * counts /metrics shows, and the in-process half of `runAlone`. A backend gives the steps (`maintenance-steps.ts`):
 * its queries and transactions, and PostgreSQL's advisory locks. It lives in storage/ because the upkeep is
 * part of the `Store` every caller opens (the server, the admin CLI, tests), and it needs nothing above storage.
 */

/** Rollups stay close behind ingest, so that an energy read has little left to do. */
const ROLLUP_EVERY_MS = 1_000;
const RETENTION_EVERY_MS = 10 * 60_000;
/** Telemetry becomes compactable an hour at a time: a pass a minute keeps the recent table short. */
const COMPACTION_EVERY_MS = 60_000;
const RETENTION_FIRST_MS = 30_000;
const DAY_MS = 86_400_000;
/** Devices read per query while retention walks them. */
const DEVICES_PER_READ = 50;

const ignore = () => undefined;

export interface MaintenanceOptions {
  policy: RetentionPolicy;
  now: () => number;
  /** Keep rollups, retention and the backend's chores going on timers: for the server. */
  background: boolean;
}

/** A function whose concurrent calls share the run in progress. */
function singleFlight(run: () => Promise<void>) {
  let running: Promise<void> | undefined;
  return {
    run() {
      running ??= run().finally(() => {
        running = undefined;
      });
      return running;
    },
    idle: () => running?.catch(ignore) ?? Promise.resolve(),
  };
}

/** The backend's repositories with `Maintenance` implemented over its upkeep steps. */
export function withMaintenance(backend: OpenedBackend, options: MaintenanceOptions): Store {
  const { upkeep } = backend;
  const retention = createRetentionPasses(upkeep.retention, options);
  const timers: NodeJS.Timeout[] = [];
  const chores = (upkeep.chores ?? []).map((c) => ({
    everyMs: c.everyMs,
    ...singleFlight(() => c.run().then(ignore, ignore)),
  }));
  const compaction = singleFlight(async () => {
    await upkeep.compaction?.compact();
  });
  if (options.background) {
    const every = (ms: number, run: () => unknown) => {
      timers.push(setInterval(run, ms).unref());
    };
    every(ROLLUP_EVERY_MS, () => upkeep.rollups.catchUp().catch(ignore));
    // After the rollups: compaction takes only rows they have taken in.
    if (upkeep.compaction) every(COMPACTION_EVERY_MS, () => compaction.run().catch(ignore));
    const prune = () =>
      (upkeep.beforeRetention?.() ?? Promise.resolve()).then(() => retention.pass.run()).catch(ignore);
    every(RETENTION_EVERY_MS, prune);
    timers.push(setTimeout(prune, RETENTION_FIRST_MS).unref());
    for (const chore of chores) every(chore.everyMs, chore.run);
  }
  // Runs of each job in this process: a second call answers at once, without asking the backend.
  const jobs = new Map<ExclusiveJob, Promise<unknown>>();

  const maintenance: Maintenance = {
    async runMaintenance() {
      await upkeep.rollups.catchUp();
      await compaction.run();
      await retention.pass.run();
    },
    async runAlone(job, run) {
      if (jobs.has(job)) return { ran: false };
      // Started a microtask later, once marked running: a call that `run` itself makes finds it running.
      const attempt = Promise.resolve().then(() => upkeep.exclusively(job, run));
      jobs.set(job, attempt);
      try {
        return await attempt;
      } finally {
        jobs.delete(job);
      }
    },
    maintenanceStats() {
      const r = retention.stats();
      return {
        pruned: r.pruned,
        retentionPasses: r.passes,
        lastRetentionPassMs: r.lastPassMs,
        lastRetentionPassDurationMs: r.lastPassDurationMs,
        rollupLagRows: upkeep.rollups.lagRows(),
      };
    },
    async close() {
      for (const t of timers) clearTimeout(t);
      await Promise.all(chores.map((c) => c.idle()));
      await Promise.allSettled(jobs.values());
      await upkeep.rollups.idle();
      await compaction.idle();
      await retention.pass.idle();
      await backend.close();
    },
  };
  return { ...backend.repositories, ...maintenance };
}

/**
 * Retention passes (DESIGN.md §12) under `policy`: telemetry, then history (device events, firmware reports,
 * finished commands with their history, finished controls), then rollups; 0 days keeps that kind forever and
 * charging records are always kept. Diagnostics go after DIAGNOSTICS_RETENTION_DAYS whatever the policy (the
 * contract's promise, DESIGN.md §20). One pass at a time; concurrent calls share it.
 */
function createRetentionPasses(steps: RetentionSteps, { policy, now }: MaintenanceOptions) {
  const pruned: Record<PrunedKind, number> = {
    telemetry: 0,
    device_events: 0,
    firmware_status: 0,
    commands: 0,
    controls: 0,
    energy_rollups: 0,
    diagnostics: 0,
  };
  let passes = 0;
  let lastPassMs: number | null = null;
  let lastPassDurationMs: number | null = null;
  const count = (kind: PrunedKind, rows: number) => {
    pruned[kind] += rows;
  };
  const cutoff = (days: number) => now() - days * DAY_MS;

  /** Runs `perDevice` for every device, a batch of devices at a time, until each has nothing left. */
  const forEachDevice = async (perDevice: (deviceId: string) => Promise<boolean>) => {
    let after = '';
    for (;;) {
      const ids = await steps.devicesAfter(after, DEVICES_PER_READ);
      if (ids.length === 0) return;
      for (const id of ids) {
        while (await perDevice(id)) {
          // This device had a whole batch: there may be more.
        }
      }
      after = ids.at(-1)!;
    }
  };

  const pruneHistory = async (before: number) => {
    await forEachDevice(async (id) => {
      const { events, firmware } = await steps.pruneDeviceHistory(id, before);
      count('device_events', events);
      count('firmware_status', firmware);
      return events === RETENTION_BATCH || firmware === RETENTION_BATCH;
    });
    await steps.pruneCommands(before, count);
    for (;;) {
      const n = await steps.pruneControls(before);
      count('controls', n);
      if (n < RETENTION_BATCH) return;
    }
  };

  const pruneRollups = (before: number) =>
    forEachDevice(async (id) => {
      const n = await steps.pruneRollups(id, before);
      count('energy_rollups', n);
      return n === RETENTION_BATCH;
    });

  const pruneDiagnostics = async (before: number) => {
    for (;;) {
      const n = await steps.pruneDiagnostics(before);
      count('diagnostics', n);
      if (n < DIAGNOSTICS_BATCH) return;
    }
  };

  const work = async () => {
    if (policy.telemetryDays > 0) await steps.pruneTelemetry(cutoff(policy.telemetryDays), count);
    if (policy.historyDays > 0) await pruneHistory(cutoff(policy.historyDays));
    if (policy.rollupDays > 0) await pruneRollups(cutoff(policy.rollupDays));
    await pruneDiagnostics(cutoff(DIAGNOSTICS_RETENTION_DAYS));
  };

  const pass = singleFlight(async () => {
    const started = now();
    // Another instance is pruning: this pass is not one.
    if (!(await steps.alone(work))) return;
    passes++;
    lastPassMs = now();
    lastPassDurationMs = lastPassMs - started;
  });

  return {
    pass,
    stats(): RetentionStats {
      return { pruned: { ...pruned }, passes, lastPassMs, lastPassDurationMs };
    },
  };
}
