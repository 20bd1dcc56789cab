import { ArtifactParams } from '../../../shared/index.js';
import type { PlatformContext } from '../context.js';
import { rangeRequest } from '../range-request.js';
import { type AnyRoute, BinaryResponse, route } from '../route-spec.js';

/** The charger's download of an update's artifact (DESIGN.md §19). */
export function deviceArtifactRoutes(ctx: PlatformContext): AnyRoute[] {
  return [
    route({
      method: 'GET',
      url: '/v1/device/artifacts/:artifact_id',
      summary: 'Download the artifact of an update sent to this charger',
      description:
        'Only a charger that was sent an update of the artifact may download it (else 404). `Range: bytes=N-` ' +
        'answers 206 with the rest of the file, to resume a download cut short; send the ETag (the sha256) as ' +
        '`If-Range` so that a different file is answered whole. Each instance serves at most 64 downloads at ' +
        'once; more are answered 429 with Retry-After.',
      tag: 'device',
      auth: { kind: 'device' },
      rate: 'deviceReporting',
      params: ArtifactParams,
      binary: { description: 'The artifact file', partial: true },
      response: BinaryResponse,
      handler: async ({ params, request }) =>
        ctx.downloads.open(request.device!.deviceId, params.artifact_id, rangeRequest(request)),
    }),
  ];
}
