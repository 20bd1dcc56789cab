/**
 * Instants in [from, to) at which `offset` changes: a scan at `step`, then bisection down to `resolution` ms.
 * Used by the tests that compare time-zone offsets against Luxon.
 */
export function offsetChanges(
  offset: (t: number) => number,
  range: { from: number; to: number; step: number; resolution: number },
): number[] {
  const { from, to, step, resolution } = range;
  const found: number[] = [];
  for (let t = from; t < to; t += step) {
    if (offset(t) === offset(t + step)) continue;
    let low = t;
    let high = t + step;
    while (high - low > resolution) {
      const middle = low + Math.floor((high - low) / (2 * resolution)) * resolution;
      if (offset(middle) === offset(low)) low = middle;
      else high = middle;
    }
    found.push(high);
  }
  return found;
}
