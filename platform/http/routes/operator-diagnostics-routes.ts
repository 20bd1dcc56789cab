import * as z from 'zod';
import {
  COMMAND_EXPIRY_SECONDS,
  DeviceParams,
  DIAGNOSTICS_DEFAULT_WINDOW_HOURS,
  DIAGNOSTICS_MAX_BYTES,
  DIAGNOSTICS_MAX_WINDOW_DAYS,
  DIAGNOSTICS_RETENTION_DAYS,
  DiagnosticsParams,
  DiagnosticsRequest,
  DiagnosticsRequested,
  DiagnosticsView,
  PageQuery,
  pageOf,
} from '../../../shared/index.js';
import type { PlatformContext } from '../context.js';
import { rangeRequest } from '../range-request.js';
import { type AnyRoute, BinaryResponse, route } from '../route-spec.js';
import { principal, read, write } from './operator-access.js';

const DiagnosticsQuery = z.strictObject({ ...PageQuery });
const DiagnosticsPage = pageOf(DiagnosticsView);

const MIB = DIAGNOSTICS_MAX_BYTES / (1024 * 1024);

/** Diagnostics of one charger (DESIGN.md §20): asking for its archive, following it, downloading it. */
export function operatorDiagnosticsRoutes(ctx: PlatformContext): AnyRoute[] {
  const diagnostics = ctx.diagnostics;

  return [
    route({
      method: 'POST',
      url: '/v1/operator/devices/:device_id/diagnostics',
      summary: 'Ask a charger for its diagnostics archive',
      description:
        'Stores the request (`requested`) and queues an `upload_diagnostics` command (expires after ' +
        `${COMMAND_EXPIRY_SECONDS.upload_diagnostics / 3600} hours) with the window of logs, at most ${MIB} MiB. ` +
        `\`end_time\` defaults to now, \`start_time\` to ${DIAGNOSTICS_DEFAULT_WINDOW_HOURS} hours before it; a ` +
        `window longer than ${DIAGNOSTICS_MAX_WINDOW_DAYS} days, or one ending in the future, answers 400 ` +
        '(1001) naming the field. The charger builds one gzip archive (its logs for the window, `status --json`, ' +
        '`diag --json`, its recent command journal, its configuration without secrets) and uploads it; follow ' +
        'it with GET /v1/operator/diagnostics/{diagnostics_id}. The body may be left out.',
      tag: 'operator',
      auth: write,
      rate: 'operatorControl',
      params: DeviceParams,
      body: DiagnosticsRequest,
      bodyOptional: true,
      response: DiagnosticsRequested,
      handler: async ({ params, body, request }) =>
        diagnostics.request(principal(request), params.device_id, body),
    }),
    route({
      method: 'GET',
      url: '/v1/operator/devices/:device_id/diagnostics',
      summary: 'A charger’s diagnostics requests, newest first',
      description:
        'Every diagnostics request of the charger kept (each for ' +
        `${DIAGNOSTICS_RETENTION_DAYS} days), by creation time then diagnostics_id, both descending. Each item ` +
        'is what GET /v1/operator/diagnostics/{diagnostics_id} answers.',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      params: DeviceParams,
      query: DiagnosticsQuery,
      response: DiagnosticsPage,
      handler: async ({ params, query, request }) =>
        diagnostics.list(principal(request), params.device_id, query),
    }),
    route({
      method: 'GET',
      url: '/v1/operator/diagnostics/:diagnostics_id',
      summary: 'Follow a diagnostics request',
      description:
        '`status`: `requested` (the command is on its way), `uploading` (`size` is what has arrived), ' +
        '`available` (`size` and `sha256` are the archive’s: download it from …/content), or `failed` with ' +
        '`reason` (the charger could not build or send it, its command expired, or the archive was not valid ' +
        `gzip). Kept ${DIAGNOSTICS_RETENTION_DAYS} days after the request (\`expires_at\`).`,
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      params: DiagnosticsParams,
      response: DiagnosticsView,
      handler: async ({ params, request }) => diagnostics.get(principal(request), params.diagnostics_id),
    }),
    route({
      method: 'GET',
      url: '/v1/operator/diagnostics/:diagnostics_id/content',
      summary: 'Download a diagnostics archive',
      description:
        'The gzip’d tar archive, once the request is `available` (409 before, or when it failed). The ETag is ' +
        'its sha256; `Range: bytes=N-` answers 206 with the rest (send the ETag as `If-Range`).',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      params: DiagnosticsParams,
      binary: {
        description: 'The archive (a gzip’d tar)',
        partial: true,
        contentType: 'application/gzip',
        headers: { 'Content-Disposition': { description: 'attachment; filename="DIAGNOSTICS_ID.tar.gz"' } },
      },
      response: BinaryResponse,
      errors: [409],
      handler: async ({ params, request }) =>
        diagnostics.content(principal(request), params.diagnostics_id, rangeRequest(request)),
    }),
  ];
}
