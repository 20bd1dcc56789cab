import type { BlockSample } from './telemetry-block.js';

/**
 * How telemetry moves from the recent table into compressed blocks (DESIGN.md §21), the same on both backends:
 * one block per connector and UTC hour, made once the hour is more than an hour past; a late sample for a hour
 * already in a block waits in the recent table until the next pass merges it in.
 */

/** A block holds one connector's samples of one UTC hour. */
export const BLOCK_MS = 3_600_000;
/** Samples stay in the recent table at least this long. */
export const COMPACT_AFTER_MS = 3_600_000;
/**
 * Margin for instances whose clocks differ: a sample this close to the horizon is checked against the blocks
 * on insert too, in case another instance, ahead of this one, compacted its hour already.
 */
export const CLOCK_MARGIN_MS = 300_000;

/** Samples before this time may be compacted at `nowMs`: whole hours that ended at least an hour ago. */
export function compactionHorizon(nowMs: number): number {
  return Math.floor((nowMs - COMPACT_AFTER_MS) / BLOCK_MS) * BLOCK_MS;
}

/**
 * Samples before this time may already lie in a block at `nowMs` (so an insert must look there first):
 * computed once per write, compared per sample.
 */
export function compactedBefore(nowMs: number): number {
  return compactionHorizon(nowMs + CLOCK_MARGIN_MS);
}

export const blockStart = (tsMs: number): number => Math.floor(tsMs / BLOCK_MS) * BLOCK_MS;

/** A recent-table row as compaction reads it: a block sample of a connector. */
export type CompactableRow = BlockSample & { connector_id: number };

export interface BlockGroup {
  connectorId: number;
  startMs: number;
  /** Time order, each instant once. */
  samples: BlockSample[];
}

/** Rows of one device grouped into the blocks they belong to, each block's samples in time order. */
export function groupIntoBlocks(rows: readonly CompactableRow[]): BlockGroup[] {
  const groups = new Map<string, BlockGroup>();
  for (const { connector_id, ...sample } of rows) {
    const startMs = blockStart(sample.ts_ms);
    const key = `${connector_id}|${startMs}`;
    let g = groups.get(key);
    if (!g) {
      g = { connectorId: connector_id, startMs, samples: [] };
      groups.set(key, g);
    }
    g.samples.push(sample);
  }
  for (const g of groups.values()) g.samples.sort((a, b) => a.ts_ms - b.ts_ms);
  return [...groups.values()].sort((a, b) => a.connectorId - b.connectorId || a.startMs - b.startMs);
}
