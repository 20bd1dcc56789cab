/**
 * A simulated charger's network link: a thin undici interceptor over the ONE connection pool the whole fleet
 * shares. It costs a closure per charger, not a pool.
 *
 * - Observes every request the agent makes (kind, latency, outcome) for the fleet's stats.
 * - Simulates the charger losing its network: while `out`, requests fail at once as a refused connection
 *   would, and the requests in flight when the outage begins (the long poll) are cut — exactly what the agent's
 *   retry, backoff and outbox paths meet on a real charger whose uplink drops.
 * - Sees the agent's final command reports acknowledged, and measures the command's latency from the moment the
 *   operator issued it (see `issuedAtOf`).
 */
import type { Dispatcher } from 'undici';
import { COMMAND_EXPIRY_SECONDS } from '../../shared/limits.js';
import { SimulatedOutageError } from './failure-classes.js';
import type { ChargerTally, FleetStats } from './fleet-stats.js';
import { type RequestKind, requestKindOf } from './request-kinds.js';

export interface ChargerLinkState extends ChargerTally {
  /** In a simulated network outage. */
  out: boolean;
  /** Requests on their way, so an outage can cut them (created on first use). */
  inflight?: Set<ObservedHandler>;
  /** The command journal of the charger's agent: name, params and expiry of a command it reports on. */
  lookupCommand?: (commandId: string) => { command: string; params: unknown; expiry: string } | undefined;
}

const FINAL_STATUSES = new Set(['succeeded', 'failed', 'rejected']);

/**
 * When the operator issued a command, from what the charger received: single-connector commands expire a fixed
 * time after they were queued (`COMMAND_EXPIRY_SECONDS`); flexibility commands carry their control's
 * `starts_at`, which is when the control was created. Undefined when neither applies. Pure.
 */
export function issuedAtOf(command: {
  command: string;
  params: unknown;
  expiry: string;
}): number | undefined {
  const lifetime = (COMMAND_EXPIRY_SECONDS as Record<string, number | undefined>)[command.command];
  if (lifetime !== undefined) {
    const expiry = Date.parse(command.expiry);
    return Number.isNaN(expiry) ? undefined : expiry - lifetime * 1000;
  }
  const startsAt = (command.params as { starts_at?: unknown } | null)?.starts_at;
  if (typeof startsAt === 'string') {
    const at = Date.parse(startsAt);
    return Number.isNaN(at) ? undefined : at;
  }
  return undefined;
}

/** `commands/{id}/status` → id. */
function commandIdOf(path: string): string | undefined {
  const match = /^\/v1\/device\/commands\/([^/?]+)\/status/.exec(path);
  return match ? decodeURIComponent(match[1]!) : undefined;
}

function reportedStatusOf(body: unknown): string | undefined {
  if (typeof body !== 'string') return undefined;
  try {
    const status = (JSON.parse(body) as { status?: unknown }).status;
    return typeof status === 'string' ? status : undefined;
  } catch {
    return undefined;
  }
}

/** Wraps the agent's handler for one request: passes everything through, and notes how it ended. */
class ObservedHandler implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  private status: number | undefined;
  private done = false;
  /** Handed to the pool (which will call `onRequestStart` once a connection takes it). */
  dispatched = false;
  private cutPending = false;

  constructor(
    private readonly inner: Dispatcher.DispatchHandler,
    private readonly link: ChargerLinkState,
    private readonly stats: FleetStats,
    private readonly kind: RequestKind,
    private readonly startedAt: number,
    private readonly opts: Dispatcher.DispatchOptions,
  ) {}

  /** The outage began: fail this request as a dropped connection would. */
  cut(): void {
    if (this.done) return;
    if (this.controller) this.controller.abort(new SimulatedOutageError());
    // Queued in the pool: fail it the moment a connection picks it up (undici owns it until then).
    else if (this.dispatched) this.cutPending = true;
    else this.onResponseError(undefined, new SimulatedOutageError());
  }

  private finish(): void {
    this.done = true;
    this.link.inflight?.delete(this);
  }

  onRequestStart(controller: Dispatcher.DispatchController, context: unknown): void {
    this.controller = controller;
    this.inner.onRequestStart?.(controller, context);
    if (this.cutPending) controller.abort(new SimulatedOutageError());
  }

  onRequestUpgrade(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Parameters<NonNullable<Dispatcher.DispatchHandler['onRequestUpgrade']>>[2],
    socket: Parameters<NonNullable<Dispatcher.DispatchHandler['onRequestUpgrade']>>[3],
  ): void {
    this.inner.onRequestUpgrade?.(controller, statusCode, headers, socket);
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Parameters<NonNullable<Dispatcher.DispatchHandler['onResponseStart']>>[2],
    statusMessage?: string,
  ): void {
    this.status = statusCode;
    this.inner.onResponseStart?.(controller, statusCode, headers, statusMessage);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.inner.onResponseData?.(controller, chunk);
  }

  onResponseEnd(
    controller: Dispatcher.DispatchController,
    trailers: Parameters<NonNullable<Dispatcher.DispatchHandler['onResponseEnd']>>[1],
  ): void {
    if (!this.done) {
      this.finish();
      const endedAt = Date.now();
      const status = this.status ?? 0;
      if (status >= 200 && status < 300) {
        this.stats.requestSucceeded(this.link, this.kind, this.startedAt, endedAt);
        if (this.kind === 'command_status') this.noteCommandReport(endedAt);
      } else {
        this.stats.requestFailed(this.link, this.kind, { status }, this.link.out);
      }
    }
    this.inner.onResponseEnd?.(controller, trailers);
  }

  onResponseError(controller: Dispatcher.DispatchController | undefined, error: Error): void {
    if (!this.done) {
      this.finish();
      this.stats.requestFailed(this.link, this.kind, { error }, this.link.out);
    }
    // Without a controller (cut before the request started), the agent's handler only needs the error.
    this.inner.onResponseError?.(controller ?? DETACHED_CONTROLLER, error);
  }

  private noteCommandReport(endedAt: number): void {
    const status = reportedStatusOf(this.opts.body);
    if (!status || !FINAL_STATUSES.has(status)) return;
    const commandId = commandIdOf(this.opts.path);
    const command = commandId ? this.link.lookupCommand?.(commandId) : undefined;
    if (!command) return;
    const issuedAt = issuedAtOf(command);
    this.stats.commandFinished(
      command.command,
      status,
      issuedAt === undefined ? undefined : endedAt - issuedAt,
    );
  }
}

const DETACHED_CONTROLLER: Dispatcher.DispatchController = {
  aborted: true,
  paused: false,
  reason: null,
  abort: () => undefined,
  pause: () => undefined,
  resume: () => undefined,
};

/** Artifact downloads (DESIGN.md §19). */
const ARTIFACT_PATH = '/v1/device/artifacts/';

export interface ChargerLink {
  dispatcher: Dispatcher;
  /** Begin or end the simulated outage; beginning it cuts the requests in flight. */
  setOut(out: boolean): void;
}

/**
 * The dispatcher one simulated charger's agent uses: the shared pool, observed and breakable. Long polls go to
 * the charger's own connection from `pollConnection` (asked once, at the first poll: a poll holds its connection
 * for its whole wait, as on a real charger), and so do artifact downloads, on a second one (a download holds its
 * connection for the whole transfer: in the shared pool, a batch of downloads starved every other charger's
 * requests); everything else to `shared`.
 */
export function createChargerLink(
  shared: Dispatcher,
  pollConnection: () => Dispatcher,
  link: ChargerLinkState,
  stats: FleetStats,
): ChargerLink {
  let polls: Dispatcher | undefined;
  let downloads: Dispatcher | undefined;
  const dispatcher = shared.compose((dispatch) => (opts, handler) => {
    const kind = requestKindOf(opts.method, opts.path);
    const observed = new ObservedHandler(handler, link, stats, kind, Date.now(), opts);
    if (link.out) {
      // A dead link refuses at once; the answer arrives asynchronously, as a real one would.
      setImmediate(() => observed.cut());
      return true;
    }
    link.inflight ??= new Set();
    link.inflight.add(observed);
    observed.dispatched = true;
    if (kind === 'poll') {
      polls ??= pollConnection();
      return polls.dispatch(opts, observed);
    }
    if (opts.method === 'GET' && opts.path.startsWith(ARTIFACT_PATH)) {
      downloads ??= pollConnection();
      return downloads.dispatch(opts, observed);
    }
    return dispatch(opts, observed);
  });
  return {
    dispatcher,
    setOut(out) {
      if (link.out === out) return;
      link.out = out;
      if (out && link.inflight) for (const request of [...link.inflight]) request.cut();
    },
  };
}
