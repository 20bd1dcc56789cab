import type { FastifyBaseLogger } from 'fastify';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ABANDONED_UPLOAD_MS } from '../../../platform/services/artifact-service.js';
import { createSweeper } from '../../../platform/services/sweeper.js';

const HOUR = 3_600_000;

describe('the sweeper', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function start(options: { everyMs?: number; gateEveryMs?: number } = {}) {
    let clock = 1_000_000_000;
    const calls = { commands: 0, secrets: 0, stale: [] as number[], gate: [] as number[] };
    const sweeper = createSweeper({
      store: { runAlone: async (_job, run) => ({ ran: true, value: await run() }) },
      commands: { sweep: async () => void calls.commands++ },
      secrets: { promoteExpired: async () => void calls.secrets++ },
      artifacts: {
        removeStaleUploads: async (beforeMs) => {
          calls.stale.push(beforeMs);
          return 0;
        },
      },
      updates: { runGate: async () => void calls.gate.push(clock) },
      now: () => clock,
      everyMs: options.everyMs ?? 1_000,
      gateEveryMs: options.gateEveryMs,
      log: { error: () => undefined } as unknown as FastifyBaseLogger,
      logStorageFault: () => undefined,
    });
    return { sweeper, calls, advance: (ms: number) => (clock += ms) };
  }

  it('sweeps commands and secrets every turn, abandoned uploads once an hour', async () => {
    const { sweeper, calls, advance } = start();
    for (let turn = 0; turn < 120; turn++) {
      advance(60_000);
      await vi.advanceTimersByTimeAsync(1_000);
    }
    sweeper.stop();
    expect(calls.commands).toBe(120);
    expect(calls.secrets).toBe(120);
    // Two hours of platform time: the first turn, then one an hour.
    expect(calls.stale).toHaveLength(2);
    expect(calls.stale[1]! - calls.stale[0]!).toBe(HOUR);
  });

  it('runs the update gate every 5 s of platform time, and whenever a sweep is asked for', async () => {
    const { sweeper, calls, advance } = start();
    for (let turn = 0; turn < 20; turn++) {
      advance(1_000);
      await vi.advanceTimersByTimeAsync(1_000);
    }
    // 20 s: the first turn, then every fifth.
    expect(calls.gate).toHaveLength(4);
    expect(calls.gate[1]! - calls.gate[0]!).toBe(5_000);
    await sweeper.sweep();
    sweeper.stop();
    expect(calls.gate).toHaveLength(5);
  });

  it('runs the update gate at the interval it is given (tests shorten it)', async () => {
    const { sweeper, calls, advance } = start({ everyMs: 200, gateEveryMs: 200 });
    for (let turn = 0; turn < 10; turn++) {
      advance(200);
      await vi.advanceTimersByTimeAsync(200);
    }
    sweeper.stop();
    expect(calls.gate).toHaveLength(10);
    expect(calls.gate[1]! - calls.gate[0]!).toBe(200);
  });

  it('removes uploads a day old whenever a sweep is asked for', async () => {
    const { sweeper, calls, advance } = start();
    await vi.advanceTimersByTimeAsync(1_000);
    advance(1_000);
    await sweeper.sweep();
    await sweeper.sweep();
    sweeper.stop();
    expect(calls.stale).toHaveLength(3);
    expect(calls.stale[2]).toBe(1_000_000_000 + 1_000 - ABANDONED_UPLOAD_MS);
  });
});
