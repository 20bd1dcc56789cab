import type { NewFirmwareReport } from './store.js';

/** A report's optional columns in table order (version, progress, message, update_id, report_id), null when absent. */
export function firmwareReportValues(r: NewFirmwareReport): Array<string | number | null> {
  return [r.version ?? null, r.progress ?? null, r.message ?? null, r.update_id ?? null, r.report_id ?? null];
}
