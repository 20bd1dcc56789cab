/**
 * Form fields to request bodies. Empty optional fields are left out; anything typed is sent as typed (a number
 * field with text in it is sent as that text) so that the API's own validation answers, in its own words.
 */
export function optionalNumber(value: string): number | string | undefined {
  const v = value.trim();
  if (v === '') return undefined;
  const n = Number(v);
  return Number.isFinite(n) ? n : v;
}

export function requiredNumber(value: string): number | string {
  return optionalNumber(value) ?? '';
}

export function compact<T extends Record<string, unknown>>(body: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, v] of Object.entries(body))
    if (v !== undefined && v !== '') out[k as keyof T] = v as T[keyof T];
  return out;
}

/** A schedule id the operator can keep or change: readable and unlikely to collide. */
export function newScheduleId(nowMs: number, random: () => number): string {
  const stamp = new Date(nowMs).toISOString().slice(0, 16).replace(/[-:T]/g, '');
  return `sch-${stamp}-${Math.floor(random() * 36 ** 4)
    .toString(36)
    .padStart(4, '0')}`;
}
