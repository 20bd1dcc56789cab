import * as z from 'zod';
import { ArtifactKind } from './artifacts.js';
import { TIME_OF_DAY, UPDATE_INSTALL_MODES } from './commands.js';
import { FLEXIBILITY_TARGET_IDS_MAX } from './limits.js';
import { Identifier, PageQuery, pageOf, Timestamp } from './primitives.js';

/** Updates (campaigns) on the operator API (DESIGN.md §19): one artifact rolled out to chargers in batches. */
export const UPDATE_STATUSES = ['running', 'paused', 'completed', 'cancelled'] as const;
export const UpdateStatus = z.enum(UPDATE_STATUSES);
export type UpdateStatus = z.infer<typeof UpdateStatus>;

/**
 * Where each charger of an update stands. `pending`: its batch has not started; `queued`: the `update` command
 * waits for it; `downloading`, `install_scheduled`, `installing` follow its reports; `installed`: reported
 * installed, watched for `health_seconds`; `succeeded`: healthy that long; `skipped`: already on the version;
 * `failed` and `rolled_back` count against `max_failure_percent`; `cancelled`: the update was cancelled first.
 */
export const UPDATE_DEVICE_STATES = [
  'pending',
  'queued',
  'downloading',
  'install_scheduled',
  'installing',
  'installed',
  'succeeded',
  'skipped',
  'failed',
  'rolled_back',
  'cancelled',
] as const;
export const UpdateDeviceState = z.enum(UPDATE_DEVICE_STATES);
export type UpdateDeviceState = z.infer<typeof UpdateDeviceState>;

export const UPDATE_BATCH_STATUSES = ['pending', 'running', 'completed', 'failed'] as const;

/** The largest batch, and the most chargers one update may reach. */
export const UPDATE_DEVICES_MAX = 100_000;

const timeOfDay = z.string().regex(TIME_OF_DAY, 'must be HH:MM (00:00 to 23:59)');
export const UpdateWindow = z
  .strictObject({ start: timeOfDay, end: timeOfDay })
  .refine((w) => w.start !== w.end, { message: 'start and end must differ', path: ['end'] });

export const UpdateRollout = z.strictObject({
  /** Chargers per batch; default: all in one batch. */
  batch_size: z.number().int().min(1).max(UPDATE_DEVICES_MAX).optional(),
  /** More failures than this share of a batch pause the update. */
  max_failure_percent: z.number().int().min(0).max(100).default(20),
  /** How long an installed charger must stay healthy before its batch counts it done. */
  health_seconds: z.number().int().min(0).max(86_400).default(600),
  /** At most this share of any one site's chargers in one batch (at least one). */
  max_site_percent: z.number().int().min(1).max(100).default(100),
});
export type UpdateRollout = z.infer<typeof UpdateRollout>;

export const UpdateRequest = z
  .strictObject({
    artifact_id: Identifier,
    target_type: z.enum(['device', 'site', 'operator', 'all']),
    target_ids: z.array(Identifier).min(1).max(FLEXIBILITY_TARGET_IDS_MAX).optional(),
    install: z.enum(UPDATE_INSTALL_MODES).default('when_idle'),
    window: UpdateWindow.optional(),
    rollout: UpdateRollout.default({ max_failure_percent: 20, health_seconds: 600, max_site_percent: 100 }),
  })
  .superRefine((r, ctx) => {
    if (r.target_type !== 'all' && !r.target_ids) {
      ctx.addIssue({
        code: 'custom',
        path: ['target_ids'],
        message: `required when target_type is ${r.target_type}`,
      });
    }
  });
export type UpdateRequest = z.infer<typeof UpdateRequest>;

export const UpdateAccepted = z.object({
  update_id: Identifier,
  status: UpdateStatus,
  device_count: z.number().int(),
});

export const UpdateArtifactSummary = z.object({
  artifact_id: Identifier,
  kind: ArtifactKind,
  version: z.string(),
});

export const UpdateSummary = z.object({
  update_id: Identifier,
  artifact: UpdateArtifactSummary,
  status: UpdateStatus,
  /** Why it paused itself, or was cancelled. */
  reason: z.string().optional(),
  target_type: z.enum(['device', 'site', 'operator', 'all']),
  target_ids: z.array(z.string()),
  install: z.enum(UPDATE_INSTALL_MODES),
  window: z.object({ start: z.string(), end: z.string() }).optional(),
  rollout: z.object({
    batch_size: z.number().int(),
    max_failure_percent: z.number().int(),
    health_seconds: z.number().int(),
    max_site_percent: z.number().int(),
  }),
  created_at: Timestamp,
  updated_at: Timestamp,
  device_count: z.number().int(),
  /** How many chargers are in each state (UpdateDeviceState). */
  progress: z.record(z.string(), z.number().int()),
});
export type UpdateSummary = z.infer<typeof UpdateSummary>;

export const UpdateDevice = z.object({
  device_id: z.string(),
  batch: z.number().int(),
  state: UpdateDeviceState,
  command_id: z.string().optional(),
  version_before: z.string().optional(),
  version_after: z.string().optional(),
  reason: z.string().optional(),
  updated_at: Timestamp,
});
export type UpdateDevice = z.infer<typeof UpdateDevice>;

export const UpdateBatch = z.object({
  index: z.number().int(),
  status: z.enum(UPDATE_BATCH_STATUSES),
  device_count: z.number().int(),
});

export const UpdateView = UpdateSummary.extend({
  batches: z.array(UpdateBatch),
  devices: z.array(UpdateDevice),
});
export type UpdateView = z.infer<typeof UpdateView>;

export const UpdatesQuery = z.strictObject({ status: UpdateStatus.optional(), ...PageQuery });
export type UpdatesQuery = z.infer<typeof UpdatesQuery>;
export const UpdatesPage = pageOf(UpdateSummary);
export const UpdateParamsPath = z.object({ update_id: Identifier });
