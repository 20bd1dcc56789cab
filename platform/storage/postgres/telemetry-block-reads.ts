import type { PowerSample } from '../../domain/energy.js';
import { decodeBlock } from '../telemetry-block.js';
import { BLOCK_MS } from '../telemetry-compaction.js';
import type { Sql } from './database.js';

// What the rollup passes read of the compressed blocks (DESIGN.md §21), in their own transaction.

/** A connector's block samples in `[fromMs, toMs]`, in time order, as power samples (rollup recomputes). */
export async function blockPowerSamples(
  sql: Sql,
  deviceId: string,
  connectorId: number,
  fromMs: number,
  toMs: number,
): Promise<PowerSample[]> {
  const blocks = await sql.query<{ data: Buffer }>(
    `SELECT data FROM telemetry_blocks WHERE device_id = $1 AND connector_id = $2 AND start_ms > $3
       AND start_ms <= $4 ORDER BY start_ms`,
    [deviceId, connectorId, fromMs - BLOCK_MS, toMs],
  );
  return blocks.flatMap((b) =>
    decodeBlock(b.data)
      .filter((s) => s.ts_ms >= fromMs && s.ts_ms <= toMs)
      .map((s) => ({ connector_id: connectorId, ts_ms: s.ts_ms, power: s.power })),
  );
}

/** The connectors' newest samples in blocks (rollups continue from the newest of these and the recent table). */
export async function newestBlockSamples(
  sql: Sql,
  connectors: ReadonlyArray<{ device_id: string; connector_id: number }>,
): Promise<Array<PowerSample & { device_id: string }>> {
  const rows = await sql.query<{ device_id: string; connector_id: number; data: Buffer }>(
    `SELECT k.device_id, k.connector_id, b.data
     FROM unnest($1::text[], $2::int[]) AS k(device_id, connector_id)
     CROSS JOIN LATERAL (
       SELECT data FROM telemetry_blocks
       WHERE device_id = k.device_id AND connector_id = k.connector_id ORDER BY start_ms DESC LIMIT 1) b`,
    [connectors.map((c) => c.device_id), connectors.map((c) => c.connector_id)],
  );
  return rows.flatMap((r) => {
    const last = decodeBlock(r.data).at(-1);
    return last
      ? [{ device_id: r.device_id, connector_id: r.connector_id, ts_ms: last.ts_ms, power: last.power }]
      : [];
  });
}
