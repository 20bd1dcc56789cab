/**
 * The connectors the hardware reports (rating, V2G) and the latest known state of each, for the
 * technician's `status` while the agent runs or after it stopped.
 */
import type Database from 'better-sqlite3';
import type { ConnectorHardwareState, ConnectorInfo } from '../hal.js';

type Db = Database.Database;

/** The latest known state of a connector, for the technician's `status` (written on change and every minute). */
export interface ConnectorSnapshot {
  connectorId: number;
  state: ConnectorHardwareState;
  powerKw: number;
  voltageV?: number;
  currentA?: number;
  /** kWh delivered in the current session (0 without one). */
  energyDeliveredKwh?: number;
  soc?: number;
  temperatureC?: number;
  vehiclePresent: boolean;
  faultCode: number;
  /** What the control loop decided, and why. */
  mode?: string;
  maxPowerKw?: number;
  reason?: string;
  nextChangeAt?: string;
  updatedAt: string;
}

export interface ConnectorStore {
  listConnectors(): ConnectorInfo[];
  saveConnectors(connectors: readonly ConnectorInfo[]): void;

  listSnapshots(): ConnectorSnapshot[];
  saveSnapshots(snapshots: readonly ConnectorSnapshot[]): void;
}

/** `write` prepares a statement on first use; `nowIso` stamps the connector rows. */
export function createConnectorStore(
  db: Db,
  write: (sql: string) => Database.Statement,
  nowIso: () => string,
): ConnectorStore {
  const q = {
    connectors: db.prepare('SELECT * FROM connectors ORDER BY connector_id'),
    snapshots: db.prepare('SELECT snapshot FROM connector_status ORDER BY connector_id'),
  };
  return {
    listConnectors() {
      return (
        q.connectors.all() as Array<{ connector_id: number; rated_power_kw: number; v2g_capable: number }>
      ).map((r) => ({
        connectorId: r.connector_id,
        ratedPowerKw: r.rated_power_kw,
        v2gCapable: r.v2g_capable === 1,
      }));
    },
    saveConnectors(connectors) {
      const at = nowIso();
      db.transaction(() => {
        write('DELETE FROM connectors').run();
        const insert = write(
          'INSERT INTO connectors (connector_id, rated_power_kw, v2g_capable, updated_at) VALUES (?, ?, ?, ?)',
        );
        for (const c of connectors) insert.run(c.connectorId, c.ratedPowerKw, c.v2gCapable ? 1 : 0, at);
      })();
    },

    listSnapshots() {
      return (q.snapshots.all() as Array<{ snapshot: string }>).map(
        (r) => JSON.parse(r.snapshot) as ConnectorSnapshot,
      );
    },
    saveSnapshots(snapshots) {
      if (snapshots.length === 0) return;
      db.transaction(() => {
        const upsert = write(
          `INSERT INTO connector_status (connector_id, snapshot, updated_at) VALUES (?, ?, ?)
           ON CONFLICT (connector_id) DO UPDATE SET snapshot = excluded.snapshot, updated_at = excluded.updated_at`,
        );
        for (const s of snapshots) upsert.run(s.connectorId, JSON.stringify(s), s.updatedAt);
      })();
    },
  };
}
