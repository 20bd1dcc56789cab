/**
 * What a diagnostics archive holds and how it was made (`manifest.json`), and the name of its top directory.
 * Pure.
 */
import type { LogSource } from './log-collect.js';
import type { TimeWindow } from './log-window.js';

export const MANIFEST_FORMAT = 1;

/** The part files, relative to the archive's top directory. */
export const PART_FILES = {
  manifest: 'manifest.json',
  status: 'status.json',
  diag: 'diag.json',
  commands: 'commands.json',
  configuration: 'configuration.json',
  logs: 'logs/agent.log',
} as const;

export const PARTS: string[] = Object.values(PART_FILES);

/** `20260327T213000Z`: UTC, no separators a file system or a shell could mind. */
export function compactUtc(ms: number): string {
  return new Date(ms)
    .toISOString()
    .replace(/\.\d{3}Z$/, 'Z')
    .replace(/[-:]/g, '');
}

/**
 * `diagnostics-<who>-<UTC time>`: `who` (the serial number, else the device id) reduced to characters safe in a
 * file name, so that a serial with a slash or a space cannot make a path.
 */
export function archiveRootName(who: string | undefined, nowMs: number): string {
  const safe = (who ?? '').replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 64);
  return `diagnostics-${/[A-Za-z0-9]/.test(safe) ? safe : 'charger'}-${compactUtc(nowMs)}`;
}

export interface LogsSummary {
  file: string;
  lines: number;
  bytes: number;
  /** The oldest lines left out to stay under the size limit. */
  dropped_lines: number;
  dropped_bytes: number;
  sources: LogSource[];
}

export interface Manifest {
  format: number;
  root: string;
  created_at: string;
  agent_version: string;
  sn: string | null;
  device_id: string | null;
  window: { start: string; end: string };
  max_bytes: number;
  parts: string[];
  logs: LogsSummary;
  truncated: boolean;
  notes: string[];
}

export function manifestOf(input: {
  root: string;
  now: number;
  agentVersion: string;
  sn: string | undefined;
  deviceId: string | undefined;
  window: TimeWindow;
  maxBytes: number;
  logs: LogsSummary;
  notes: string[];
}): Manifest {
  const truncated = input.logs.dropped_lines > 0 || input.logs.dropped_bytes > 0;
  const notes = [...input.notes];
  if (truncated) {
    notes.push(
      `the oldest ${input.logs.dropped_lines} log line(s) (${input.logs.dropped_bytes} bytes) of the window were ` +
        `left out to keep the archive within ${input.maxBytes} bytes`,
    );
  }
  return {
    format: MANIFEST_FORMAT,
    root: input.root,
    created_at: new Date(input.now).toISOString(),
    agent_version: input.agentVersion,
    sn: input.sn ?? null,
    device_id: input.deviceId ?? null,
    window: {
      start: new Date(input.window.startMs).toISOString(),
      end: new Date(input.window.endMs).toISOString(),
    },
    max_bytes: input.maxBytes,
    parts: PARTS,
    logs: input.logs,
    truncated,
    notes,
  };
}
