import * as z from 'zod';
import { Identifier } from './primitives.js';

/** Messages of the live telemetry stream `/v1/operator/stream` (DESIGN.md §8). */
export const STREAM_MAX_DEVICE_IDS = 1000;
export const STREAM_MAX_SITE_IDS = 100;
/** Concurrent stream connections of one client, whatever their subscriptions. */
export const STREAM_MAX_CONNECTIONS_PER_CLIENT = 20;
export const STREAM_CLOSE_TOKEN_EXPIRED = 4401;

export const StreamSubscribe = z
  .strictObject({
    type: z.literal('subscribe'),
    device_ids: z.array(Identifier).min(1).max(STREAM_MAX_DEVICE_IDS).optional(),
    site_ids: z.array(Identifier).min(1).max(STREAM_MAX_SITE_IDS).optional(),
  })
  .superRefine((m, ctx) => {
    if ((m.device_ids === undefined) === (m.site_ids === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['device_ids'],
        message: 'give exactly one of device_ids and site_ids',
      });
    }
  });
export const StreamPing = z.strictObject({ type: z.literal('ping') });
export const StreamClientMessage = z.union([StreamSubscribe, StreamPing]);
export type StreamClientMessage = z.infer<typeof StreamClientMessage>;

/**
 * A stream ticket (POST /v1/operator/stream/tickets): what a browser puts in the stream's URL instead of its
 * access token. It opens one connection, within STREAM_TICKET_TTL_SECONDS, as the client that asked for it.
 */
export const STREAM_TICKET_TTL_SECONDS = 30;
export const StreamTicket = z.object({
  ticket: z.string(),
  expires_in: z.literal(STREAM_TICKET_TTL_SECONDS),
});
export type StreamTicket = z.infer<typeof StreamTicket>;
