/** Application error codes (spec "Errors", meanings and statuses decided in DESIGN.md §4). */
export const ErrorCode = {
  VALIDATION: 1001,
  MALFORMED_BODY: 1002,
  UNAUTHORIZED: 2001,
  TOKEN_EXPIRED: 2002,
  FORBIDDEN: 2003,
  NOT_FOUND: 3001,
  CONFLICT: 4001,
  RATE_LIMITED: 5001,
  INTERNAL: 9001,
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Default HTTP status of each code; 1002 answers 415 for a wrong content type and 413 for a body too large. */
export const ERROR_HTTP_STATUS: Record<ErrorCode, number> = {
  1001: 400,
  1002: 400,
  2001: 401,
  2002: 401,
  2003: 403,
  3001: 404,
  4001: 409,
  5001: 429,
  9001: 500,
};

export const RATE_LIMIT_MESSAGE = 'Too many requests';
