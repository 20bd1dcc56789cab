import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { PlatformError } from './platform-errors.js';

/**
 * Reading one answer of the platform for the client (platform-client.ts): the body gathered as bytes, capped at
 * `ANSWER_MAX_BYTES`, bounded by the request's deadline and its caller's signal.
 */
export interface Call {
  method: 'GET' | 'POST' | 'PUT';
  path: string;
  body?: unknown;
  /**
   * A body sent as it is instead of JSON (a file upload): `open` gives a fresh stream for each attempt (a retry
   * after a renewed token cannot reuse a consumed one), `headers` go with it.
   */
  raw?: { open: () => Readable; headers: Record<string, string> };
  token?: string;
  signal?: AbortSignal;
  timeoutMs?: number;
}

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

/**
 * The most the agent reads of any answer (DESIGN.md §18). The platform's largest (a heartbeat or long poll with
 * its commands, schedules included) is a few tens of KiB; whatever sends more is not the platform speaking, and
 * a charger's memory is small.
 */
export const ANSWER_MAX_BYTES = 1024 * 1024;

/** An answer past `ANSWER_MAX_BYTES`: the request fails (retryable, as any malformed answer), its connection dropped. */
class AnswerTooLarge extends Error {
  constructor(readonly declared: number | undefined) {
    super(
      declared !== undefined
        ? `answer of ${declared} bytes declared, above the ${ANSWER_MAX_BYTES}-byte limit; connection dropped`
        : `answer above the ${ANSWER_MAX_BYTES}-byte limit; connection dropped`,
    );
    this.name = 'AnswerTooLarge';
  }
}

/**
 * Collects one answer for `send`, on undici's dispatch interface: the body gathered as bytes, with no stream,
 * abort controller or event listener per request (a charger's CPU is small; a fleet simulator runs thousands).
 *
 * undici's timeouts bound the wait for the headers and each pause in the body, not the answer: one that trickles
 * in a byte at a time would hold this request, and the loop behind it, for ever. The deadline does. The
 * caller's signal (a long poll given up) aborts it too. Either way the request fails as a network error.
 */
export class AnswerCollector implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  private status = 0;
  private headers: Record<string, string | string[] | undefined> = {};
  private readonly chunks: Buffer[] = [];
  private received = 0;
  private started = false;
  private settled = false;
  /** Why the request was given up before undici handed over its controller. */
  private abortPending: Error | undefined;
  private readonly timer: ReturnType<typeof setTimeout>;
  private readonly onAbort: (() => void) | undefined;

  constructor(
    private readonly call: Call,
    limit: number,
    private readonly resolve: (res: RawResponse) => void,
    private readonly reject: (error: PlatformError) => void,
  ) {
    this.timer = setTimeout(() => this.abort(new Error(`no complete answer within ${limit} ms`)), limit);
    const signal = call.signal;
    if (signal) {
      this.onAbort = () => this.abort(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      if (signal.aborted) this.onAbort();
      else signal.addEventListener('abort', this.onAbort, { once: true });
    }
  }

  private abort(reason: Error): void {
    if (this.settled) return;
    if (this.controller) {
      this.controller.abort(reason);
      return;
    }
    // Still waiting for a connection: give up now; undici aborts it if a connection ever takes it.
    this.abortPending = reason;
    this.onResponseError(undefined, reason);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.abortPending) controller.abort(this.abortPending);
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    this.started = true;
    this.status = statusCode;
    this.headers = headers;
    // Refused before a byte of the body is read when the answer says how long it is.
    const declared = Number(headers['content-length']);
    if (Number.isFinite(declared) && declared > ANSWER_MAX_BYTES) this.abort(new AnswerTooLarge(declared));
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.settled) return;
    this.received += chunk.length;
    if (this.received > ANSWER_MAX_BYTES) {
      // Aborting the request destroys its connection: nothing more of this answer is read.
      this.chunks.length = 0;
      this.abort(new AnswerTooLarge(undefined));
      return;
    }
    this.chunks.push(chunk);
  }

  onResponseEnd(): void {
    if (!this.finish()) return;
    const text =
      this.chunks.length === 1
        ? this.chunks[0]!.toString('utf8')
        : Buffer.concat(this.chunks).toString('utf8');
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    this.resolve({ status: this.status, headers: this.headers, body: parsed });
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    if (!this.finish()) return;
    const { method, path } = this.call;
    if (error instanceof AnswerTooLarge) {
      this.reject(
        new PlatformError('malformed', `${method} ${path}: ${error.message}`, {
          status: this.status,
          cause: error,
        }),
      );
      return;
    }
    const what = this.started
      ? `reading the answer failed: ${describeNetworkError(error)}`
      : describeNetworkError(error);
    this.reject(new PlatformError('network', `${method} ${path}: ${what}`, { cause: error }));
  }

  /** True the first time: the request ends once, whichever way. */
  private finish(): boolean {
    if (this.settled) return false;
    this.settled = true;
    clearTimeout(this.timer);
    if (this.onAbort) this.call.signal?.removeEventListener('abort', this.onAbort);
    return true;
  }
}

function describeNetworkError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return `${typeof code === 'string' ? `${code} ` : ''}${error.message}${cause}`;
}
