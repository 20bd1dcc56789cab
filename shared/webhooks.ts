import * as z from 'zod';
import { DeviceEvent, FirmwareStatusReport } from './device-api.js';
import { ControlStatus } from './operator-api.js';
import {
  CONTROL_CHARACTERS_MESSAGE,
  Identifier,
  PageQuery,
  pageOf,
  TelemetryState,
  Timestamp,
  WITHOUT_CONTROL_CHARACTERS,
} from './primitives.js';
import { ChargingRecord, CommandName, CommandStatus } from './resources.js';
import { UpdateArtifactSummary, UpdateStatus } from './updates.js';

/** Webhooks (DESIGN.md §14): endpoints an API client registers to be told of its devices' events. */
export const WEBHOOK_EVENT_TYPES = [
  'device.registered',
  'device.online',
  'device.offline',
  'device.fault',
  'connector.state_changed',
  'command.status_changed',
  'control.status_changed',
  'charging_record.created',
  'firmware.status_changed',
  'update.status_changed',
  'diagnostics.available',
  'device.configuration_changed',
  'webhook.test',
] as const;
export const WebhookEventType = z.enum(WEBHOOK_EVENT_TYPES);
export type WebhookEventType = z.infer<typeof WebhookEventType>;

/** At most this many endpoints per API client. */
export const WEBHOOKS_PER_CLIENT = 10;
export const WEBHOOK_URL_MAX = 2048;

const events = z
  .array(z.union([WebhookEventType, z.literal('*')]))
  .min(1)
  .max(WEBHOOK_EVENT_TYPES.length + 1)
  .refine((list) => !list.includes('*') || list.length === 1, 'use ["*"] alone, or list event types');
const url = z.url({ protocol: /^https?$/ }).max(WEBHOOK_URL_MAX);
const description = z.string().max(256).regex(WITHOUT_CONTROL_CHARACTERS, CONTROL_CHARACTERS_MESSAGE);

export const WebhookCreate = z.strictObject({ url, events, description: description.optional() });
export const WebhookUpdate = z
  .strictObject({
    url: url.optional(),
    events: events.optional(),
    description: description.nullable().optional(),
    status: z.enum(['enabled', 'disabled']).optional(),
  })
  .refine((u) => Object.keys(u).length > 0, 'nothing to change');
export type WebhookUpdate = z.infer<typeof WebhookUpdate>;

export const WebhookStatus = z.enum(['enabled', 'disabled']);
export const Webhook = z.object({
  webhook_id: z.string(),
  url: z.string(),
  events: z.array(z.string()),
  description: z.string().nullable(),
  status: WebhookStatus,
  /** Why the platform disabled it (`gone`: the receiver answered 410; `failing`: 5 days of failures). */
  disabled_reason: z.string().nullable(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Webhook = z.infer<typeof Webhook>;
/** The create and rotate answers: the only ones that carry the signing secret. */
export const WebhookWithSecret = Webhook.extend({ secret: z.string() });
export const WebhooksQuery = z.strictObject({ ...PageQuery });
export const WebhooksPage = pageOf(Webhook);
export const WebhookParams = z.object({ webhook_id: Identifier });
export const DeliveryParams = z.object({ webhook_id: Identifier, delivery_id: Identifier });

export const DeliveryState = z.enum(['pending', 'succeeded', 'failed']);
/**
 * Why the last attempt failed, as a category only (DESIGN.md §18): never a raw address or socket message, which
 * would make the deliveries log a port scanner for whoever owns the endpoint.
 */
export const DeliveryErrorCategory = z.enum([
  'timeout',
  'connection_refused',
  'tls_error',
  'dns_error',
  'address_not_allowed',
  'http_status',
]);
export type DeliveryErrorCategory = z.infer<typeof DeliveryErrorCategory>;
export const WebhookDelivery = z.object({
  delivery_id: z.string(),
  type: z.string(),
  created_at: Timestamp,
  attempts: z.number().int(),
  /** HTTP status of the last attempt, or null when it got none (refused, timed out, blocked address). */
  last_status: z.number().int().nullable(),
  /** Null when the last attempt succeeded or none was made yet; `http_status`: see `last_status`. */
  last_error: DeliveryErrorCategory.nullable(),
  next_attempt_at: z.nullable(Timestamp),
  state: DeliveryState,
});
export type WebhookDelivery = z.infer<typeof WebhookDelivery>;
export const DeliveriesPage = pageOf(WebhookDelivery);

const deviceStatusChange = (status: 'online' | 'offline') =>
  z.object({ device_id: z.string(), status: z.literal(status), at: Timestamp });

/** The `data` of each event type, in the API's own shapes (the OpenAPI document's `webhooks`). */
export const WEBHOOK_EVENT_DATA = {
  'device.registered': z.object({
    device_id: z.string(),
    sn: z.string(),
    model: z.string().optional(),
    manufacturer: z.string().optional(),
    firmware_version: z.string().optional(),
    agent_version: z.string().optional(),
    site_id: z.string().optional(),
  }),
  'device.online': deviceStatusChange('online'),
  'device.offline': deviceStatusChange('offline'),
  /** A charger event of severity `error` or `critical`, as uploaded. */
  'device.fault': z.object({ ...DeviceEvent.shape, device_id: z.string() }),
  /** A change of a connector's reported state (not every sample). */
  'connector.state_changed': z.object({
    device_id: z.string(),
    connector_id: z.number().int(),
    state: TelemetryState,
    previous_state: TelemetryState,
    at: Timestamp,
  }),
  'command.status_changed': z.object({
    command_id: z.string(),
    device_id: z.string(),
    command: CommandName,
    status: CommandStatus,
    reason: z.string().optional(),
    at: Timestamp,
  }),
  'control.status_changed': z.object({
    control_id: z.string(),
    status: ControlStatus,
    command: CommandName,
    target_type: z.enum(['site', 'operator', 'all']),
    target_ids: z.array(z.string()),
    created_at: Timestamp,
    ends_at: Timestamp,
    at: Timestamp,
  }),
  'charging_record.created': ChargingRecord,
  'firmware.status_changed': z.object({ ...FirmwareStatusReport.shape, device_id: z.string() }),
  /** An update (DESIGN.md §19) started, paused (by the operator or over its failure threshold), resumed, completed or was cancelled. */
  'update.status_changed': z.object({
    update_id: z.string(),
    status: UpdateStatus,
    reason: z.string().optional(),
    artifact: UpdateArtifactSummary,
    /** How many chargers are in each state. */
    progress: z.record(z.string(), z.number().int()),
    at: Timestamp,
  }),
  /** A charger reported a configuration (DESIGN.md §20) whose values differ from the one stored before. */
  'device.configuration_changed': z.object({
    device_id: z.string(),
    /** Every key as the charger reported it. */
    values: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
    /** The keys whose value differs from the previous report (all of them at the first). */
    changed: z.array(z.string()),
    reported_at: Timestamp,
  }),
  /** A diagnostics archive (DESIGN.md §20) is uploaded whole and checked: download it from the operator API. */
  'diagnostics.available': z.object({
    diagnostics_id: z.string(),
    device_id: z.string(),
    /** Bytes of the archive. */
    size: z.number().int(),
    /** Lowercase hex of the archive's SHA-256 (the download's ETag). */
    sha256: z.string(),
  }),
  'webhook.test': z.object({ webhook_id: z.string() }),
} satisfies Record<WebhookEventType, z.core.$ZodType>;

/** What a receiver gets, for one event type. */
export function webhookEventBody<T extends WebhookEventType>(type: T) {
  return z.object({ type: z.literal(type), timestamp: Timestamp, data: WEBHOOK_EVENT_DATA[type] });
}
