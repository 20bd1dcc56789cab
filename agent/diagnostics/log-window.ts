/**
 * Which log lines belong in a diagnostics archive (DESIGN.md §20): pure functions over the agent's pino JSON lines
 * (logger.ts) and its rotated files (rotating-file.ts). A line is kept when its own time falls in the window; a
 * line without a readable time (cut by a power loss, written by something else) when its file overlaps the window.
 */
import { LOG_FILE } from '../logger.js';

/** Inclusive bounds, ms since the epoch (the agent's clock). */
export interface TimeWindow {
  startMs: number;
  endMs: number;
}

/** The times a log file covers, inclusive. */
export type TimeSpan = TimeWindow;

/**
 * pino writes `{"level":30,"time":"2026-…Z",…` (isoTime; epoch ms without it): found by a prefix match so that
 * most lines need no JSON.parse (up to 20 MiB of them).
 */
const PINO_PREFIX = /^\{"level":(?:\d+|"[a-z]+"),"time":(?:"([^"\\]{1,64})"|(-?\d{1,16}))[,}]/;

function timeValue(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  if (typeof value === 'string') {
    const ms = Date.parse(value);
    return Number.isNaN(ms) ? undefined : ms;
  }
  return undefined;
}

/** A log line's time in ms, or undefined when it has none that can be read. */
export function lineTimeMs(line: string): number | undefined {
  const match = PINO_PREFIX.exec(line);
  if (match) return timeValue(match[1] ?? Number(match[2]));
  if (!line.startsWith('{')) return undefined;
  try {
    const parsed = JSON.parse(line) as unknown;
    return parsed !== null && typeof parsed === 'object' && 'time' in parsed
      ? timeValue(parsed.time)
      : undefined;
  } catch {
    return undefined;
  }
}

export function inWindow(ms: number, window: TimeWindow): boolean {
  return ms >= window.startMs && ms <= window.endMs;
}

export function overlaps(span: TimeSpan, window: TimeWindow): boolean {
  return span.startMs <= window.endMs && span.endMs >= window.startMs;
}

export function keepLine(timeMs: number | undefined, fileOverlaps: boolean, window: TimeWindow): boolean {
  return timeMs === undefined ? fileOverlaps : inWindow(timeMs, window);
}

/**
 * A file's span from the first time at its head and the last at its tail; where none can be read, its last
 * modification (written just after its last line) stands in.
 */
export function fileSpan(first: number | undefined, last: number | undefined, mtimeMs: number): TimeSpan {
  const a = first ?? last ?? mtimeMs;
  const b = last ?? mtimeMs;
  return { startMs: Math.min(a, b), endMs: Math.max(a, b) };
}

/**
 * The first readable time among the lines of `text`, a file's head: its last line is whole only when `whole`
 * (the head is the entire file).
 */
export function firstLineTime(text: string, whole: boolean): number | undefined {
  const lines = text.split('\n');
  if (!whole) lines.pop();
  for (const line of lines) {
    const ms = lineTimeMs(line);
    if (ms !== undefined) return ms;
  }
  return undefined;
}

/** The last readable time among the lines of `text`, a file's tail: its first line is whole only when `whole`. */
export function lastLineTime(text: string, whole: boolean): number | undefined {
  const lines = text.split('\n');
  if (!whole) lines.shift();
  for (let i = lines.length - 1; i >= 0; i--) {
    const ms = lineTimeMs(lines[i] ?? '');
    if (ms !== undefined) return ms;
  }
  return undefined;
}

const ROTATED = new RegExp(`^${LOG_FILE.replace(/\./g, '\\.')}(?:\\.(\\d+))?$`);

/**
 * The agent's log files among `names`, oldest first: `agent.log.N` … `agent.log.1`, then `agent.log`
 * (rotating-file.ts shifts each up by one at a rotation). Anything else in the directory is not the agent's.
 */
export function logFilesOldestFirst(names: readonly string[]): string[] {
  const found: Array<{ name: string; index: number }> = [];
  for (const name of names) {
    const match = ROTATED.exec(name);
    if (match) found.push({ name, index: match[1] === undefined ? 0 : Number(match[1]) });
  }
  return found.sort((a, b) => b.index - a.index).map((f) => f.name);
}
