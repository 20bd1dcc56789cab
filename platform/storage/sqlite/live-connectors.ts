import type { TelemetryMeasurement } from '../../../shared/index.js';
import type { ConnectorRow } from '../store.js';

/**
 * Connectors' live state not yet written to the `connectors` table: the newest stored telemetry row of each
 * (device, connector). The store reads through it and writes it out every few seconds (`telemetry.ts`):
 * written in every telemetry commit, the live state touched about as many pages as the telemetry itself.
 */
export type LiveRow = Pick<ConnectorRow, 'device_id' | 'connector_id' | TelemetryMeasurement> & {
  /** The telemetry row's id: what the store has written out is tracked by it. */
  id: number;
  ts_ms: number;
  state: string;
};

export function createLiveConnectors() {
  const byDevice = new Map<string, Map<number, LiveRow>>();
  let size = 0;
  return {
    /** A stored row; it becomes the connector's live state unless a newer one already is. */
    note(row: LiveRow): void {
      let connectors = byDevice.get(row.device_id);
      if (!connectors) {
        connectors = new Map();
        byDevice.set(row.device_id, connectors);
      }
      const seen = connectors.get(row.connector_id);
      if (!seen) size++;
      else if (seen.ts_ms > row.ts_ms) return;
      connectors.set(row.connector_id, row);
    },
    of(deviceId: string): Iterable<LiveRow> {
      return byDevice.get(deviceId)?.values() ?? [];
    },
    size: () => size,
    /** Everything pending, to be written out. */
    pending(): LiveRow[] {
      const rows: LiveRow[] = [];
      for (const connectors of byDevice.values()) rows.push(...connectors.values());
      return rows;
    },
    /** These rows are written: forgotten, unless a newer one replaced them meanwhile. */
    written(rows: readonly LiveRow[]): void {
      for (const row of rows) {
        const connectors = byDevice.get(row.device_id);
        if (connectors?.get(row.connector_id) !== row) continue;
        connectors.delete(row.connector_id);
        size--;
        if (connectors.size === 0) byDevice.delete(row.device_id);
      }
    },
  };
}
