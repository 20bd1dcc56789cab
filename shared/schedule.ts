import * as z from 'zod/mini';
import { SCHEDULE_TIME_SLOTS_MAX } from './limits.js';
import { Identifier, Soc, Timestamp, Timezone } from './primitives.js';

export const DayOfWeek = z.enum(['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun']);
export type DayOfWeek = z.infer<typeof DayOfWeek>;
/** 24-hour HH:MM. */
export const ClockTime = z
  .string()
  .check(z.regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'must be HH:MM (00:00-23:59)'));
export const SlotAction = z.enum(['charge', 'discharge', 'idle']);
export type SlotAction = z.infer<typeof SlotAction>;
export const ScheduleType = z.enum(['once', 'daily', 'weekly']);

export const TimeSlot = z.strictObject({
  day_of_week: z.optional(z.array(DayOfWeek).check(z.minLength(1), z.maxLength(7))),
  start: ClockTime,
  /** Earlier than `start`: the slot crosses midnight. Equal to `start`: the slot lasts 24 hours. */
  end: ClockTime,
  /** kW; absent means only the hardware rating limits the slot. */
  power_limit: z.optional(z.number().check(z.minimum(0), z.maximum(1000))),
  action: z._default(SlotAction, 'charge'),
});
export type TimeSlot = z.infer<typeof TimeSlot>;

export const ChargingSchedule = z
  .strictObject({
    schedule_id: Identifier,
    enabled: z._default(z.boolean(), true),
    type: ScheduleType,
    time_slots: z.array(TimeSlot).check(z.minLength(1), z.maxLength(SCHEDULE_TIME_SLOTS_MAX)),
    target_soc: z.optional(Soc),
    effective_from: z.optional(Timestamp),
    effective_until: z.optional(Timestamp),
    timezone: Timezone,
  })
  .check(
    z.superRefine((s, ctx) => {
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
    }),
  );
export type ChargingSchedule = z.infer<typeof ChargingSchedule>;
