import type { Sql } from './database.js';

/** A telemetry row's position in commit order: its transaction id (XID8, as text) and its id. */
export interface RollupWatermark {
  txid: string;
  id: number;
}

/**
 * What retention needs of the rollups (`energy-rollups.ts`): rows at or below the watermark are rolled up and
 * may go; a transaction can hold the watermark still while it deletes under it.
 */
export interface RollupGate {
  /** The stored watermark: telemetry rows at or below it are rolled up. */
  watermark(): Promise<RollupWatermark>;
  /**
   * Inside a transaction: waits for a running chunk of any instance and holds off the next until the
   * transaction ends, so that the watermark returned cannot move meanwhile (retention deletes under it).
   */
  holdPasses(sql: Sql): Promise<RollupWatermark>;
}
