import { describe, expect, it } from 'vitest';
import {
  type AttemptResult,
  afterAttempt,
  DISABLE_AFTER_FAILING_MS,
  RETRY_DELAYS_MS,
  retryAfterSeconds,
} from '../../../platform/domain/webhook-delivery.js';

const T = 1_800_000_000_000;
const H = 3_600_000;
const fail = (status: number | null, retryAfter?: number): AttemptResult => ({
  kind: 'failed',
  status,
  error: status === null ? 'connection_refused' : 'http_status',
  ...(retryAfter !== undefined ? { retryAfterSeconds: retryAfter } : {}),
});

describe('afterAttempt', () => {
  const cases: Array<[string, number, AttemptResult, number | null, ReturnType<typeof afterAttempt>]> = [
    [
      'a 2xx succeeds and clears the failing mark',
      3,
      { kind: 'delivered', status: 204 },
      T - H,
      {
        state: 'succeeded',
        nextAttemptMs: null,
        failingSinceMs: null,
      },
    ],
    [
      'the first failure waits 5 s and starts the mark',
      1,
      fail(500),
      null,
      {
        state: 'pending',
        nextAttemptMs: T + 5_000,
        failingSinceMs: T,
      },
    ],
    [
      'no answer at all is a failure like any other',
      2,
      fail(null),
      T - 1000,
      {
        state: 'pending',
        nextAttemptMs: T + 5 * 60_000,
        failingSinceMs: T - 1000,
      },
    ],
    [
      'the seventh failure waits 10 h',
      7,
      fail(502),
      T - H,
      {
        state: 'pending',
        nextAttemptMs: T + 10 * H,
        failingSinceMs: T - H,
      },
    ],
    [
      'the eighth failure ends the delivery',
      8,
      fail(502),
      T - H,
      {
        state: 'failed',
        nextAttemptMs: null,
        failingSinceMs: T - H,
      },
    ],
    [
      'Retry-After longer than the wait is honoured',
      3,
      fail(503, 3600),
      null,
      {
        state: 'pending',
        nextAttemptMs: T + H,
        failingSinceMs: T,
      },
    ],
    [
      'Retry-After shorter than the wait does not hasten it',
      2,
      fail(429, 1),
      null,
      {
        state: 'pending',
        nextAttemptMs: T + 5 * 60_000,
        failingSinceMs: T,
      },
    ],
    [
      'Retry-After is capped at the longest wait of the schedule',
      1,
      fail(503, 7 * 86_400),
      null,
      {
        state: 'pending',
        nextAttemptMs: T + 10 * H,
        failingSinceMs: T,
      },
    ],
    [
      '410 ends the delivery and disables the endpoint',
      1,
      fail(410),
      null,
      {
        state: 'failed',
        nextAttemptMs: null,
        failingSinceMs: T,
        disable: 'gone',
      },
    ],
    [
      'failing for just under five days keeps it enabled',
      1,
      fail(500),
      T - DISABLE_AFTER_FAILING_MS + 1,
      {
        state: 'pending',
        nextAttemptMs: T + 5_000,
        failingSinceMs: T - DISABLE_AFTER_FAILING_MS + 1,
      },
    ],
    [
      'failing for five days disables it',
      1,
      fail(500),
      T - DISABLE_AFTER_FAILING_MS,
      {
        state: 'failed',
        nextAttemptMs: null,
        failingSinceMs: T - DISABLE_AFTER_FAILING_MS,
        disable: 'failing',
      },
    ],
    [
      'a success after five days of failures is still a success',
      1,
      { kind: 'delivered', status: 200 },
      T - 9 * 86_400_000,
      {
        state: 'succeeded',
        nextAttemptMs: null,
        failingSinceMs: null,
      },
    ],
  ];
  it.each(cases)('%s', (_name, attempt, result, since, expected) => {
    expect(afterAttempt(attempt, result, T, since)).toEqual(expected);
  });

  it('spaces the retries as Standard Webhooks does: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h', () => {
    expect(RETRY_DELAYS_MS).toEqual([5_000, 300_000, 1_800_000, 2 * H, 5 * H, 10 * H, 10 * H]);
  });
});

describe('retryAfterSeconds', () => {
  it.each([
    [undefined, undefined],
    ['', undefined],
    ['120', 120],
    [' 7 ', 7],
    ['-1', undefined],
    ['soon', undefined],
    [new Date(T + 90_000).toUTCString(), 90],
    [new Date(T - 90_000).toUTCString(), 0],
  ])('%s → %s', (header, seconds) => {
    expect(retryAfterSeconds(header, T)).toBe(seconds);
  });
});
