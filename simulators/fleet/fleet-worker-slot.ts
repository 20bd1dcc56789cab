/**
 * The main thread's end of one fleet worker thread: starts it on its slice of the fleet, keeps its latest live
 * report, and asks it for windows and, at the stop, for its summary.
 */
import { Worker } from 'node:worker_threads';
import type { FleetLiveStats } from './fleet-live.js';
import type { FleetOptions } from './fleet-options.js';
import type { FleetHistograms, FleetSummary } from './fleet-summary.js';
import type { FleetToMain, MainToFleet } from './fleet-worker-messages.js';
import type { LatencySnapshot } from './latency-histogram.js';
import type { FleetStatsWindowParts } from './stats-window.js';

const WORKER_URL = new URL('./fleet-worker.js', import.meta.url);

export interface WorkerSlot {
  worker: Worker;
  latest?: { live: FleetLiveStats; latency: LatencySnapshot; command: LatencySnapshot };
  windows: Map<number, { resolve: (parts: FleetStatsWindowParts) => void; reject: (e: Error) => void }>;
  exited: Promise<number>;
  gone?: boolean;
  failure?: string;
  /** The backlog, heap and handles of its last report that had them. */
  lastResources?: Pick<FleetLiveStats, 'outbox_backlog' | 'heap_used_bytes' | 'active_handles'>;
}

/**
 * Starts a worker on `workerData`. A worker gone answers no more windows; one gone before the stop (a crash,
 * `onLost`) stops the fleet, whose summary counts it as an error (`worker_failed`).
 */
export function startWorkerSlot(workerData: FleetOptions, onLost: (slot: WorkerSlot) => void): WorkerSlot {
  const worker = new Worker(WORKER_URL, { workerData });
  const slot: WorkerSlot = {
    worker,
    windows: new Map(),
    exited: new Promise((resolve) => worker.once('exit', resolve)),
  };
  worker.on('error', (error) => {
    slot.failure ??= error.message;
  });
  void slot.exited.then(() => {
    slot.gone = true;
    for (const pending of slot.windows.values())
      pending.reject(new Error(slot.failure ?? 'a fleet worker exited'));
    slot.windows.clear();
    onLost(slot);
  });
  return slot;
}

function onMessage(slot: WorkerSlot, message: FleetToMain, started: () => void, failed: (e: Error) => void) {
  switch (message.type) {
    case 'live':
      slot.latest = {
        live: { ...slot.lastResources, ...message.live },
        latency: message.latency,
        command: message.command,
      };
      if (message.live.active_handles !== undefined)
        slot.lastResources = {
          outbox_backlog: message.live.outbox_backlog ?? 0,
          heap_used_bytes: message.live.heap_used_bytes ?? 0,
          active_handles: message.live.active_handles,
        };
      started();
      break;
    case 'window':
      slot.windows.get(message.id)?.resolve(message.parts);
      slot.windows.delete(message.id);
      break;
    case 'failed':
      slot.failure = message.message;
      failed(new Error(message.message));
      break;
    case 'summary':
      break;
  }
}

/** Follows the worker's reports; settles once its fleet runs (its first `live`), or fails. */
export function workerStarted(slot: WorkerSlot): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    slot.worker.on('message', (message: FleetToMain) => onMessage(slot, message, resolve, reject));
    void slot.exited.then(() => reject(new Error(slot.failure ?? 'a fleet worker exited')));
  });
}

/** The worker's window `id`. */
export function windowOf(slot: WorkerSlot, id: number): Promise<FleetStatsWindowParts> {
  return new Promise<FleetStatsWindowParts>((resolve, reject) => {
    slot.windows.set(id, { resolve, reject });
    slot.worker.postMessage({ type: 'window', id } satisfies MainToFleet);
  });
}

/** The worker's summary once it stopped its chargers; undefined if it is gone. */
export function summaryOf(
  slot: WorkerSlot,
): Promise<{ summary: FleetSummary; histograms: FleetHistograms } | undefined> {
  return new Promise((resolve) => {
    if (slot.gone) return resolve(undefined);
    slot.worker.on('message', (message: FleetToMain) => {
      if (message.type === 'summary') resolve({ summary: message.summary, histograms: message.histograms });
    });
    void slot.exited.then(() => resolve(undefined));
    slot.worker.postMessage({ type: 'stop' } satisfies MainToFleet);
  });
}
