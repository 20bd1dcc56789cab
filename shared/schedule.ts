import * as z from 'zod';
import { SCHEDULE_TIME_SLOTS_MAX } from './limits.js';
import { Identifier, Soc, Timestamp, Timezone } from './primitives.js';

export const DayOfWeek = z.enum(['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun']);
export type DayOfWeek = z.infer<typeof DayOfWeek>;
/** 24-hour HH:MM. */
export const ClockTime = z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'must be HH:MM (00:00-23:59)');
export const SlotAction = z.enum(['charge', 'discharge', 'idle']);
export type SlotAction = z.infer<typeof SlotAction>;
export const ScheduleType = z.enum(['once', 'daily', 'weekly']);

export const TimeSlot = z.strictObject({
  day_of_week: z.array(DayOfWeek).min(1).max(7).optional(),
  start: ClockTime,
  /** Earlier than `start`: the slot crosses midnight. Equal to `start`: the slot lasts 24 hours. */
  end: ClockTime,
  /** kW; absent means only the hardware rating limits the slot. */
  power_limit: z.number().min(0).max(1000).optional(),
  action: SlotAction.default('charge'),
});
export type TimeSlot = z.infer<typeof TimeSlot>;

export const ChargingSchedule = z
  .strictObject({
    schedule_id: Identifier,
    enabled: z.boolean().default(true),
    type: ScheduleType,
    time_slots: z.array(TimeSlot).min(1).max(SCHEDULE_TIME_SLOTS_MAX),
    target_soc: Soc.optional(),
    effective_from: Timestamp.optional(),
    effective_until: Timestamp.optional(),
    timezone: Timezone,
  })
  .superRefine((s, ctx) => {
    if (
      s.effective_from &&
      s.effective_until &&
      Date.parse(s.effective_until) <= Date.parse(s.effective_from)
    ) {
      ctx.addIssue({
        code: 'custom',
        path: ['effective_until'],
        message: 'must be later than effective_from',
      });
    }
    if (s.type === 'weekly') {
      s.time_slots.forEach((slot, i) => {
        if (!slot.day_of_week) {
          ctx.addIssue({
            code: 'custom',
            path: ['time_slots', i, 'day_of_week'],
            message: 'weekly schedules need day_of_week on every slot',
          });
        }
      });
    }
  });
export type ChargingSchedule = z.infer<typeof ChargingSchedule>;
