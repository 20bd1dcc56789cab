/** Display helpers: numbers and times as an operator reads them. */

export function kw(value: number | undefined): string {
  if (value === undefined || Number.isNaN(value)) return '—';
  return `${value.toFixed(Math.abs(value) >= 100 ? 0 : 1)} kW`;
}

export function kwh(value: number | undefined): string {
  if (value === undefined || Number.isNaN(value)) return '—';
  return `${value.toFixed(Math.abs(value) >= 100 ? 0 : 2)} kWh`;
}

export function percent(value: number | undefined): string {
  return value === undefined ? '—' : `${Math.round(value)} %`;
}

export function celsius(value: number | undefined): string {
  return value === undefined ? '—' : `${value.toFixed(1)} °C`;
}

/** A timestamp in the browser's own time zone, to the second. */
export function dateTime(iso: string | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toLocaleString(undefined, {
    year: 'numeric',
    month: 'short',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });
}

/** "12 s ago", "4 min ago", or the time itself past a day. */
export function ago(iso: string | undefined, nowMs: number): string {
  if (!iso) return '—';
  const ms = nowMs - Date.parse(iso);
  if (Number.isNaN(ms)) return iso;
  if (ms < 0) return 'just now';
  if (ms < 60_000) return `${Math.round(ms / 1000)} s ago`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min ago`;
  if (ms < 86_400_000) return `${Math.round(ms / 3_600_000)} h ago`;
  return dateTime(iso);
}

/** `<input type="datetime-local">`'s value (local time) as an RFC 3339 instant, or undefined when empty. */
export function localInputToIso(value: string): string | undefined {
  if (!value) return undefined;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

/** An RFC 3339 instant as `<input type="datetime-local">`'s value, in local time. */
export function isoToLocalInput(iso: string | null | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}
