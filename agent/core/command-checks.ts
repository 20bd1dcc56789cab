/**
 * Whether the charger can take a delivered command (DESIGN.md §5), and its typed params. Pure: it refuses,
 * with a reason a person can act on, what the charger cannot or must not do — an unknown command, invalid
 * params, an expired command, an unknown connector, discharge without V2G hardware.
 */
import type * as z from 'zod/mini';
import {
  type CommandParamsOf,
  DeleteScheduleParams,
  DischargeParams,
  PauseChargingParams,
  ResetParams,
  SetAvailabilityParams,
  SetConfigurationParams,
  SetPowerLimitParams,
  SetScheduleParams,
  StartParams,
  StopParams,
  UnlockConnectorParams,
  UpdateParams,
} from '../../shared/commands.js';
import { UploadDiagnosticsParams } from '../../shared/diagnostics.js';
import { CommandName } from '../../shared/resources.js';
import { validate } from '../../shared/validation.js';
import { iso } from '../clock.js';
import type { ConnectorInfo } from '../hal.js';

export type ParsedCommand =
  | { name: 'stop'; params: CommandParamsOf<'stop'> }
  | { name: 'start'; params: CommandParamsOf<'start'> }
  | { name: 'discharge'; params: CommandParamsOf<'discharge'> }
  | { name: 'set_schedule'; params: CommandParamsOf<'set_schedule'> }
  | { name: 'delete_schedule'; params: CommandParamsOf<'delete_schedule'> }
  | { name: 'set_power_limit'; params: CommandParamsOf<'set_power_limit'> }
  | { name: 'pause_charging'; params: CommandParamsOf<'pause_charging'> }
  | { name: 'update'; params: CommandParamsOf<'update'> }
  | { name: 'reset'; params: CommandParamsOf<'reset'> }
  | { name: 'set_availability'; params: CommandParamsOf<'set_availability'> }
  | { name: 'unlock_connector'; params: CommandParamsOf<'unlock_connector'> }
  | { name: 'set_configuration'; params: CommandParamsOf<'set_configuration'> }
  | { name: 'upload_diagnostics'; params: CommandParamsOf<'upload_diagnostics'> };

export type CommandCheck = { ok: true; command: ParsedCommand } | { ok: false; reason: string };

export interface CheckContext {
  /** The platform's time as best known (agent clock corrected by the measured skew), ms. */
  now: number;
  connectors: readonly ConnectorInfo[];
}

function parse<S extends z.core.$ZodType>(
  schema: S,
  params: unknown,
): { ok: true; data: z.infer<S> } | { ok: false; reason: string } {
  const result = validate(schema, params);
  if (result.ok) return { ok: true, data: result.data };
  const { field, message } = result.error;
  return { ok: false, reason: `invalid params: ${field === 'body' ? 'params' : field}: ${message}` };
}

/** The typed params of a command by name, without judging expiry or the hardware. */
export function parsedOf(name: CommandName, params: unknown): CommandCheck {
  const fail = (r: { ok: false; reason: string }): CommandCheck => r;
  switch (name) {
    case 'stop': {
      const p = parse(StopParams, params);
      return p.ok ? { ok: true, command: { name, params: p.data } } : fail(p);
    }
    case 'start': {
      const p = parse(StartParams, params);
      return p.ok ? { ok: true, command: { name, params: p.data } } : fail(p);
    }
    case 'discharge': {
      const p = parse(DischargeParams, params);
      return p.ok ? { ok: true, command: { name, params: p.data } } : fail(p);
    }
    case 'set_schedule': {
      const p = parse(SetScheduleParams, params);
      return p.ok ? { ok: true, command: { name, params: p.data } } : fail(p);
    }
    case 'delete_schedule': {
      const p = parse(DeleteScheduleParams, params);
      return p.ok ? { ok: true, command: { name, params: p.data } } : fail(p);
    }
    case 'set_power_limit': {
      const p = parse(SetPowerLimitParams, params);
      return p.ok ? { ok: true, command: { name, params: p.data } } : fail(p);
    }
    case 'pause_charging': {
      const p = parse(PauseChargingParams, params);
      return p.ok ? { ok: true, command: { name, params: p.data } } : fail(p);
    }
    case 'update': {
      const p = parse(UpdateParams, params);
      return p.ok ? { ok: true, command: { name, params: p.data } } : fail(p);
    }
    case 'reset': {
      const p = parse(ResetParams, params);
      return p.ok ? { ok: true, command: { name, params: p.data } } : fail(p);
    }
    case 'set_availability': {
      const p = parse(SetAvailabilityParams, params);
      return p.ok ? { ok: true, command: { name, params: p.data } } : fail(p);
    }
    case 'unlock_connector': {
      const p = parse(UnlockConnectorParams, params);
      return p.ok ? { ok: true, command: { name, params: p.data } } : fail(p);
    }
    case 'set_configuration': {
      const p = parse(SetConfigurationParams, params);
      return p.ok ? { ok: true, command: { name, params: p.data } } : fail(p);
    }
    case 'upload_diagnostics': {
      const p = parse(UploadDiagnosticsParams, params);
      return p.ok ? { ok: true, command: { name, params: p.data } } : fail(p);
    }
  }
}

/** Whether the charger can take this command, and its typed params. Pure. */
export function checkCommand(
  command: { command: string; params: unknown; expiry: string },
  ctx: CheckContext,
): CommandCheck {
  const name = CommandName.safeParse(command.command);
  if (!name.success)
    return { ok: false, reason: `unsupported command ${JSON.stringify(command.command).slice(0, 40)}` };
  const expiry = Date.parse(command.expiry);
  if (Number.isNaN(expiry)) return { ok: false, reason: 'invalid expiry' };
  if (expiry <= ctx.now) {
    return {
      ok: false,
      reason: `command expired at ${command.expiry} before the charger could run it (charger time ${iso(ctx.now)})`,
    };
  }
  const parsed = parsedOf(name.data, command.params);
  if (!parsed.ok) return parsed;
  const params = parsed.command.params;
  if ('connector_id' in params) {
    const connector = ctx.connectors.find((c) => c.connectorId === params.connector_id);
    if (!connector) {
      const ids = ctx.connectors.map((c) => c.connectorId).join(', ');
      return {
        ok: false,
        reason: `unknown connector ${params.connector_id} (this charger has ${ids || 'none'})`,
      };
    }
    if (parsed.command.name === 'discharge' && !connector.v2gCapable) {
      return {
        ok: false,
        reason: `connector ${connector.connectorId} has no V2G hardware: cannot discharge`,
      };
    }
    if (
      parsed.command.name === 'set_schedule' &&
      !connector.v2gCapable &&
      parsed.command.params.schedule.time_slots.some((s) => s.action === 'discharge')
    ) {
      return {
        ok: false,
        reason: `connector ${connector.connectorId} has no V2G hardware: discharge slots are not possible`,
      };
    }
  }
  return parsed;
}
