import { describe, expect, it } from 'vitest';
import { createTickBudget } from '../../../platform/services/tick-budget.js';

const immediate = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('createTickBudget', () => {
  it('grants `perTick` turns in a turn of the loop, the rest in later turns, in order', async () => {
    const turn = createTickBudget(2);
    const granted: number[] = [];
    const all = Array.from({ length: 5 }, (_, i) => turn().then(() => granted.push(i)));
    await Promise.resolve();
    expect(granted).toEqual([0, 1]);
    await immediate();
    expect(granted).toEqual([0, 1, 2, 3]);
    await immediate();
    await Promise.all(all);
    expect(granted).toEqual([0, 1, 2, 3, 4]);
  });

  it('lets I/O that arrived meanwhile run between the turns of a busy caller', async () => {
    const turn = createTickBudget(1);
    const order: string[] = [];
    const pump = (async () => {
      for (let i = 0; i < 3; i++) {
        await turn();
        order.push(`chunk ${i}`);
      }
    })();
    setImmediate(() => order.push('heartbeat'));
    await pump;
    expect(order.indexOf('heartbeat')).toBeLessThan(order.indexOf('chunk 2'));
  });
});
