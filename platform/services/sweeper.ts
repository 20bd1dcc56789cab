import type { FastifyBaseLogger } from 'fastify';
import type { StorageFault } from '../storage/storage-faults.js';
import { storageFaultOf } from '../storage/storage-faults.js';
import type { Store } from '../storage/store.js';
import { ABANDONED_UPLOAD_MS, type ArtifactService } from './artifact-service.js';
import type { CommandService } from './command-service.js';
import type { DeviceSecretService } from './device-secret-service.js';
import type { UpdateService } from './update-service.js';

const STALE_UPLOADS_EVERY_MS = 3_600_000;
/** The update gate reads every open update's chargers: every few seconds is soon enough for batches. */
const UPDATE_GATE_EVERY_MS = 5_000;

/**
 * Expires overdue commands, completes ended controls, promotes pending device secrets past their grace, removes
 * artifact uploads an instance abandoned and moves updates along (the update gate), on a timer. Several instances share one database: one of them sweeps at
 * a time (an advisory lock on PostgreSQL). The timer skips a turn while another sweep runs; `sweep()` asked for
 * explicitly waits for it and runs its own.
 */
export function createSweeper(deps: {
  store: Pick<Store, 'runAlone'>;
  commands: Pick<CommandService, 'sweep'>;
  secrets: Pick<DeviceSecretService, 'promoteExpired'>;
  artifacts: Pick<ArtifactService, 'removeStaleUploads'>;
  updates: Pick<UpdateService, 'runGate'>;
  now: () => number;
  everyMs: number;
  /** How often (platform time) a turn also runs the update gate; UPDATE_GATE_EVERY_MS unless a test shortens it. */
  gateEveryMs?: number;
  log: FastifyBaseLogger;
  logStorageFault: (log: FastifyBaseLogger, fault: StorageFault) => void;
}) {
  // Abandoned uploads are a day old before they go: the timer looks for them hourly, not every turn.
  let staleCheckedMs = Number.NEGATIVE_INFINITY;
  let gateRanMs = Number.NEGATIVE_INFINITY;
  const gateEveryMs = deps.gateEveryMs ?? UPDATE_GATE_EVERY_MS;
  const sweepUnlessRunning = (everything: boolean) =>
    deps.store.runAlone('sweep', async () => {
      const nowMs = deps.now();
      await deps.commands.sweep(nowMs);
      await deps.secrets.promoteExpired(nowMs);
      if (everything || nowMs - staleCheckedMs >= STALE_UPLOADS_EVERY_MS) {
        staleCheckedMs = nowMs;
        await deps.artifacts.removeStaleUploads(nowMs - ABANDONED_UPLOAD_MS);
      }
      if (everything || nowMs - gateRanMs >= gateEveryMs) {
        gateRanMs = nowMs;
        await deps.updates.runGate();
      }
    });
  const timer = setInterval(() => {
    sweepUnlessRunning(false).catch((err: unknown) => {
      const fault = storageFaultOf(err);
      if (fault) deps.logStorageFault(deps.log, fault);
      else deps.log.error({ err }, 'sweep failed');
    });
  }, deps.everyMs);
  timer.unref();
  return {
    async sweep(): Promise<void> {
      while (!(await sweepUnlessRunning(true)).ran) await new Promise((r) => setTimeout(r, 20));
    },
    stop(): void {
      clearInterval(timer);
    },
  };
}
