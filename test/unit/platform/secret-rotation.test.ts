import { describe, expect, it } from 'vitest';
import {
  liveGeneration,
  type PendingSecretState,
  pendingSecretState,
  type RotationAnswer,
  rotationAnswer,
  SECRET_ROTATION_GRACE_MS,
  type SecretMatch,
  secretMatch,
} from '../../../platform/domain/secret-rotation.js';

const GRACE = SECRET_ROTATION_GRACE_MS;
const T = Date.UTC(2030, 0, 1);

describe('pendingSecretState', () => {
  it.each<[number | null, number, PendingSecretState]>([
    [null, T, 'none'],
    [T, T, 'grace'],
    [T, T + GRACE - 1, 'grace'],
    [T, T + GRACE, 'expired'],
    [T, T + 10 * GRACE, 'expired'],
    // A clock that went back keeps the rotation in its grace.
    [T, T - 1000, 'grace'],
  ])('pending since %s, now %s: %s', (since, now, want) => {
    expect(pendingSecretState(since, now)).toBe(want);
  });

  it('takes another grace', () => {
    expect(pendingSecretState(T, T + 1000, 1000)).toBe('expired');
    expect(pendingSecretState(T, T + 999, 1000)).toBe('grace');
  });
});

describe('liveGeneration', () => {
  it.each<[number | null, number, number]>([
    [null, T, 4],
    [T, T + GRACE - 1, 4],
    [T, T + GRACE, 5],
  ])('generation 4, pending since %s, now %s: %s', (since, now, want) => {
    expect(liveGeneration({ secret_gen: 4, pending_since_ms: since }, now)).toBe(want);
  });
});

describe('rotationAnswer', () => {
  it.each<[PendingSecretState, RotationAnswer]>([
    ['none', 'create'],
    ['grace', 'repeat'],
    ['expired', 'revoked'],
  ])('%s: %s', (state, want) => {
    expect(rotationAnswer(state)).toBe(want);
  });
});

describe('secretMatch', () => {
  // state, equals the current secret, equals the pending secret, match
  it.each<[PendingSecretState, boolean, boolean, SecretMatch]>([
    ['none', true, false, 'current'],
    ['none', false, false, 'none'],
    // Without a pending secret there is nothing to match it (the caller compares with a dummy).
    ['none', false, true, 'none'],
    ['grace', true, false, 'current'],
    ['grace', false, true, 'pending'],
    ['grace', false, false, 'none'],
    ['expired', true, false, 'none'],
    ['expired', false, true, 'pending'],
    ['expired', false, false, 'none'],
    // Both equal cannot happen with random secrets; the pending one wins, as it is the one that lives on.
    ['grace', true, true, 'pending'],
  ])('%s, current %s, pending %s: %s', (state, current, pending, want) => {
    expect(secretMatch(state, { current, pending })).toBe(want);
  });
});
