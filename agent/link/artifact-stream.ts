import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { PlatformError } from './platform-errors.js';

/**
 * One artifact download's answer for the platform client (platform-client.ts `downloadArtifact`), on undici's
 * dispatch interface like answer-collector.ts, but streamed: an artifact may be 512 MiB and a charger's memory is
 * small. A 2xx hands its body over as a Readable, paced by its reader (undici pauses while the reader is behind);
 * any other status gathers its small body (an error envelope) for the caller to classify.
 *
 * undici's `headersTimeout` and `bodyTimeout` bound the wait for the headers and each pause in the body; there is
 * no deadline for the whole answer, which may rightly take an hour on a slow link.
 */
export type ArtifactAnswer =
  | { ok: true; status: number; headers: Record<string, string | string[] | undefined>; body: Readable }
  | { ok: false; status: number; headers: Record<string, string | string[] | undefined>; body: unknown };

/** What is read of a refusal's body: an error envelope is a few hundred bytes. */
const REFUSAL_MAX_BYTES = 64 * 1024;

export class ArtifactStream implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  private body: Readable | undefined;
  private refusal: { status: number; headers: Record<string, string | string[] | undefined> } | undefined;
  private readonly refusalChunks: Buffer[] = [];
  private settled = false;
  private abortPending: Error | undefined;
  private readonly onAbort: (() => void) | undefined;

  constructor(
    private readonly what: string,
    private readonly signal: AbortSignal | undefined,
    private readonly resolve: (answer: ArtifactAnswer) => void,
    private readonly reject: (error: PlatformError) => void,
  ) {
    if (signal) {
      this.onAbort = () => this.abort(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      if (signal.aborted) this.onAbort();
      else signal.addEventListener('abort', this.onAbort, { once: true });
    }
  }

  private abort(reason: Error): void {
    if (this.controller) {
      this.controller.abort(reason);
      return;
    }
    this.abortPending = reason;
    this.onResponseError(undefined, reason);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.abortPending) controller.abort(this.abortPending);
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    if (statusCode < 200 || statusCode > 299) {
      this.refusal = { status: statusCode, headers };
      return;
    }
    this.body = new Readable({
      // The reader wants more: let undici read on.
      read: () => controller.resume(),
      destroy: (error, callback) => {
        // The reader gave up (a full disk, a shutdown): drop the connection rather than read the rest.
        if (!this.settled) controller.abort(error ?? new Error('download abandoned by its reader'));
        callback(error);
      },
    });
    this.resolve({ ok: true, status: statusCode, headers, body: this.body });
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.body) {
      if (!this.body.push(chunk)) controller.pause();
      return;
    }
    const held = this.refusalChunks.reduce((n, c) => n + c.length, 0);
    if (held + chunk.length <= REFUSAL_MAX_BYTES) this.refusalChunks.push(chunk);
  }

  onResponseEnd(): void {
    if (!this.finish()) return;
    if (this.body) {
      this.body.push(null);
      return;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(Buffer.concat(this.refusalChunks).toString('utf8'));
    } catch {
      parsed = undefined;
    }
    const { status, headers } = this.refusal ?? { status: 0, headers: {} };
    this.resolve({ ok: false, status, headers, body: parsed });
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    if (!this.finish()) return;
    const failure = new PlatformError('network', `${this.what}: ${error.message}`, { cause: error });
    if (this.body) this.body.destroy(failure);
    else this.reject(failure);
  }

  private finish(): boolean {
    if (this.settled) return false;
    this.settled = true;
    if (this.onAbort) this.signal?.removeEventListener('abort', this.onAbort);
    return true;
  }
}
