import type { ChargingRecord } from '../../shared/resources.js';

/** Charging records as CSV (RFC 4180: CRLF lines, fields quoted when they hold a comma, quote or line break). */
export const RECORD_COLUMNS = [
  'record_id',
  'device_id',
  'connector_id',
  'start_time',
  'end_time',
  'energy',
  'max_power',
  'avg_power',
  'cost',
  'meter_start',
  'meter_end',
  'vin',
  'soc_start',
  'soc_end',
] as const;

export function recordsToCsv(records: readonly ChargingRecord[]): string {
  const lines = [RECORD_COLUMNS.join(',')];
  for (const r of records) {
    const v = r.vehicle_info;
    const values: unknown[] = [
      r.record_id,
      r.device_id,
      r.connector_id,
      r.start_time,
      r.end_time,
      r.energy,
      r.max_power,
      r.avg_power,
      r.cost,
      r.meter_start,
      r.meter_end,
      v?.vin,
      v?.soc_start,
      v?.soc_end,
    ];
    lines.push(values.map(csvField).join(','));
  }
  return `${lines.join('\r\n')}\r\n`;
}

export function csvField(value: unknown): string {
  if (value === undefined || value === null) return '';
  let text = String(value);
  // A cell starting with = + - @ is a formula to a spreadsheet: prefix it so an id can never run as one.
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}
