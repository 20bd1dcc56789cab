/**
 * Shared timers for thousands of simulated HALs: instead of one `setInterval` per charger, one timer per period
 * walks a wheel of slots, each holding a share of the callbacks — so the physics ticks of 10,000 chargers are
 * spread evenly over the period rather than fired as 10,000 timers (or in one burst).
 */
import type { SimulatedTimers } from '../simulated-hal.js';

interface Ring {
  slots: Array<Set<() => void>>;
  next: number;
  size: number;
  cursor: number;
  timer: NodeJS.Timeout;
}

interface Handle {
  ms: number;
  slot: number;
  callback: () => void;
}

export interface TickWheel extends SimulatedTimers {
  close(): void;
}

export function createTickWheel(slotsPerPeriod = 10): TickWheel {
  const rings = new Map<number, Ring>();

  function ringFor(ms: number): Ring {
    let ring = rings.get(ms);
    if (ring) return ring;
    const slots = Array.from({ length: slotsPerPeriod }, () => new Set<() => void>());
    const created: Ring = {
      slots,
      next: 0,
      size: 0,
      cursor: 0,
      timer: setInterval(
        () => {
          const slot = slots[created.cursor]!;
          created.cursor = (created.cursor + 1) % slotsPerPeriod;
          for (const callback of slot) {
            try {
              callback();
            } catch {
              // One HAL's failure must not stop the others' clocks.
            }
          }
        },
        Math.max(1, ms / slotsPerPeriod),
      ),
    };
    created.timer.unref();
    rings.set(ms, created);
    ring = created;
    return ring;
  }

  return {
    setInterval(callback, ms) {
      const ring = ringFor(ms);
      const slot = ring.next;
      ring.next = (ring.next + 1) % slotsPerPeriod;
      ring.slots[slot]!.add(callback);
      ring.size += 1;
      return { ms, slot, callback } satisfies Handle;
    },
    clearInterval(handle) {
      const { ms, slot, callback } = handle as Handle;
      const ring = rings.get(ms);
      if (!ring || !ring.slots[slot]!.delete(callback)) return;
      ring.size -= 1;
      if (ring.size === 0) {
        clearInterval(ring.timer);
        rings.delete(ms);
      }
    },
    close() {
      for (const ring of rings.values()) clearInterval(ring.timer);
      rings.clear();
    },
  };
}
