import type { FastifyInstance } from 'fastify';
import {
  DEVICE_SECRET_EXPIRES_IN_SECONDS,
  DeviceTokenRequest,
  HeartbeatRequest,
  ok,
  RegisterRequest,
  TelemetryRecord,
} from '../../shared/index.js';
import { errors } from '../api-error.js';
import { requireDevice, secretsEqual } from '../auth/index.js';
import type { PlatformContext } from '../context.js';
import { parse } from '../parse.js';

const DUMMY_SECRET = 'x'.repeat(43);

export function deviceRoutes(app: FastifyInstance, ctx: PlatformContext): void {
  const device = requireDevice(ctx);

  app.post('/v1/device/register', async (request) => {
    const input = parse(RegisterRequest, request.body);
    const outcome = await ctx.store.registerDevice(input, {
      registration: ctx.options.registration,
      defaultSiteId: ctx.options.defaultSiteId,
    });
    if (outcome.kind === 'not_allowed')
      throw errors.forbidden('Serial number is not on the registration allowlist');
    if (outcome.kind === 'already_registered') {
      throw errors.conflict('Serial number is already registered; an operator must reset the device first');
    }
    ctx.credentials.setGeneration(outcome.device.device_id, outcome.device.secret_gen);
    return ok({
      device_id: outcome.device.device_id,
      device_secret: outcome.secret,
      expires_in: DEVICE_SECRET_EXPIRES_IN_SECONDS,
    });
  });

  app.post('/v1/device/token', async (request) => {
    const input = parse(DeviceTokenRequest, request.body);
    const row = await ctx.store.getDevice(input.device_id);
    const stored =
      row?.registered && row.secret_sealed ? ctx.keys.openSecret(row.secret_sealed) : DUMMY_SECRET;
    if (!secretsEqual(input.device_secret, stored) || !row?.registered) {
      throw errors.unauthorized('Invalid device credentials');
    }
    const nowSec = Math.floor(ctx.now() / 1000);
    const ttl = ctx.options.tokenTtlSeconds;
    ctx.credentials.setGeneration(row.device_id, row.secret_gen);
    const access_token = ctx.tokens.issueDeviceToken({
      sub: row.device_id,
      gen: row.secret_gen,
      iat: nowSec,
      exp: nowSec + ttl,
    });
    return ok({ access_token, token_type: 'Bearer' as const, expires_in: ttl });
  });

  app.post('/v1/device/heartbeat', { preHandler: device }, async (request) => {
    const hb = parse(HeartbeatRequest, request.body);
    const deviceId = request.device!.deviceId;
    const t = ctx.now();
    if (hb.status === 'offline') ctx.liveness.markOffline(deviceId);
    await ctx.store.recordHeartbeat(deviceId, { status: hb.status, fault_code: hb.fault_code, atMs: t });
    // A charger going offline gets no commands: it would not be there to run them.
    const commands = hb.status === 'offline' ? [] : await ctx.store.takePendingCommands(deviceId, t);
    return ok({ commands, server_time: new Date(t).toISOString() });
  });

  app.post('/v1/device/telemetry', { preHandler: device }, async (request) => {
    const record = parse(TelemetryRecord, request.body);
    await ctx.store.recordTelemetry(request.device!.deviceId, [record], ctx.now());
    return ok({ accepted: 1 });
  });
}
