import { describe, expect, it } from 'vitest';
import {
  DAY_MS,
  locatePage,
  type StartWindow,
  startEdges,
  startWindows,
} from '../../../platform/domain/record-paging.js';

const D = Date.UTC(2026, 0, 10);
const w = (day: number, n: number): StartWindow => ({
  lowMs: D + day * DAY_MS,
  highMs: D + (day + 1) * DAY_MS,
  n,
});

describe('locatePage: where a page of the newest-first records lies', () => {
  // Days 3, 2, 1 with 5, 0, 10 records.
  const windows = [w(3, 5), w(2, 0), w(1, 10)];
  it.each([
    { name: 'first page inside the newest day', offset: 0, size: 3, want: { before: 4, from: 3, skip: 0 } },
    {
      name: 'a page across days: from the lower one',
      offset: 3,
      size: 4,
      want: { before: 4, from: 1, skip: 3 },
    },
    { name: 'an empty day is passed over', offset: 5, size: 2, want: { before: 2, from: 1, skip: 0 } },
    {
      name: 'deep inside a day: skip within it only',
      offset: 12,
      size: 2,
      want: { before: 2, from: 1, skip: 7 },
    },
    {
      name: 'reaching past the last window: no lower bound',
      offset: 13,
      size: 5,
      want: { before: 2, from: null, skip: 8 },
    },
    {
      name: 'beyond every window: below the lowest',
      offset: 20,
      size: 5,
      want: { before: 1, from: null, skip: 5 },
    },
  ])('$name', ({ offset, size, want }) => {
    const at = locatePage(windows, offset, size);
    expect({
      before: at.beforeMs === null ? null : (at.beforeMs - D) / DAY_MS,
      from: at.fromMs === null ? null : (at.fromMs - D) / DAY_MS,
      skip: at.skip,
    }).toEqual(want);
  });

  it('no windows: nothing bounds the read and nothing is skipped but the offset', () => {
    expect(locatePage([], 40, 20)).toEqual({ beforeMs: null, fromMs: null, skip: 40 });
  });
});

describe('startWindows: whole days inside the range, its edges counted exactly', () => {
  const days = new Map([
    [D, 4],
    [D + DAY_MS, 6],
    [D + 2 * DAY_MS, 8],
    [D + 3 * DAY_MS, 9],
  ]);
  const exact = (low: number, high: number) => Math.round((high - low) / 3_600_000);
  const H = 3_600_000;
  it.each([
    {
      name: 'no range: every day, newest first',
      start: undefined,
      end: undefined,
      want: [
        [3, 4, 9],
        [2, 3, 8],
        [1, 2, 6],
        [0, 1, 4],
      ],
    },
    {
      name: 'mid-day edges: exact counts at both ends, whole days between',
      start: D + DAY_MS + 6 * H,
      end: D + 2 * DAY_MS + 12 * H,
      want: [
        [2, 2.5, 12],
        [1.25, 2, 18],
      ],
    },
    {
      name: 'both edges in one day: one exact window',
      start: D + 2 * H,
      end: D + 5 * H,
      want: [[2 / 24, 5 / 24, 3]],
    },
    {
      name: 'edges on day boundaries: the start day is still counted exactly (its zero-length sessions)',
      start: D + DAY_MS,
      end: D + 3 * DAY_MS,
      want: [
        [2, 3, 8],
        [1, 2, 24],
      ],
    },
  ])('$name', ({ start, end, want }) => {
    const counts = startEdges(start, end).map(([low, high]) => exact(low, high));
    const got = startWindows(start, end, days, counts).map((x) => [
      (x.lowMs - D) / DAY_MS,
      (x.highMs - D) / DAY_MS,
      x.n,
    ]);
    expect(got).toEqual(want);
  });
});
