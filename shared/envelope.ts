import { z } from 'zod';

/** Success envelope: `code` 0, `message` "success", endpoint-specific `data`. */
export function envelopeOf<T extends z.ZodType>(data: T) {
  return z.object({ code: z.literal(0), message: z.string(), data });
}

export const ErrorResponse = z.object({
  code: z
    .number()
    .int()
    .refine((c) => c !== 0, 'error codes are non-zero'),
  message: z.string(),
  details: z.record(z.string(), z.unknown()).optional(),
});
export type ErrorResponse = z.infer<typeof ErrorResponse>;

export interface Envelope<T> {
  code: 0;
  message: 'success';
  data: T;
}

export function ok<T>(data: T): Envelope<T> {
  return { code: 0, message: 'success', data };
}
