/**
 * Paging charging records newest first without walking the history (DESIGN.md §12): a page is found from
 * counts of records per start window (maintained per day, exact at the query's edges), so the storage reads
 * at most about one window's records past the page, however deep the page is.
 *
 * Pure: backends count; this decides where a page lies.
 */

export const DAY_MS = 86_400_000;
export const dayOf = (ms: number): number => Math.floor(ms / DAY_MS) * DAY_MS;

/** `n` matching records start in [lowMs, highMs). Windows are given newest first and do not overlap. */
export interface StartWindow {
  lowMs: number;
  highMs: number;
  n: number;
}

export interface PageLocation {
  /** Read matching records starting before this (null: no bound), newest first… */
  beforeMs: number | null;
  /** …and not before this (null: past every window; the caller bounds the tail it knows of). */
  fromMs: number | null;
  /** How many of those to skip: the page's offset less the records of the windows above. */
  skip: number;
}

/** Where positions [offset, offset + size) of the records lie, given the counts of their start windows. */
export function locatePage(windows: readonly StartWindow[], offset: number, size: number): PageLocation {
  let above = 0;
  let first = -1;
  for (let i = 0; i < windows.length; i++) {
    if (above + windows[i]!.n > offset) {
      first = i;
      break;
    }
    above += windows[i]!.n;
  }
  if (first < 0) {
    // Beyond every window: only what starts below the lowest one is left.
    return { beforeMs: windows.at(-1)?.lowMs ?? null, fromMs: null, skip: offset - above };
  }
  let seen = above;
  const last = offset + size - 1;
  for (let i = first; i < windows.length; i++) {
    seen += windows[i]!.n;
    if (seen > last)
      return { beforeMs: windows[first]!.highMs, fromMs: windows[i]!.lowMs, skip: offset - above };
  }
  return { beforeMs: windows[first]!.highMs, fromMs: null, skip: offset - above };
}

/**
 * The edges of a query over [startMs, endMs) (either open) that are counted exactly, not from the daily
 * counters: the part day at its end, and the day at its start (its zero-length sessions on `startMs` do not
 * overlap the range), or the one window when both lie in the same day. Newest first.
 */
export function startEdges(startMs: number | undefined, endMs: number | undefined): Array<[number, number]> {
  const low = startMs === undefined ? undefined : dayOf(startMs);
  const high = endMs === undefined ? undefined : dayOf(endMs);
  if (startMs !== undefined && endMs !== undefined && low === high) return [[startMs, endMs]];
  const out: Array<[number, number]> = [];
  if (endMs !== undefined && high! < endMs) out.push([high!, endMs]);
  if (startMs !== undefined) out.push([startMs, Math.min(low! + DAY_MS, endMs ?? Number.POSITIVE_INFINITY)]);
  return out;
}

/**
 * The start windows of that query, newest first: its edges with their exact counts (`exact`, in the order of
 * `startEdges`) and the whole days between them from the daily counters.
 */
export function startWindows(
  startMs: number | undefined,
  endMs: number | undefined,
  dayCounts: ReadonlyMap<number, number>,
  exact: readonly number[],
): StartWindow[] {
  const edges = startEdges(startMs, endMs).map(([lowMs, highMs], i) => ({ lowMs, highMs, n: exact[i] ?? 0 }));
  if (startMs !== undefined && endMs !== undefined && dayOf(startMs) === dayOf(endMs)) return edges;
  const low = startMs === undefined ? undefined : dayOf(startMs);
  const high = endMs === undefined ? undefined : dayOf(endMs);
  const days = [...dayCounts.keys()]
    .filter((d) => (low === undefined || d > low) && (high === undefined || d < high))
    .sort((a, b) => b - a)
    .map((d) => ({ lowMs: d, highMs: d + DAY_MS, n: dayCounts.get(d)! }));
  const top = endMs !== undefined && high! < endMs ? edges.slice(0, 1) : [];
  const bottom = startMs !== undefined ? edges.slice(top.length) : [];
  return [...top, ...days, ...bottom];
}
