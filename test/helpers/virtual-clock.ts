import type { Clock, TimerHandle } from '../../agent/clock.js';
import type { SimulatedTimers } from '../../simulators/simulated-hal.js';

/**
 * A clock of its own for agents under test (agent/clock.ts `Clock`, and `SimulatedTimers` for the simulated
 * HAL): time moves only when the test says so, so 30 days of an agent's life run in seconds, while everything
 * else in the process (the platform, undici, node:net) keeps the real timers.
 *
 * - `advanceTo(t)` first lets work already started finish at the current instant, then fires every timer due
 *   up to `t` in order (ties in creation order), setting `now()` to each
 *   timer's instant before its callback and letting the event loop turn once after each (promise chains, I/O
 *   callbacks), so a timer's work is done before the next one fires.
 * - `follow(source)` makes it track another clock (a platform's) in real time, for the phases when the agent
 *   talks to a platform; `stopFollowing()` hands control back to `advanceTo`.
 */
export class VirtualClock implements Clock {
  private current: number;
  private nextId = 1;
  private readonly timers = new Map<
    number,
    { at: number; id: number; callback: () => void; every?: number }
  >();
  private follower: ReturnType<typeof setInterval> | undefined;
  private advancing: Promise<void> = Promise.resolve();

  constructor(start: number) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  setTimeout(callback: () => void, ms: number): TimerHandle {
    const id = this.nextId++;
    this.timers.set(id, { at: this.current + Math.max(0, ms), id, callback });
    return id;
  }

  clearTimeout(handle: TimerHandle): void {
    this.timers.delete(handle as number);
  }

  /** Interval timers for the simulated HAL. */
  readonly halTimers: SimulatedTimers = {
    setInterval: (callback, ms) => {
      const id = this.nextId++;
      const every = Math.max(1, ms);
      this.timers.set(id, { at: this.current + every, id, callback, every });
      return id;
    },
    clearInterval: (handle) => this.timers.delete(handle as number),
  };

  /** Timers waiting (for a test that checks nothing is left behind). */
  pending(): number {
    return this.timers.size;
  }

  private due(until: number) {
    let next: { at: number; id: number; callback: () => void; every?: number } | undefined;
    for (const timer of this.timers.values()) {
      if (timer.at > until) continue;
      if (!next || timer.at < next.at || (timer.at === next.at && timer.id < next.id)) next = timer;
    }
    return next;
  }

  private async run(until: number): Promise<void> {
    // Work the caller started at the current instant (a vehicle plugged in) finishes at that instant.
    await turn();
    for (;;) {
      const timer = this.due(until);
      if (!timer) {
        this.current = Math.max(this.current, until);
        await turn();
        if (!this.due(until)) return; // nothing new became due while the loop turned
        continue;
      }
      this.current = Math.max(this.current, timer.at);
      if (timer.every !== undefined) timer.at += timer.every;
      else this.timers.delete(timer.id);
      timer.callback();
      await turn();
    }
  }

  /** Fires every timer due up to `until`, in order, and leaves the clock at `until`. */
  advanceTo(until: number): Promise<void> {
    if (this.follower) throw new Error('advanceTo while following another clock');
    this.advancing = this.advancing.then(() => this.run(until));
    return this.advancing;
  }

  /** Tracks `source` (checked every few real milliseconds) until `stopFollowing`. */
  follow(source: () => number, everyMs = 5): void {
    if (this.follower) return;
    let busy = false;
    this.follower = setInterval(() => {
      if (busy) return;
      busy = true;
      this.advancing = this.advancing
        .then(() => this.run(Math.max(this.current, source())))
        .finally(() => {
          busy = false;
        });
    }, everyMs);
  }

  async stopFollowing(): Promise<void> {
    if (this.follower) clearInterval(this.follower);
    this.follower = undefined;
    await this.advancing;
  }
}

/** One turn of the event loop: pending promise callbacks run, and I/O that has arrived is handled. */
function turn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
