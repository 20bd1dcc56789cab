/**
 * What the main thread and a fleet worker thread (`fleet-worker.ts`) tell each other (structured-clone
 * messages).
 */
import type { FleetLiveStats } from './fleet-live.js';
import type { FleetHistograms, FleetSummary } from './fleet-summary.js';
import type { LatencySnapshot } from './latency-histogram.js';
import type { FleetStatsWindowParts } from './stats-window.js';

export type MainToFleet = { type: 'window'; id: number } | { type: 'stop' };
export type FleetToMain =
  | { type: 'live'; live: FleetLiveStats; latency: LatencySnapshot; command: LatencySnapshot }
  | { type: 'window'; id: number; parts: FleetStatsWindowParts }
  | { type: 'summary'; summary: FleetSummary; histograms: FleetHistograms }
  | { type: 'failed'; message: string };
