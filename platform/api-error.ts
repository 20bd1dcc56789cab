import { ERROR_HTTP_STATUS, ErrorCode, type ErrorResponse, type ValidationFailure } from '../shared/index.js';

/** An error that answers with the spec's ErrorResponse. Anything else thrown answers 500/9001. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    opts: { status?: number; details?: Record<string, unknown>; headers?: Record<string, string> } = {},
  ) {
    super(message);
    this.code = code;
    this.status = opts.status ?? ERROR_HTTP_STATUS[code];
    this.details = opts.details;
    this.headers = opts.headers;
  }

  toBody(): ErrorResponse {
    return this.details
      ? { code: this.code, message: this.message, details: this.details }
      : { code: this.code, message: this.message };
  }
}

export const errors = {
  validation: (f: ValidationFailure) =>
    new ApiError(ErrorCode.VALIDATION, `Invalid parameter ${f.field}: ${f.message}`, {
      details: { field: f.field, value: f.value },
    }),
  unauthorized: (message = 'Missing or invalid credentials') => new ApiError(ErrorCode.UNAUTHORIZED, message),
  tokenExpired: () => new ApiError(ErrorCode.TOKEN_EXPIRED, 'Access token expired'),
  forbidden: (message: string) => new ApiError(ErrorCode.FORBIDDEN, message),
  notFound: (what: string) => new ApiError(ErrorCode.NOT_FOUND, `${what} not found`),
  conflict: (message: string) => new ApiError(ErrorCode.CONFLICT, message),
};
