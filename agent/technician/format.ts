/**
 * Small text helpers for the technician commands (`status`, `diag`, `schedules`, `commands`): short, aligned,
 * no colours (the output is read on a terminal over SSH or a serial console, and pasted into tickets).
 * Times are UTC ISO-8601 without milliseconds — the same clock as the agent's log lines — with a relative age.
 */

import { printable } from './terminal-text.js';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** `2025-03-30T01:59:00Z` */
export function isoShort(at: string | number | Date): string {
  const date = at instanceof Date ? at : new Date(at);
  if (Number.isNaN(date.getTime())) return String(at);
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** `45 s`, `3 min`, `2 h 05 min`, `3 d 4 h`. Absolute value; the caller says "ago" or "in". */
export function duration(ms: number): string {
  const abs = Math.abs(ms);
  if (abs < MINUTE) return `${Math.round(abs / SECOND)} s`;
  if (abs < HOUR) return `${Math.floor(abs / MINUTE)} min`;
  if (abs < DAY) {
    const h = Math.floor(abs / HOUR);
    const m = Math.floor((abs % HOUR) / MINUTE);
    return `${h} h ${String(m).padStart(2, '0')} min`;
  }
  const d = Math.floor(abs / DAY);
  const h = Math.floor((abs % DAY) / HOUR);
  return h === 0 ? `${d} d` : `${d} d ${h} h`;
}

/** `12 s ago` / `in 3 min`, relative to `now`. */
export function relative(at: string | number, now: number): string {
  const t = typeof at === 'number' ? at : Date.parse(at);
  if (Number.isNaN(t)) return '?';
  const delta = t - now;
  return delta <= 0 ? `${duration(delta)} ago` : `in ${duration(delta)}`;
}

/** `2025-03-30T01:59:00Z (12 s ago)` */
export function when(at: string | number, now: number): string {
  return `${isoShort(at)} (${relative(at, now)})`;
}

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 * 1024 * 1024) return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return `${(n / 1024 / 1024 / 1024).toFixed(2)} GiB`;
}

export function kw(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return '-';
  return `${n.toFixed(1)} kW`;
}

/** A signed duration in seconds with one decimal: `+0.3 s`, `-12.0 s`. */
export function signedSeconds(ms: number): string {
  const tenths = Math.round(ms / 100);
  return `${tenths < 0 ? '-' : '+'}${(Math.abs(tenths) / 10).toFixed(1)} s`;
}

/** Cuts `text` to `max` characters with an ellipsis. */
export function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, Math.max(0, max - 1))}…`;
}

/**
 * Aligns rows into columns (two spaces apart); the last column is not padded. `indent` prefixes each line.
 */
export function table(raw: ReadonlyArray<ReadonlyArray<string>>, indent = ''): string[] {
  // Cells may hold the platform's text: made printable before they are measured.
  const rows = raw.map((row) => row.map(printable));
  const widths: number[] = [];
  for (const row of rows) {
    row.forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 0, cell.length);
    });
  }
  return rows.map(
    (row) =>
      indent +
      row
        .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
        .join('  ')
        .trimEnd(),
  );
}

/** `label  value` lines with the labels padded to one width. */
export function fields(pairs: ReadonlyArray<readonly [string, string]>, indent = ''): string[] {
  const width = Math.max(0, ...pairs.map(([label]) => label.length));
  return pairs.map(([label, value]) => `${indent}${label.padEnd(width)}  ${printable(value)}`);
}
