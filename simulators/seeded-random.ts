/**
 * A small seeded PRNG so that a simulation replays exactly from its seed (Math.random cannot be seeded).
 * mulberry32: 32-bit state, fast, statistically fine for simulation (not for anything secret).
 */

/** Uniform in [0, 1). */
export type RandomSource = () => number;

export function createSeededRandom(seed: number): RandomSource {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** A seed for runs that did not ask for one. */
export function randomSeed(): number {
  return Math.floor(Math.random() * 4_294_967_296);
}

export function uniformBetween(random: RandomSource, min: number, max: number): number {
  return min + (max - min) * random();
}

export function pickOne<T>(random: RandomSource, items: readonly T[]): T {
  const item = items[Math.floor(random() * items.length)];
  if (item === undefined) throw new Error('pickOne needs at least one item');
  return item;
}

/** Waiting time of a Poisson process with the given mean (memoryless arrivals, faults). */
export function exponentialDelay(random: RandomSource, mean: number): number {
  if (mean === Number.POSITIVE_INFINITY) return mean; // "never", without 0 × ∞ = NaN
  // 1 - random() lies in (0, 1], so the logarithm is finite.
  return -Math.log(1 - random()) * mean;
}
