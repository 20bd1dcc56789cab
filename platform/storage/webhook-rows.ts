import type { WebhookChanges } from './webhook-repository.js';

const CHANGEABLE = [
  'url',
  'events',
  'description',
  'status',
  'disabled_reason',
  'secret_sealed',
  'previous_secret_sealed',
  'previous_secret_until_ms',
] as const;

/**
 * The columns and values of an endpoint update, shared by both backends. Re-enabling clears the failing mark
 * and the reason it was disabled.
 */
export function webhookChangeColumns(changes: WebhookChanges): { columns: string[]; values: unknown[] } {
  const columns: string[] = [];
  const values: unknown[] = [];
  for (const key of CHANGEABLE) {
    const value = changes[key];
    if (value === undefined) continue;
    columns.push(key);
    values.push(key === 'events' ? JSON.stringify(value) : value);
  }
  if (changes.status === 'enabled') {
    if (!columns.includes('disabled_reason')) {
      columns.push('disabled_reason');
      values.push(null);
    }
    columns.push('failing_since_ms');
    values.push(null);
  }
  return { columns, values };
}
