import * as z from 'zod';
import { DIAGNOSTICS_MAX_BYTES, DiagnosticsParams, DiagnosticsUploadState } from '../../../shared/index.js';
import type { PlatformContext } from '../context.js';
import { type AnyRoute, route } from '../route-spec.js';
import { streamedBody } from '../streamed-body.js';

const UploadHeaders = z.object({
  'content-range': z
    .string()
    .describe(
      '`bytes FIRST-LAST/SIZE`: the part of the archive in the body; FIRST is what the platform holds, SIZE the ' +
        'whole archive',
    ),
});

/** The charger's side of diagnostics (DESIGN.md §20): how much of its archive the platform holds, and the upload. */
export function deviceDiagnosticsRoutes(ctx: PlatformContext): AnyRoute[] {
  const uploads = ctx.diagnosticsUploads;
  return [
    route({
      method: 'GET',
      url: '/v1/device/diagnostics/:diagnostics_id',
      summary: 'How much of a diagnostics archive the platform holds',
      description:
        'Only for the charger the request is for (else 404). `received` is where an upload goes on after a cut ' +
        '(`Content-Range: bytes RECEIVED-LAST/SIZE`); `size` is the size declared by the first upload, null ' +
        'before it.',
      tag: 'device',
      auth: { kind: 'device' },
      rate: 'deviceReporting',
      params: DiagnosticsParams,
      response: DiagnosticsUploadState,
      handler: async ({ params, request }) => uploads.state(request.device!.deviceId, params.diagnostics_id),
    }),
    route({
      method: 'PUT',
      url: '/v1/device/diagnostics/:diagnostics_id',
      summary: 'Upload a diagnostics archive, or the rest of it',
      description:
        'The body is bytes FIRST to LAST of the gzip’d tar archive (`application/octet-stream`), streamed; ' +
        `SIZE at most ${DIAGNOSTICS_MAX_BYTES} bytes (else 413) and the same on every request. FIRST must be ` +
        'what the platform holds (GET), else 409 with the current state in `details`. The platform stores the ' +
        'bytes as they arrive: a request cut short keeps every 256 KiB chunk it completed, and `received` says ' +
        'where to go on. Once it holds SIZE bytes it checks the archive (sha256, a valid gzip) and answers the ' +
        'final state: `available`, or `failed` (the operator’s view says why). A request already `available` or ' +
        '`failed` answers 409.',
      tag: 'device',
      auth: { kind: 'device' },
      rate: 'deviceReporting',
      params: DiagnosticsParams,
      headers: UploadHeaders,
      streamed: { description: 'Bytes FIRST to LAST of the archive' },
      response: DiagnosticsUploadState,
      errors: [409],
      handler: async ({ params, request }) => {
        const length = request.headers['content-length'];
        return uploads.upload(
          request.device!.deviceId,
          params.diagnostics_id,
          { contentRange: request.headers['content-range'], contentLength: length },
          streamedBody(request),
        );
      },
    }),
  ];
}
