import * as z from 'zod/mini';

/** Success envelope: `code` 0, `message` "success", endpoint-specific `data`. */
export function envelopeOf<T extends z.core.SomeType>(data: T) {
  return z.object({ code: z.literal(0), message: z.string(), data });
}

export const ErrorResponse = z.object({
  code: z.int().check(z.refine((c) => c !== 0, 'error codes are non-zero')),
  message: z.string(),
  details: z.optional(z.record(z.string(), z.unknown())),
});
export type ErrorResponse = z.infer<typeof ErrorResponse>;

/** RFC 6749 §5.2 error codes the operator token endpoint answers with (DESIGN.md §15). */
export const OAuthErrorCode = z.enum([
  'invalid_request',
  'invalid_client',
  'unsupported_grant_type',
  'invalid_scope',
]);
export type OAuthErrorCode = z.infer<typeof OAuthErrorCode>;

/**
 * The token endpoint's 4xx answers: the ErrorResponse, plus RFC 6749 §5.2's `error` and `error_description`
 * (the message, in RFC 6749's character set), so that OAuth client libraries read them.
 */
export const OAuthErrorResponse = z.extend(ErrorResponse, {
  error: OAuthErrorCode,
  error_description: z.string(),
});
export type OAuthErrorResponse = z.infer<typeof OAuthErrorResponse>;

export interface Envelope<T> {
  code: 0;
  message: 'success';
  data: T;
}

export function ok<T>(data: T): Envelope<T> {
  return { code: 0, message: 'success', data };
}
