import type Database from 'better-sqlite3';
import { RETENTION_BATCH } from '../retention-policy.js';
import {
  type BlockSample,
  decodeBlock,
  encodeBlock,
  encodeSummary,
  mergeSamples,
} from '../telemetry-block.js';
import {
  BLOCK_MS,
  blockStart,
  type CompactableRow,
  compactionHorizon,
  groupIntoBlocks,
} from '../telemetry-compaction.js';
import { MEASUREMENT_COLUMNS } from '../telemetry-history-rows.js';
import { deviceKeyOf } from './telemetry-keys.js';

/**
 * Compressed telemetry blocks on SQLite (DESIGN.md §21): the compaction pass that moves samples older than an
 * hour out of the recent table (`telemetry`) into one block per connector and hour, and what ingest, rollups
 * and retention ask of the blocks. Everything here runs on the writer connection; compaction a device per
 * write, so that requests run between.
 */
export interface SqliteTelemetryBlocks {
  /** One pass over every device; the samples it moved. Concurrent calls share the pass. */
  compact(): Promise<number>;
  /**
   * The sample times of the connector's block of the hour starting at `startMs` (empty when it has none): a
   * re-sent sample among them is a duplicate.
   */
  timesIn(deviceId: string, connectorId: number, startMs: number): ReadonlySet<number>;
  /** The connector's block samples in `[fromMs, toMs]`, in time order. */
  samplesIn(deviceId: string, connectorId: number, fromMs: number, toMs: number): BlockSample[];
  /** The connector's newest sample in a block. */
  newest(deviceId: string, connectorId: number): BlockSample | undefined;
  /**
   * One batch of blocks whose hour ended before `beforeMs`: how many it deleted, the samples they held, and
   * their newest sample's time.
   */
  pruneBefore(beforeMs: number): { deleted: number; samples: number; newestMs: number };
}

interface Deps {
  write: <T>(run: () => T) => Promise<T>;
  now: () => number;
  /**
   * Recent rows above this id stay there: the rollups and the live state follow rows by id and have not taken
   * them in yet; the newest row also stays, so that ids never restart.
   */
  compactableUpToId: () => number;
}

/** Decoded blocks kept for duplicate checks: a replayed outbox asks about the same few blocks again and again. */
const CACHED_BLOCKS = 64;
/** Old blocks given their summary per write: a few milliseconds of decoding. */
const SUMMARY_BATCH = 50;

export function createSqliteTelemetryBlocks(db: Database.Database, deps: Deps): SqliteTelemetryBlocks {
  const stmt = {
    devices: db
      .prepare('SELECT device_id FROM devices WHERE device_id > ? ORDER BY device_id LIMIT 100')
      .pluck(),
    firstCompactable: db
      .prepare(
        `SELECT MIN(ts_ms) FROM telemetry_recent WHERE device_key = ${deviceKeyOf('?')} AND ts_ms < ? AND id <= ?`,
      )
      .pluck(),
    compactable: db.prepare(
      `SELECT connector_id, ts_ms, state, ${MEASUREMENT_COLUMNS}, phase_details FROM telemetry_recent
       WHERE device_key = ${deviceKeyOf('?')} AND ts_ms >= ? AND ts_ms < ? AND id <= ?`,
    ),
    deleteCompacted: db.prepare(
      `DELETE FROM telemetry_recent WHERE device_key = ${deviceKeyOf('?')} AND ts_ms >= ? AND ts_ms < ? AND id <= ?`,
    ),
    block: db
      .prepare('SELECT data FROM telemetry_blocks WHERE device_id = ? AND connector_id = ? AND start_ms = ?')
      .pluck(),
    putBlock: db.prepare(
      `INSERT INTO telemetry_blocks (device_id, connector_id, start_ms, first_ms, last_ms, samples, data, summary)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (device_id, connector_id, start_ms) DO UPDATE SET first_ms = excluded.first_ms,
         last_ms = excluded.last_ms, samples = excluded.samples, data = excluded.data, summary = excluded.summary`,
    ),
    blocksIn: db
      .prepare(
        `SELECT data FROM telemetry_blocks WHERE device_id = ? AND connector_id = ? AND start_ms > ? AND start_ms <= ?
       ORDER BY start_ms`,
      )
      .pluck(),
    newestBlock: db
      .prepare(
        `SELECT data FROM telemetry_blocks WHERE device_id = ? AND connector_id = ? ORDER BY start_ms DESC LIMIT 1`,
      )
      .pluck(),
    oldBlocks: db.prepare('SELECT rowid, last_ms, samples FROM telemetry_blocks WHERE start_ms < ? LIMIT ?'),
    unsummarized: db.prepare(
      `SELECT rowid, start_ms, data FROM telemetry_blocks INDEXED BY telemetry_blocks_unsummarized
       WHERE summary IS NULL LIMIT ?`,
    ),
    setSummary: db.prepare('UPDATE telemetry_blocks SET summary = ? WHERE rowid = ?'),
    deleteBlock: db.prepare('DELETE FROM telemetry_blocks WHERE rowid = ?'),
  };

  const cache = new Map<string, Set<number>>();
  const key = (deviceId: string, connectorId: number, startMs: number) =>
    `${deviceId}|${connectorId}|${startMs}`;

  const timesIn = (deviceId: string, connectorId: number, startMs: number): ReadonlySet<number> => {
    const k = key(deviceId, connectorId, startMs);
    let times = cache.get(k);
    if (!times) {
      const stored = stmt.block.get(deviceId, connectorId, startMs) as Buffer | undefined;
      // No block is remembered too (an empty set): a backlog of 500 samples asks of the same hour 500 times.
      // Compaction forgets the key when it writes the block, retention the whole cache.
      times = stored ? new Set(decodeBlock(stored).map((s) => s.ts_ms)) : new Set();
      if (cache.size >= CACHED_BLOCKS) cache.delete(cache.keys().next().value as string);
      cache.set(k, times);
    }
    return times;
  };

  /**
   * Moves one device's compactable rows of its oldest hour that has any into their blocks: the samples moved
   * (0 when it has none left). An hour per write keeps each write to a few milliseconds, also while a database
   * of an earlier release, with weeks of recent rows, is converted.
   */
  const compactHour = (deviceId: string, horizonMs: number, upToId: number): number => {
    const first = stmt.firstCompactable.get(deviceId, horizonMs, upToId) as number | null;
    if (first === null) return 0;
    const fromMs = blockStart(first);
    const toMs = Math.min(horizonMs, fromMs + BLOCK_MS);
    const rows = stmt.compactable.all(deviceId, fromMs, toMs, upToId) as CompactableRow[];
    for (const g of groupIntoBlocks(rows)) {
      const stored = stmt.block.get(deviceId, g.connectorId, g.startMs) as Buffer | undefined;
      const samples = stored ? mergeSamples(decodeBlock(stored), g.samples) : g.samples;
      const first = samples[0] as BlockSample;
      const last = samples.at(-1) as BlockSample;
      stmt.putBlock.run(
        deviceId,
        g.connectorId,
        g.startMs,
        first.ts_ms,
        last.ts_ms,
        samples.length,
        encodeBlock(samples),
        encodeSummary(samples, g.startMs),
      );
      cache.delete(key(deviceId, g.connectorId, g.startMs));
    }
    stmt.deleteCompacted.run(deviceId, fromMs, toMs, upToId);
    return rows.length;
  };

  let running: Promise<number> | undefined;
  const pass = async (): Promise<number> => {
    const horizonMs = compactionHorizon(deps.now());
    const upToId = deps.compactableUpToId();
    let moved = 0;
    for (let after = ''; ; ) {
      const ids = stmt.devices.all(after) as string[];
      for (const id of ids) {
        // Most passes find nothing to move for most devices: a read says so without a write.
        if (stmt.firstCompactable.get(id, horizonMs, upToId) === null) continue;
        for (let n = 1; n > 0; moved += n) n = await deps.write(() => compactHour(id, horizonMs, upToId));
      }
      if (ids.length < 100) break;
      after = ids.at(-1) as string;
    }
    // A read first: once every block has its summary, a pass costs no write for them.
    while (stmt.unsummarized.get(1) !== undefined && (await deps.write(summarizeSome)) > 0);
    return moved;
  };
  /** Gives blocks compacted before summaries existed theirs, a batch per write (their index is partial). */
  const summarizeSome = (): number => {
    const rows = stmt.unsummarized.all(SUMMARY_BATCH) as Array<{
      rowid: number;
      start_ms: number;
      data: Buffer;
    }>;
    for (const r of rows) stmt.setSummary.run(encodeSummary(decodeBlock(r.data), r.start_ms), r.rowid);
    return rows.length;
  };

  return {
    compact() {
      running ??= pass().finally(() => {
        running = undefined;
      });
      return running;
    },
    timesIn,
    samplesIn(deviceId, connectorId, fromMs, toMs) {
      const blocks = stmt.blocksIn.all(deviceId, connectorId, fromMs - BLOCK_MS, toMs) as Buffer[];
      return blocks.flatMap((b) => decodeBlock(b).filter((s) => s.ts_ms >= fromMs && s.ts_ms <= toMs));
    },
    newest(deviceId, connectorId) {
      const stored = stmt.newestBlock.get(deviceId, connectorId) as Buffer | undefined;
      return stored ? decodeBlock(stored).at(-1) : undefined;
    },
    pruneBefore(beforeMs) {
      // A block goes once its whole hour is before the cutoff.
      const old = stmt.oldBlocks.all(beforeMs - BLOCK_MS + 1, RETENTION_BATCH) as Array<{
        rowid: number;
        last_ms: number;
        samples: number;
      }>;
      let newestMs = Number.NEGATIVE_INFINITY;
      let samples = 0;
      for (const b of old) {
        stmt.deleteBlock.run(b.rowid);
        newestMs = Math.max(newestMs, b.last_ms);
        samples += b.samples;
      }
      cache.clear();
      return { deleted: old.length, samples, newestMs };
    },
  };
}
