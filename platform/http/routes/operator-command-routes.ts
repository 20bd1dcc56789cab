import {
  COMMAND_EXPIRY_SECONDS,
  CommandCancelled,
  CommandParamsPath,
  CommandView,
  ConnectorParams,
  DeviceCommandsPage,
  DeviceCommandsQuery,
  DeviceParams,
  DischargeRequest,
  QueuedCommand,
  ScheduleDeleted,
  ScheduleParamsPath,
  ScheduleRequest,
  ScheduleStored,
  SchedulesPage,
  SchedulesQuery,
  StartRequest,
  StopRequest,
} from '../../../shared/index.js';
import type { PlatformContext } from '../context.js';
import { type AnyRoute, route } from '../route-spec.js';
import { principal, read, write } from './operator-access.js';

/** How long a command of `kind` waits for its charger, in minutes or days, from COMMAND_EXPIRY_SECONDS. */
const minutes = (kind: keyof typeof COMMAND_EXPIRY_SECONDS) => `${COMMAND_EXPIRY_SECONDS[kind] / 60} minutes`;
const days = (kind: keyof typeof COMMAND_EXPIRY_SECONDS) => `${COMMAND_EXPIRY_SECONDS[kind] / 86_400} days`;

/** Follow-up, shared by the command endpoints below. */
const FOLLOW = 'Follow it with GET /v1/operator/commands/{command_id}.';

/** Commands to one charger: listing, following and cancelling them, stop/start/discharge, schedules. */
export function operatorCommandRoutes(ctx: PlatformContext): AnyRoute[] {
  const commands = ctx.operatorCommands;

  return [
    route({
      method: 'GET',
      url: '/v1/operator/commands/:command_id',
      summary: 'Follow a command: status and history',
      description:
        'The command with its `params`, `status` and `expiry`, `control_id` when a flexibility control sent it, ' +
        'and every transition with its time in `history` (`queued`, `delivered`, `accepted`, then `succeeded` or ' +
        '`failed`; or `rejected`, `cancelled`, `expired`). `result` is what the charger reported the command ' +
        'produced, when it did. Another tenant’s command answers 404 (3001), like a missing one.',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      params: CommandParamsPath,
      response: CommandView,
      errors: [404],
      handler: async ({ params, request }) => commands.command(principal(request), params.command_id),
    }),
    route({
      method: 'GET',
      url: '/v1/operator/devices/:device_id/commands',
      summary: 'The commands sent to a charger with their statuses, newest first',
      description:
        'Every command of the charger, whichever client or flexibility control queued it, by creation time ' +
        'then command_id, both descending; optionally only those in one status. Each item is what ' +
        'GET /v1/operator/commands/{command_id} answers.',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      params: DeviceParams,
      query: DeviceCommandsQuery,
      response: DeviceCommandsPage,
      errors: [404],
      handler: async ({ params, query, request }) =>
        commands.deviceCommands(principal(request), params.device_id, query),
    }),
    route({
      method: 'DELETE',
      url: '/v1/operator/commands/:command_id',
      summary: 'Cancel a command that is still queued',
      description:
        'Only a `queued` command (not yet delivered to the charger) can be cancelled; once it is past `queued` ' +
        'the request answers 409 (4001). Another tenant’s command answers 404 (3001), like a missing one.',
      tag: 'operator',
      auth: write,
      rate: 'operatorControl',
      params: CommandParamsPath,
      response: CommandCancelled,
      errors: [404, 409],
      handler: async ({ params, request }) => commands.cancel(principal(request), params.command_id),
    }),

    route({
      method: 'POST',
      url: '/v1/operator/devices/:device_id/connectors/:connector_id/stop',
      summary: 'Stop charging or discharging on a connector',
      description:
        `Queues a \`stop\` command (expires after ${minutes('stop')}), which the charger gets on its next ` +
        'heartbeat or long poll. The body may be left out: `reason` (free text, at most 64 characters) defaults ' +
        'to `user_request`. An unknown device or connector, or another tenant’s, answers 404 (3001). ' +
        FOLLOW,
      tag: 'operator',
      auth: write,
      rate: 'operatorControl',
      params: ConnectorParams,
      body: StopRequest,
      bodyOptional: true,
      response: QueuedCommand,
      errors: [404],
      handler: async ({ params, body, request }) => commands.stop(principal(request), params, body),
    }),
    route({
      method: 'POST',
      url: '/v1/operator/devices/:device_id/connectors/:connector_id/start',
      summary: 'Start charging on a connector (remote start)',
      description:
        `Queues a \`start\` command (expires after ${minutes('start')}), which the charger gets on its next ` +
        'heartbeat or long poll. The body may be left out; `target_soc` (0–100) and `power_limit` (kW) are ' +
        'optional. An unknown device or connector, or another tenant’s, answers 404 (3001). ' +
        FOLLOW,
      tag: 'operator',
      auth: write,
      rate: 'operatorControl',
      params: ConnectorParams,
      body: StartRequest,
      bodyOptional: true,
      response: QueuedCommand,
      errors: [404],
      handler: async ({ params, body, request }) => commands.start(principal(request), params, body),
    }),
    route({
      method: 'POST',
      url: '/v1/operator/devices/:device_id/connectors/:connector_id/discharge',
      summary: 'Start V2G discharging (V2G-capable connectors only)',
      description:
        `Queues a \`discharge\` command (expires after ${minutes('discharge')}): export \`discharge_power\` kW ` +
        'for `duration` seconds (1–604800), stopping at `min_soc` (default 20). A connector that is not ' +
        'V2G-capable answers 409 (4001); an unknown device or connector, or another tenant’s, 404 (3001). ' +
        FOLLOW,
      tag: 'operator',
      auth: write,
      rate: 'operatorControl',
      params: ConnectorParams,
      body: DischargeRequest,
      response: QueuedCommand,
      errors: [404, 409],
      handler: async ({ params, body, request }) => commands.discharge(principal(request), params, body),
    }),
    route({
      method: 'POST',
      url: '/v1/operator/devices/:device_id/connectors/:connector_id/schedule',
      summary: 'Store a charging schedule on a connector',
      description:
        'Stores the schedule (the same `schedule_id` posted again replaces it) and queues a `set_schedule` ' +
        `command that carries it to the charger (expires after ${days('set_schedule')}); the answer has both. ` +
        '`end` earlier than `start` crosses midnight, equal means 24 hours. A `discharge` slot on a connector ' +
        'without V2G answers 409 (4001); an unknown device or connector, or another tenant’s, 404 (3001).',
      tag: 'operator',
      auth: write,
      rate: 'operatorControl',
      params: ConnectorParams,
      body: ScheduleRequest,
      response: ScheduleStored,
      errors: [404, 409],
      handler: async ({ params, body, request }) => commands.saveSchedule(principal(request), params, body),
    }),
    route({
      method: 'GET',
      url: '/v1/operator/devices/:device_id/connectors/:connector_id/schedules',
      summary: 'The schedules stored on a connector',
      description:
        'A page of the schedules the platform holds for the connector, ordered by `schedule_id`. An unknown ' +
        'device or connector, or another tenant’s, answers 404 (3001).',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      params: ConnectorParams,
      query: SchedulesQuery,
      response: SchedulesPage,
      errors: [404],
      handler: async ({ params, query, request }) =>
        commands.schedules(principal(request), params, query.page, query.size),
    }),
    route({
      method: 'DELETE',
      url: '/v1/operator/devices/:device_id/connectors/:connector_id/schedules/:schedule_id',
      summary: 'Delete a schedule and tell the charger',
      description:
        'Removes the platform’s copy of the schedule and queues a `delete_schedule` command (expires after ' +
        `${days('delete_schedule')}) so the charger drops it too. A schedule the platform does not hold on the ` +
        'connector answers 404 (3001), as does an unknown device or connector, or another tenant’s. ' +
        FOLLOW,
      tag: 'operator',
      auth: write,
      rate: 'operatorControl',
      params: ScheduleParamsPath,
      response: ScheduleDeleted,
      errors: [404],
      handler: async ({ params, request }) => commands.deleteSchedule(principal(request), params),
    }),
  ];
}
