import type { Readable } from 'node:stream';
import {
  DIAGNOSTICS_MAX_BYTES,
  DIAGNOSTICS_RETENTION_DAYS,
  type DiagnosticsRequest,
  type DiagnosticsView,
  toTimestamp,
} from '../../shared/index.js';
import { errors } from '../domain/api-error.js';
import { diagnosticsFailedBy, diagnosticsWindow } from '../domain/diagnostics.js';
import { newId } from '../domain/ids.js';
import { commandExpiryMs } from '../domain/operator-commands.js';
import type { CommandRow, DiagnosticsRow, Page, Store } from '../storage/store.js';
import { chunkedFile, chunkStream, downloadHeaders, downloadRange } from './chunked-download.js';
import type { CommandService } from './command-service.js';
import type { OperatorPrincipal } from './principal.js';
import type { Tenancy } from './tenancy.js';
import { createTickBudget } from './tick-budget.js';

/** The size of an archive's chunks as the platform stores them now (each record keeps its own). */
export const DIAGNOSTICS_CHUNK_BYTES = 256 * 1024;
/** Chunks read and handed to sockets per turn of the event loop, across every archive download. */
const CHUNKS_PER_TICK = 4;
const DAY_MS = 86_400_000;

export interface DiagnosticsServiceDeps {
  store: Pick<Store, 'getDiagnostics' | 'listDeviceDiagnostics' | 'readDiagnosticsChunks'>;
  tenancy: Tenancy;
  /** The request's command is queued through it: it wakes the charger's long poll and publishes the event. */
  commands: CommandService;
  now: () => number;
}

export interface DiagnosticsDownload {
  status: 200 | 206;
  headers: Record<string, string>;
  body: Readable;
}

export function diagnosticsView(row: DiagnosticsRow): DiagnosticsView {
  const view: DiagnosticsView = {
    diagnostics_id: row.diagnostics_id,
    device_id: row.device_id,
    command_id: row.command_id,
    status: row.status,
    start_time: toTimestamp(row.start_ms),
    end_time: toTimestamp(row.end_ms),
    size: row.status === 'available' ? (row.size ?? row.received) : row.received,
    sha256: row.sha256,
    created_at: toTimestamp(row.created_ms),
    updated_at: toTimestamp(row.updated_ms),
    expires_at: toTimestamp(row.created_ms + DIAGNOSTICS_RETENTION_DAYS * DAY_MS),
  };
  if (row.reason !== null) view.reason = row.reason;
  return view;
}

/** An archive's stored chunks, as a download reads them. */
const archiveChunks = (
  store: Pick<Store, 'readDiagnosticsChunks'>,
  row: { diagnostics_id: string; chunk_bytes: number },
) =>
  chunkedFile(`diagnostics ${row.diagnostics_id}`, row.chunk_bytes, (first, last) =>
    store.readDiagnosticsChunks(row.diagnostics_id, first, last),
  );

/**
 * What an `upload_diagnostics` command's change does to its request: a command that failed, was rejected,
 * expired or was cancelled fails the request with its reason, unless the archive is available already.
 */
export function failDiagnosticsWithCommand(store: Pick<Store, 'failDiagnostics'>) {
  return async (command: CommandRow, atMs: number): Promise<void> => {
    const failed = diagnosticsFailedBy(command);
    if (failed) await store.failDiagnostics(failed.diagnosticsId, failed.reason, atMs);
  };
}

/**
 * Diagnostics on the operator's side (DESIGN.md §20): asking a charger for its archive, following the request,
 * listing a charger's requests and downloading an archive. Tenancy answers another tenant's charger or request
 * like a missing one (404).
 */
export function createDiagnosticsService(deps: DiagnosticsServiceDeps) {
  const { store, tenancy, commands } = deps;
  const turn = createTickBudget(CHUNKS_PER_TICK);

  /** A request the actor may see; another tenant's answers like a missing one. */
  async function visible(actor: OperatorPrincipal, diagnosticsId: string): Promise<DiagnosticsRow> {
    const row = await store.getDiagnostics(diagnosticsId);
    if (!row) throw errors.notFound('Diagnostics');
    await tenancy.device(actor, row.device_id).catch(() => {
      throw errors.notFound('Diagnostics');
    });
    return row;
  }

  return {
    /** Stores the request and queues `upload_diagnostics` for the charger, in one step. */
    async request(actor: OperatorPrincipal, deviceId: string, body: DiagnosticsRequest) {
      const device = await tenancy.device(actor, deviceId);
      const t = deps.now();
      const window = diagnosticsWindow(body, t);
      if ('refusal' in window) throw errors.validation(window.refusal);
      const diagnosticsId = newId('diag');
      const command = await commands.requestDiagnostics(
        {
          diagnostics_id: diagnosticsId,
          device_id: device.device_id,
          client_id: actor.clientId,
          start_ms: window.startMs,
          end_ms: window.endMs,
          chunk_bytes: DIAGNOSTICS_CHUNK_BYTES,
          created_ms: t,
        },
        {
          device_id: device.device_id,
          command: 'upload_diagnostics',
          params: {
            diagnostics_id: diagnosticsId,
            start_time: toTimestamp(window.startMs),
            end_time: toTimestamp(window.endMs),
            max_bytes: DIAGNOSTICS_MAX_BYTES,
          },
          expiry_ms: commandExpiryMs('upload_diagnostics', t),
          client_id: actor.clientId,
        },
      );
      return { diagnostics_id: diagnosticsId, command_id: command.command_id, status: 'requested' as const };
    },
    async get(actor: OperatorPrincipal, diagnosticsId: string): Promise<DiagnosticsView> {
      return diagnosticsView(await visible(actor, diagnosticsId));
    },
    async list(
      actor: OperatorPrincipal,
      deviceId: string,
      query: { page: number; size: number },
    ): Promise<Page<DiagnosticsView>> {
      const device = await tenancy.device(actor, deviceId);
      const page = await store.listDeviceDiagnostics(device.device_id, query.page, query.size);
      return { ...page, items: page.items.map(diagnosticsView) };
    },
    /**
     * The archive, streamed from its chunks (one at a time, as the client takes them), whole or the range
     * asked; only once it is available (409 before, or after it failed).
     */
    async content(
      actor: OperatorPrincipal,
      diagnosticsId: string,
      request: { range?: string | undefined; ifRange?: string | undefined },
    ): Promise<DiagnosticsDownload> {
      const row = await visible(actor, diagnosticsId);
      if (row.status !== 'available' || row.size === null || row.sha256 === null) {
        throw errors.conflict(
          row.status === 'failed'
            ? `These diagnostics failed (${row.reason ?? 'no reason given'}): there is no archive to download`
            : `These diagnostics are ${row.status}: the archive can be downloaded once they are available`,
        );
      }
      const etag = `"${row.sha256}"`;
      const range = downloadRange(request, row.size, etag);
      const body = chunkStream(archiveChunks(store, row), range, { turn, lastRead: () => undefined });
      const headers = {
        ...downloadHeaders(range, { size: row.size, etag, contentType: 'application/gzip' }),
        'content-disposition': `attachment; filename="${row.diagnostics_id}.tar.gz"`,
      };
      return { status: range.partial ? 206 : 200, headers, body };
    },
  };
}
export type DiagnosticsService = ReturnType<typeof createDiagnosticsService>;
