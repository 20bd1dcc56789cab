import type {
  AvailabilityRequest,
  ConfigurationPatch,
  ConfigurationView,
  ResetRequest,
} from '../../shared/index.js';
import { toTimestamp } from '../../shared/index.js';
import type { Store } from '../storage/store.js';
import type { CommandService } from './command-service.js';
import type { ConnectorRef } from './operator-command-service.js';
import type { OperatorPrincipal } from './principal.js';
import { queueOperatorCommand } from './queue-command.js';
import type { Tenancy } from './tenancy.js';

export interface MaintenanceServiceDeps {
  store: Pick<Store, 'getConfiguration'>;
  tenancy: Tenancy;
  /** Every command goes through it: it wakes the charger's long poll and publishes the event. */
  commands: CommandService;
  now: () => number;
}

/** The commands of remote maintenance, one per endpoint. */
type MaintenanceCommand = 'reset' | 'set_availability' | 'unlock_connector' | 'set_configuration';

/**
 * Remote maintenance of one charger (DESIGN.md §20): reset, a connector's availability, unlocking a connector,
 * and the charger's configuration (read as last reported, changed by a command). Tenancy answers another
 * tenant's charger or connector like a missing one (404); the request bodies were checked against the shared
 * schemas (the configuration table among them) before they get here.
 */
export function createMaintenanceService(deps: MaintenanceServiceDeps) {
  const { store, tenancy, commands } = deps;

  const queue = (
    actor: OperatorPrincipal,
    kind: MaintenanceCommand,
    deviceId: string,
    params: Record<string, unknown>,
  ) => queueOperatorCommand(commands, actor, { kind, deviceId, params }, deps.now());

  return {
    async reset(actor: OperatorPrincipal, deviceId: string, body: ResetRequest) {
      const device = await tenancy.device(actor, deviceId);
      return queue(actor, 'reset', device.device_id, { mode: body.mode, target: body.target });
    },
    async setAvailability(actor: OperatorPrincipal, ref: ConnectorRef, body: AvailabilityRequest) {
      const c = await tenancy.connector(actor, ref);
      return queue(actor, 'set_availability', c.device_id, {
        connector_id: c.connector_id,
        available: body.available,
      });
    },
    async unlock(actor: OperatorPrincipal, ref: ConnectorRef) {
      const c = await tenancy.connector(actor, ref);
      return queue(actor, 'unlock_connector', c.device_id, { connector_id: c.connector_id });
    },
    /** The configuration as the charger last reported it: empty, with no time, until it has. */
    async configuration(actor: OperatorPrincipal, deviceId: string): Promise<ConfigurationView> {
      const device = await tenancy.device(actor, deviceId);
      const stored = await store.getConfiguration(device.device_id);
      return {
        device_id: device.device_id,
        values: stored?.values ?? {},
        reported_at: stored ? toTimestamp(stored.reported_at_ms) : null,
      };
    },
    /** Queues `set_configuration` with the keys given; the charger reports its whole configuration after. */
    async changeConfiguration(actor: OperatorPrincipal, deviceId: string, body: ConfigurationPatch) {
      const device = await tenancy.device(actor, deviceId);
      return queue(actor, 'set_configuration', device.device_id, { values: body.values });
    },
  };
}
export type MaintenanceService = ReturnType<typeof createMaintenanceService>;
