/**
 * HTTP range requests (RFC 9110 §14) for artifact downloads, pure: which bytes of a file of `size` bytes a
 * request asks for. One range only: a charger resuming a download asks for the rest of the file
 * (`bytes=N-`); anything the platform does not serve as a part (several ranges, another unit, bad syntax, an
 * `If-Range` that is not the file's ETag) gets the whole file, as RFC 9110 lets a server do.
 */
export type RangeDecision =
  | { kind: 'whole' }
  | { kind: 'partial'; start: number; end: number }
  | { kind: 'unsatisfiable' };

const SINGLE = /^bytes=(\d*)-(\d*)$/;

export function decideRange(
  range: string | undefined,
  ifRange: string | undefined,
  size: number,
  etag: string,
): RangeDecision {
  if (range === undefined) return { kind: 'whole' };
  // A validator other than the current ETag (or a date: the platform sends no Last-Modified): the file changed.
  if (ifRange !== undefined && ifRange.trim() !== etag) return { kind: 'whole' };
  const match = SINGLE.exec(range.trim());
  if (!match) return { kind: 'whole' };
  const [, first, last] = match as unknown as [string, string, string];
  if (first === '' && last === '') return { kind: 'whole' };
  if (first === '') {
    const suffix = Number(last);
    if (!Number.isSafeInteger(suffix)) return { kind: 'whole' };
    if (suffix === 0) return { kind: 'unsatisfiable' };
    return { kind: 'partial', start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  const end = last === '' ? Number.MAX_SAFE_INTEGER : Number(last);
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || end < start) return { kind: 'whole' };
  if (start >= size) return { kind: 'unsatisfiable' };
  return { kind: 'partial', start, end: Math.min(end, size - 1) };
}
