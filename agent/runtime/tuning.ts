/**
 * What a running agent is told (its configuration) and how fast it goes (its tuning: intervals, backoff,
 * shutdown bounds). Tests and the fleet simulator shorten the tuning; a charger runs the defaults.
 */

import type { KeyObject } from 'node:crypto';
import { DEFAULT_BACKOFF } from '../core/backoff.js';
import type { OutboxCap } from '../core/outbox-policy.js';
import { DEFAULT_TELEMETRY_INTERVALS, type TelemetryIntervals } from '../core/telemetry.js';
import { DEFAULT_HEARTBEAT_INTERVAL_MS } from '../link/heartbeat-loop.js';
import { DEFAULT_SAFETY_INTERVAL_MS } from './control-loop.js';
import { PERSIST_INTERVAL_MS } from './sampler.js';

export interface AgentRuntimeConfig {
  dataDir: string;
  platformUrl: string;
  sn: string;
  model?: string;
  manufacturer?: string;
  firmware?: string;
  /** PEM of the platform's CA (`--ca` file contents). */
  ca?: string;
  /** The charger's TLS client certificate (PEM, with any intermediates after it) and key, on every connection. */
  clientCert?: { cert: string; key: string };
  /** Rotate the device secret this often (two-phase, link/secret-rotation.ts); absent: every 90 days; 0: never. */
  secretRotationDays?: number;
  /** Sign every write with the device secret (for a charger the operator set to require signatures). */
  signRequests?: boolean;
  /** The OEM keys trusted for updates (`--update-key`, read at start); none or absent: every update is refused. */
  updateKeys?: readonly KeyObject[];
}

export interface AgentTuning {
  heartbeatIntervalMs: number;
  pollWaitSeconds: number;
  telemetry: TelemetryIntervals;
  sampleTickMs: number;
  controlSafetyIntervalMs: number;
  backoff: { baseMs: number; capMs: number };
  flushPaceMs: number;
  persistEveryMs: number;
  requestTimeoutMs: number;
  /** Shutdown bounds, ms. */
  shutdownFlushMs: number;
  shutdownHeartbeatMs: number;
  outboxCap?: OutboxCap;
}

export const DEFAULT_TUNING: AgentTuning = {
  heartbeatIntervalMs: DEFAULT_HEARTBEAT_INTERVAL_MS,
  pollWaitSeconds: 25,
  telemetry: DEFAULT_TELEMETRY_INTERVALS,
  sampleTickMs: DEFAULT_TELEMETRY_INTERVALS.activeMs,
  controlSafetyIntervalMs: DEFAULT_SAFETY_INTERVAL_MS,
  backoff: DEFAULT_BACKOFF,
  flushPaceMs: 200,
  persistEveryMs: PERSIST_INTERVAL_MS,
  requestTimeoutMs: 15_000,
  shutdownFlushMs: 5_000,
  shutdownHeartbeatMs: 3_000,
};
