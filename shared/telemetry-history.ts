import * as z from 'zod';
import { PhaseDetails } from './device-api.js';
import { ConnectorIdParam, queryInt, Soc, Timestamp } from './primitives.js';

// GET /v1/operator/devices/{device_id}/telemetry (DESIGN.md §21): what a charger's connectors reported, raw or
// averaged per minute or per 15 minutes, oldest first, in cursor pages.

export const TELEMETRY_RESOLUTIONS = ['raw', '1m', '15m'] as const;
export type TelemetryResolution = (typeof TELEMETRY_RESOLUTIONS)[number];
/** Bucket length of each averaged resolution. */
export const TELEMETRY_BUCKET_MS = { '1m': 60_000, '15m': 900_000 } as const;
/** Items per page at most (and by default). */
export const TELEMETRY_PAGE_MAX = 2000;
/** Without start_time, the range starts this long before end_time. */
export const TELEMETRY_DEFAULT_SPAN_MS = 3_600_000;

/** Where a page ended: the item after which the next page starts. Opaque on the wire (base64url). */
export interface TelemetryCursor {
  resolution: TelemetryResolution;
  /** The last item's timestamp (a bucket's start when averaged), epoch ms. */
  tsMs: number;
  connectorId: number;
}

export function encodeTelemetryCursor(c: TelemetryCursor): string {
  return Buffer.from(`${c.resolution}.${c.tsMs}.${c.connectorId}`).toString('base64url');
}

const CURSOR_TEXT = /^(raw|1m|15m)\.(\d{1,15})\.(\d{1,2})$/;

/** The cursor `text` names, or undefined when it is not one this endpoint gave. */
export function decodeTelemetryCursor(text: string): TelemetryCursor | undefined {
  if (!/^[A-Za-z0-9_-]{1,48}$/.test(text)) return undefined;
  const m = CURSOR_TEXT.exec(Buffer.from(text, 'base64url').toString());
  if (!m) return undefined;
  return { resolution: m[1] as TelemetryResolution, tsMs: Number(m[2]), connectorId: Number(m[3]) };
}

export const TelemetryHistoryQuery = z
  .strictObject({
    /** One connector; all of the charger's when absent. */
    connector_id: z.optional(ConnectorIdParam),
    /** Default: end_time minus one hour. */
    start_time: z.optional(Timestamp),
    /** Default: now. */
    end_time: z.optional(Timestamp),
    resolution: z._default(z.enum(TELEMETRY_RESOLUTIONS), 'raw'),
    /** `next_cursor` of the previous page, with the same query. */
    cursor: z.optional(
      z
        .string()
        .check(z.refine((c) => decodeTelemetryCursor(c) !== undefined, 'not a cursor of this endpoint')),
    ),
    /** Items per page, 1–2000 (default 2000). */
    limit: z._default(queryInt(1, TELEMETRY_PAGE_MAX), TELEMETRY_PAGE_MAX),
  })
  .superRefine((q, ctx) => {
    if (q.start_time && q.end_time && Date.parse(q.end_time) <= Date.parse(q.start_time)) {
      ctx.addIssue({ code: 'custom', path: ['end_time'], message: 'must be later than start_time' });
    }
    const cursor = q.cursor === undefined ? undefined : decodeTelemetryCursor(q.cursor);
    if (cursor && cursor.resolution !== q.resolution) {
      ctx.addIssue({
        code: 'custom',
        path: ['cursor'],
        message: `is a cursor of resolution ${cursor.resolution}`,
      });
    }
  });
export type TelemetryHistoryQuery = z.infer<typeof TelemetryHistoryQuery>;

export const TelemetryHistoryItem = z.object({
  /** The sample's time as the charger sent it; when averaged, the bucket's start. */
  timestamp: Timestamp,
  connector_id: z.int(),
  /** The sample's state; when averaged, the bucket's last. */
  state: z.enum(['idle', 'charging', 'discharging', 'fault']),
  // Each measurement as sent, or the bucket's mean of the samples that had it; absent when none had it.
  power: z.optional(z.number()),
  voltage: z.optional(z.number()),
  current: z.optional(z.number()),
  energy_delivered: z.optional(z.number()),
  soc: z.optional(z.union([Soc, z.number()])),
  temperature: z.optional(z.number()),
  /** Raw samples only, when the charger sent them. */
  phase_details: z.optional(PhaseDetails),
  /** Averaged buckets only: how many samples the bucket holds. */
  samples: z.optional(z.int()),
});
export type TelemetryHistoryItem = z.infer<typeof TelemetryHistoryItem>;

export const TelemetryHistoryPage = z.object({
  device_id: z.string(),
  resolution: z.enum(TELEMETRY_RESOLUTIONS),
  /** The range read; averaged resolutions widen it to whole buckets. */
  start_time: Timestamp,
  end_time: Timestamp,
  items: z.array(TelemetryHistoryItem),
  /** Pass as `cursor` (with the same query) for the next page; null on the last page. */
  next_cursor: z.nullable(z.string()),
});
export type TelemetryHistoryPage = z.infer<typeof TelemetryHistoryPage>;
