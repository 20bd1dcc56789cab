import {
  ERROR_HTTP_STATUS,
  ErrorCode,
  type ErrorResponse,
  type OAuthErrorCode,
  type OAuthErrorResponse,
  type ValidationFailure,
} from '../../shared/index.js';

/** RFC 6749 §5.2: `error_description` is limited to printable ASCII without `"` and `\`. */
function rfc6749Text(message: string): string {
  return message
    .replace(/"/g, "'")
    .replace(/\\/g, '/')
    .replace(/[^\x20-\x7e]/g, '?');
}

/** An error that answers with the spec's ErrorResponse. Anything else thrown answers 500/9001. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;
  readonly headers: Record<string, string> | undefined;
  /** RFC 6749 §5.2 `error`, added to the body with `error_description` (the token endpoint's errors only). */
  readonly oauth: OAuthErrorCode | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    opts: {
      status?: number;
      details?: Record<string, unknown>;
      headers?: Record<string, string>;
      oauth?: OAuthErrorCode;
    } = {},
  ) {
    super(message);
    this.code = code;
    this.status = opts.status ?? ERROR_HTTP_STATUS[code];
    this.details = opts.details;
    this.headers = opts.headers;
    this.oauth = opts.oauth;
  }

  toBody(): ErrorResponse | OAuthErrorResponse {
    const body: ErrorResponse = this.details
      ? { code: this.code, message: this.message, details: this.details }
      : { code: this.code, message: this.message };
    return this.oauth ? { ...body, error: this.oauth, error_description: rfc6749Text(this.message) } : body;
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
