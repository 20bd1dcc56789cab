import * as z from 'zod';
import {
  ARTIFACT_MAX_BYTES,
  ARTIFACT_SIGNATURE_HEADER,
  Artifact,
  ArtifactDeleted,
  ArtifactParams,
  ArtifactSignature,
  ArtifactsPage,
  ArtifactsQuery,
  ArtifactUploadQuery,
} from '../../../shared/index.js';
import type { PlatformContext } from '../context.js';
import { type AnyRoute, route } from '../route-spec.js';
import { streamedBody } from '../streamed-body.js';
import { principal, read, write } from './operator-access.js';

const BASE = '/v1/operator/artifacts';
const ONE = `${BASE}/:artifact_id`;

const UploadHeaders = z.object({
  [ARTIFACT_SIGNATURE_HEADER]: ArtifactSignature.describe(
    "The OEM's Ed25519 signature (base64) of the manifest's canonical text; stored as given, verified by the charger",
  ),
});

/** Update artifacts (DESIGN.md §19): an operator's signed files, uploaded streamed and kept in chunks. */
export function operatorArtifactRoutes(ctx: PlatformContext): AnyRoute[] {
  const common = { tag: 'operator', rate: 'operatorControl' } as const;
  return [
    route({
      ...common,
      method: 'POST',
      url: BASE,
      summary: 'Upload an artifact (an agent bundle or a firmware image) with its signature',
      description:
        'The body is the file, streamed (up to 512 MiB). The platform measures its size and sha256 and keeps the ' +
        'signature as given: it holds no OEM key, the charger verifies it. A client acting for several operators names the owner in operator_id. A release (kind, version, target) is uploaded once per operator (409).',
      auth: write,
      streamed: { description: 'The artifact file' },
      bodyLimit: ARTIFACT_MAX_BYTES,
      headers: UploadHeaders,
      query: ArtifactUploadQuery,
      response: Artifact,
      errors: [404, 409],
      handler: async ({ query, request }) => {
        const signature = request.headers[ARTIFACT_SIGNATURE_HEADER];
        const length = request.headers['content-length'];
        return ctx.artifacts.upload(
          principal(request).operatorIds,
          query,
          typeof signature === 'string' ? signature : undefined,
          streamedBody(request),
          length === undefined ? undefined : Number(length),
        );
      },
    }),
    route({
      ...common,
      method: 'GET',
      url: BASE,
      summary: "List the operators' artifacts, newest first",
      description:
        'A page of the artifacts of the client’s operators, optionally of one `kind` (`agent` or `firmware`), ' +
        'each with its manifest.',
      auth: read,
      rate: 'operatorQuery',
      query: ArtifactsQuery,
      response: ArtifactsPage,
      handler: async ({ query, request }) => ctx.artifacts.list(principal(request), query),
    }),
    route({
      ...common,
      method: 'GET',
      url: ONE,
      summary: 'Get an artifact',
      description:
        'Its manifest: `kind`, `version`, `target` (empty: every charger of its kind), `sha256` and `size` as the ' +
        'platform measured them, and the `signature` as uploaded. Another operator’s artifact answers 404 ' +
        '(3001), like a missing one.',
      auth: read,
      rate: 'operatorQuery',
      params: ArtifactParams,
      response: Artifact,
      handler: async ({ params, request }) => ctx.artifacts.get(principal(request), params.artifact_id),
    }),
    route({
      ...common,
      method: 'DELETE',
      url: ONE,
      summary: 'Delete an artifact',
      description: 'Refused (409) while a running or paused update uses it.',
      auth: write,
      params: ArtifactParams,
      response: ArtifactDeleted,
      errors: [409],
      handler: async ({ params, request }) => ctx.artifacts.delete(principal(request), params.artifact_id),
    }),
  ];
}
