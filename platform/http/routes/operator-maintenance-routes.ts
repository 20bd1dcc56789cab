import {
  AvailabilityRequest,
  COMMAND_EXPIRY_SECONDS,
  ConfigurationPatch,
  ConfigurationView,
  ConnectorParams,
  DeviceParams,
  QueuedCommand,
  ResetRequest,
} from '../../../shared/index.js';
import type { PlatformContext } from '../context.js';
import { type AnyRoute, route } from '../route-spec.js';
import { principal, read, write } from './operator-access.js';

/** How long a command of `kind` waits for its charger, in words, from COMMAND_EXPIRY_SECONDS. */
function expiry(kind: keyof typeof COMMAND_EXPIRY_SECONDS): string {
  const seconds = COMMAND_EXPIRY_SECONDS[kind];
  const [n, unit] = seconds % 86_400 === 0 ? [seconds / 86_400, 'day'] : [seconds / 60, 'minute'];
  return `${n} ${unit}${n === 1 ? '' : 's'}`;
}

/** Follow-up, shared by the command endpoints below. */
const FOLLOW =
  'Follow it with GET /v1/operator/commands/{command_id}; the charger’s report may carry a `result`.';

/** Remote maintenance of one charger (DESIGN.md §20): reset, availability, unlock, configuration. */
export function operatorMaintenanceRoutes(ctx: PlatformContext): AnyRoute[] {
  const maintenance = ctx.maintenance;

  return [
    route({
      method: 'POST',
      url: '/v1/operator/devices/:device_id/reset',
      summary: 'Restart a charger’s agent, or reboot the charger',
      description:
        `Queues a \`reset\` command (expires after ${expiry('reset')}). \`mode\` \`when_idle\` (default) ` +
        'waits until no connector charges or discharges, `immediate` does not wait; `target` `agent` (default) ' +
        'restarts the agent, `charger` reboots the hardware. The charger reports `succeeded` before it goes ' +
        `down, and a new \`boot\` event once it is back. The body may be left out. ${FOLLOW}`,
      tag: 'operator',
      auth: write,
      rate: 'operatorControl',
      params: DeviceParams,
      body: ResetRequest,
      bodyOptional: true,
      response: QueuedCommand,
      handler: async ({ params, body, request }) =>
        maintenance.reset(principal(request), params.device_id, body),
    }),
    route({
      method: 'PUT',
      url: '/v1/operator/devices/:device_id/connectors/:connector_id/availability',
      summary: 'Take a connector out of service, or put it back',
      description:
        `Queues a \`set_availability\` command (expires after ${expiry('set_availability')}). The charger ` +
        'keeps the setting offline and across reboots; a connector out of service starts nothing. Once the charger reports `succeeded`, the ' +
        'device view shows the connector with `available` as requested, and `status: "unavailable"` while no ' +
        `session runs on it (a session in progress shows until it ends). ${FOLLOW}`,
      tag: 'operator',
      auth: write,
      rate: 'operatorControl',
      params: ConnectorParams,
      body: AvailabilityRequest,
      response: QueuedCommand,
      handler: async ({ params, body, request }) =>
        maintenance.setAvailability(principal(request), params, body),
    }),
    route({
      method: 'POST',
      url: '/v1/operator/devices/:device_id/connectors/:connector_id/unlock',
      summary: 'Release the cable lock of a connector',
      description:
        `Queues an \`unlock_connector\` command (expires after ${expiry('unlock_connector')}); no body. ` +
        FOLLOW,
      tag: 'operator',
      auth: write,
      rate: 'operatorControl',
      params: ConnectorParams,
      response: QueuedCommand,
      handler: async ({ params, request }) => maintenance.unlock(principal(request), params),
    }),
    route({
      method: 'GET',
      url: '/v1/operator/devices/:device_id/configuration',
      summary: 'A charger’s configuration, as it last reported it',
      description:
        'Every key the charger runs with, as its newest `configuration_reported` event said (chargers report ' +
        'on every start and after every change), and that event’s time; `values` is empty and `reported_at` ' +
        'null until it has reported.',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      params: DeviceParams,
      response: ConfigurationView,
      handler: async ({ params, request }) => maintenance.configuration(principal(request), params.device_id),
    }),
    route({
      method: 'PATCH',
      url: '/v1/operator/devices/:device_id/configuration',
      summary: 'Change some of a charger’s configuration keys',
      description:
        `Queues a \`set_configuration\` command with the keys given (expires after ${expiry('set_configuration')}); ` +
        'the others keep their values. An unknown key or a value out of its bounds answers 400 (1001) naming it, e.g. ' +
        '`values.telemetry_interval_seconds`. The charger applies the values without a restart and reports its ' +
        `whole configuration after. ${FOLLOW}`,
      tag: 'operator',
      auth: write,
      rate: 'operatorControl',
      params: DeviceParams,
      body: ConfigurationPatch,
      response: QueuedCommand,
      handler: async ({ params, body, request }) =>
        maintenance.changeConfiguration(principal(request), params.device_id, body),
    }),
  ];
}
