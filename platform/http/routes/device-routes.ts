import type { FastifyRequest } from 'fastify';
import {
  ChargingRecordsUpload,
  CommandParamsPath,
  CommandPollQuery,
  CommandStatusAck,
  CommandStatusReport,
  CommandsData,
  DEVICE_SECRET_EXPIRES_IN_SECONDS,
  DeviceToken,
  DeviceTokenRequest,
  EventsUpload,
  FirmwareStatusAck,
  FirmwareStatusReport,
  HeartbeatData,
  HeartbeatRequest,
  MAX_BATCH_BODY_BYTES,
  RegisterRequest,
  Registration,
  SecretRotated,
  TelemetryAccepted,
  TelemetryBatchAccepted,
  TelemetryBatchRequest,
  TelemetryRecord,
  toTimestamp,
  UploadAccepted,
} from '../../../shared/index.js';
import { errors } from '../../domain/api-error.js';
import { ATTESTATION_MESSAGES } from '../../domain/attestation.js';
import { tokenTimes } from '../../services/access-tokens.js';
import type { RegistrationResult } from '../../services/registration-service.js';
import { presentedChain } from '../auth/client-certificate.js';
import type { PlatformContext } from '../context.js';
import { type AnyRoute, applyDecision, enforceRateLimit, route } from '../route-spec.js';
import { beginCredentialAttempt } from './credential-attempts.js';
import { deviceArtifactRoutes } from './device-artifact-routes.js';
import { deviceDiagnosticsRoutes } from './device-diagnostics-routes.js';
import { quickTelemetryBatch, quickTelemetryRecord } from './telemetry-bodies.js';

const device = { kind: 'device' } as const;

/** The answer to a refused registration. */
function registrationRefused(outcome: Exclude<RegistrationResult, { kind: 'registered' }>) {
  switch (outcome.kind) {
    // Under `attested`, a missing or unvouched certificate is a refusal like any other (403/2003).
    case 'not_attested':
      return errors.forbidden(ATTESTATION_MESSAGES[outcome.refusal]);
    case 'not_allowed':
      return errors.forbidden('Serial number is not on the registration allowlist');
    case 'other_operator':
      return errors.forbidden(
        "The charger is in another operator's site: that operator must move it before this group can enrol it",
      );
    case 'already_registered':
      return errors.conflict('Serial number is already registered; an operator must reset the device first');
  }
}

export function deviceRoutes(ctx: PlatformContext): AnyRoute[] {
  const deviceId = (request: FastifyRequest): string => request.device!.deviceId;
  const reporting = ctx.reporting;

  return [
    route({
      method: 'POST',
      url: '/v1/device/register',
      summary: 'Register a charger on first connection',
      description:
        'No bearer token. Answers the `device_id` and a `device_secret` to exchange at POST /v1/device/token; the ' +
        'secret stays valid until it is reset or rotated. `connectors` declares each connector’s power and V2G ' +
        'capability (without it, connectors are learned from telemetry and not V2G-capable). The registration ' +
        'policy may refuse the serial, 403 (2003); a serial already registered answers 409 (4001) until an ' +
        'operator resets it; after 60 such refusals in a minute for one serial from one address, 429 (5001).',
      tag: 'device',
      auth: { kind: 'none' },
      rate: 'unauthenticated',
      body: RegisterRequest,
      response: Registration,
      // Throttled in the handler: refusals per serial number and address. A success needs no budget of its own:
      // the serial then answers 409 until an operator resets it.
      errors: [403, 409, 429],
      handler: async ({ body, request, reply }) => {
        // Refusals count per serial and address (DESIGN.md §18), so nobody can keep a charger from registering.
        const attempt = await beginCredentialAttempt(ctx, 'registerFailures', body.sn, request.ip, reply);
        const outcome = await ctx.registration.register(body, presentedChain(request.raw.socket));
        if (outcome.kind !== 'registered') {
          await attempt.failed();
          throw registrationRefused(outcome);
        }
        return {
          device_id: outcome.device.device_id,
          device_secret: outcome.secret,
          expires_in: DEVICE_SECRET_EXPIRES_IN_SECONDS,
        };
      },
    }),
    route({
      method: 'POST',
      url: '/v1/device/token',
      summary: 'Exchange the device credentials for a bearer token',
      description:
        'No bearer token. Wrong, unknown or revoked credentials answer 401 (2001); after 60 such failures in a ' +
        'minute for one `device_id` from one address, that address gets 429 (5001) for it until the window ' +
        'ends. During a secret rotation both secrets work; a token obtained with the new one retires the old.',
      tag: 'device',
      auth: { kind: 'none' },
      rate: 'unauthenticated',
      body: DeviceTokenRequest,
      response: DeviceToken,
      // Wrong or revoked credentials; throttled in the handler: failures per device id and address, tokens per
      // device id.
      errors: [401, 429],
      handler: async ({ body, request, reply }) => {
        const attempt = await beginCredentialAttempt(
          ctx,
          'deviceTokenFailures',
          body.device_id,
          request.ip,
          reply,
        );
        // Tokens per device id (not in the spec's table, like other charger reporting): looked at before the
        // exchange, which may retire an old secret, and spent only once the secret is proven.
        const issued = `token:${body.device_id}`;
        applyDecision(ctx, 'deviceReporting', await ctx.rateLimiter.peek('deviceReporting', issued), reply);
        // During a rotation's grace the old and the new secret both work; the new one retires the old.
        const gen = await ctx.secrets.exchange(body.device_id, body.device_secret);
        if (gen === undefined) {
          await attempt.failed();
          throw errors.unauthorized('Invalid device credentials');
        }
        await enforceRateLimit(ctx, 'deviceReporting', issued, reply);
        const times = tokenTimes(ctx.now(), ctx.options.tokenTtlSeconds);
        const ttl = ctx.options.tokenTtlSeconds;
        const access_token = ctx.tokens.issueDeviceToken({ sub: body.device_id, gen, ...times });
        return { access_token, token_type: 'Bearer' as const, expires_in: ttl };
      },
    }),
    route({
      method: 'POST',
      url: '/v1/device/heartbeat',
      summary: 'Heartbeat (every 30 s); answers with the pending commands',
      description:
        'Answers the pending commands and `server_time`. A command not yet reported on is delivered again on ' +
        'every heartbeat until it expires: de-duplicate by `command_id`. A heartbeat with `status` `offline` ' +
        'marks the charger offline at once and receives no commands.',
      tag: 'device',
      auth: device,
      rate: 'deviceRealtime',
      body: HeartbeatRequest,
      response: HeartbeatData,
      handler: async ({ body, request }) => {
        const { commands, atMs } = await reporting.heartbeat(deviceId(request), body);
        return { commands, server_time: toTimestamp(atMs) };
      },
    }),
    route({
      method: 'GET',
      url: '/v1/device/commands',
      summary: 'Long poll for pending commands (wait up to 30 s)',
      description:
        'Answers at once when commands are pending, as soon as one is queued, or empty after `wait` seconds.',
      tag: 'device',
      auth: device,
      rate: 'deviceRealtime',
      query: CommandPollQuery,
      response: CommandsData,
      handler: async ({ query, request, reply }) => {
        // A charger that hangs up ends its wait.
        const hungUp = new AbortController();
        const onClose = () => hungUp.abort();
        reply.raw.once('close', onClose);
        try {
          const { commands, atMs } = await reporting.pollCommands(
            deviceId(request),
            query.wait * 1000,
            hungUp.signal,
          );
          return { commands, server_time: toTimestamp(atMs) };
        } finally {
          reply.raw.off('close', onClose);
        }
      },
    }),
    route({
      method: 'POST',
      url: '/v1/device/commands/:command_id/status',
      summary: 'Report a command’s status: accepted, rejected, succeeded or failed',
      description:
        'Reports only move a command forward: a repeat, or `accepted` arriving after a final status, is ' +
        'acknowledged with `changed: false`. A cancelled or expired command answers 409.',
      tag: 'device',
      auth: device,
      rate: 'deviceReporting',
      params: CommandParamsPath,
      body: CommandStatusReport,
      response: CommandStatusAck,
      errors: [404, 409],
      handler: async ({ params, body, request }) => {
        const t = ctx.now();
        const result = await ctx.commands.reportStatus(deviceId(request), params.command_id, body, t);
        if (result.outcome === 'not_found') throw errors.notFound('Command');
        if (result.outcome === 'conflict') throw errors.conflict(`Command is already ${result.status}`);
        return { command_id: params.command_id, status: result.command.status, changed: result.changed };
      },
    }),
    route({
      method: 'POST',
      url: '/v1/device/telemetry',
      summary: 'Real-time telemetry of one connector (every 5 s while charging or discharging)',
      description:
        '`timestamp`, `connector_id` (1–16) and `state` are required, the measurements optional; `discharging` ' +
        'needs a negative `power`. Unknown fields are ignored (forward compatibility of firmware). Answers ' +
        '`accepted: 1` once the record is stored.',
      tag: 'device',
      auth: device,
      rate: 'deviceRealtime',
      body: TelemetryRecord,
      quickBody: quickTelemetryRecord,
      response: TelemetryAccepted,
      handler: async ({ body, request }) => {
        await reporting.telemetry(deviceId(request), [body]);
        return { accepted: 1 };
      },
    }),
    route({
      method: 'POST',
      url: '/v1/device/telemetry/batch',
      summary: 'Upload a telemetry backlog after an outage (up to 500 records)',
      description:
        'Records already stored (same connector and timestamp) are counted as duplicates and ignored.',
      tag: 'device',
      auth: device,
      rate: 'deviceRealtime',
      bodyLimit: MAX_BATCH_BODY_BYTES,
      body: TelemetryBatchRequest,
      quickBody: quickTelemetryBatch,
      response: TelemetryBatchAccepted,
      handler: async ({ body, request }) => {
        const accepted = await reporting.telemetry(deviceId(request), body.records);
        return { accepted, duplicates: body.records.length - accepted };
      },
    }),
    route({
      method: 'POST',
      url: '/v1/device/events',
      summary: 'Report charger events (idempotent on event_id)',
      description:
        'Up to 100 events; one whose `event_id` is already stored is ignored and counted in `duplicates`. `kind` ' +
        'is lower_snake_case (`boot`, `vehicle_plugged`, `fault_raised`, …). A new `boot` event’s ' +
        '`data.version` becomes the charger’s `agent_version`; new events of severity `error` or `critical` are ' +
        'sent to webhooks as `device.fault`.',
      tag: 'device',
      auth: device,
      rate: 'deviceReporting',
      body: EventsUpload,
      response: UploadAccepted,
      handler: async ({ body, request }) => reporting.events(deviceId(request), body.events),
    }),
    route({
      method: 'POST',
      url: '/v1/device/charging-records',
      summary: 'Upload charging records (idempotent on record_id)',
      description: 'A record_id already stored for this charger is ignored and counted as a duplicate.',
      tag: 'device',
      auth: device,
      rate: 'deviceReporting',
      body: ChargingRecordsUpload,
      response: UploadAccepted,
      handler: async ({ body, request }) => {
        const accepted = await reporting.chargingRecords(deviceId(request), body.records);
        return { accepted, duplicates: body.records.length - accepted };
      },
    }),
    route({
      method: 'POST',
      url: '/v1/device/firmware/status',
      summary: 'Report firmware upgrade status',
      description:
        'The report is stored and sent to webhooks as `firmware.status_changed`; one whose `report_id` is ' +
        'already stored for the charger is answered the same and changes nothing. `installed` with a `version` ' +
        'sets the charger’s `firmware_version`, or with an `update_id` its `agent_version` or ' +
        '`firmware_version` by the update’s kind; a report with an `update_id` also moves the charger’s state ' +
        'in that update.',
      tag: 'device',
      auth: device,
      rate: 'deviceReporting',
      body: FirmwareStatusReport,
      response: FirmwareStatusAck,
      handler: async ({ body, request }) => {
        await reporting.firmwareStatus(deviceId(request), body);
        return { status: body.status };
      },
    }),
    route({
      method: 'POST',
      url: '/v1/device/secret/rotate',
      summary: 'Rotate the device secret (two-phase)',
      description:
        'Answers with a new, pending secret. The old secret and the tokens issued with it keep working until the ' +
        'charger obtains a token with the new secret at `POST /v1/device/token`, or until 24 hours have passed; ' +
        'then the new secret is the only one and every token issued with the old one is revoked. Until then a ' +
        'repeated request answers the same pending secret, so a charger that lost the answer asks again. Store ' +
        'the new secret before using it, and keep the old one until the new one has worked.',
      tag: 'device',
      auth: device,
      rate: 'deviceReporting',
      response: SecretRotated,
      handler: async ({ request }) => {
        const id = deviceId(request);
        const secret = await ctx.secrets.rotate(id);
        if (secret === undefined) throw errors.unauthorized('Device credentials were revoked');
        return { device_id: id, device_secret: secret, expires_in: DEVICE_SECRET_EXPIRES_IN_SECONDS };
      },
    }),
    ...deviceArtifactRoutes(ctx),
    ...deviceDiagnosticsRoutes(ctx),
  ];
}
