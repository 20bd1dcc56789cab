import * as z from 'zod';
import {
  ARTIFACT_KINDS,
  ARTIFACT_MAX_BYTES,
  ARTIFACT_NAME,
  ARTIFACT_SIGNATURE,
  SHA256_HEX,
} from './artifact-manifest.js';
import { Identifier, PageQuery, pageOf, Timestamp } from './primitives.js';

/** Update artifacts on the operator API (DESIGN.md §19). */
export const ArtifactKind = z.enum(ARTIFACT_KINDS);
export type ArtifactKind = z.infer<typeof ArtifactKind>;
export const ArtifactVersion = z
  .string()
  .regex(ARTIFACT_NAME, 'letters, digits and . _ + -, starting with a letter or digit, at most 64');
export const ArtifactTarget = z
  .string()
  .regex(ARTIFACT_NAME, 'letters, digits and . _ + -, starting with a letter or digit, at most 64');
export const ArtifactSignature = z
  .string()
  .regex(ARTIFACT_SIGNATURE, 'an Ed25519 signature in base64 (88 characters)');

/** `POST /v1/operator/artifacts?kind=&version=&target=`; the body is the file (application/octet-stream). */
export const ArtifactUploadQuery = z.strictObject({
  kind: ArtifactKind,
  version: ArtifactVersion,
  target: z.optional(ArtifactTarget),
  /** The owning operator; needed only when the client acts for several. */
  operator_id: z.optional(Identifier),
});
export type ArtifactUploadQuery = z.infer<typeof ArtifactUploadQuery>;

export const Artifact = z.object({
  artifact_id: Identifier,
  kind: ArtifactKind,
  version: ArtifactVersion,
  /** Empty: every charger of its kind. */
  target: z.string(),
  sha256: z.string().regex(SHA256_HEX),
  size: z.number().int().min(1).max(ARTIFACT_MAX_BYTES),
  signature: ArtifactSignature,
  created_at: Timestamp,
});
export type Artifact = z.infer<typeof Artifact>;

export const ArtifactsQuery = z.strictObject({ kind: z.optional(ArtifactKind), ...PageQuery });
export type ArtifactsQuery = z.infer<typeof ArtifactsQuery>;
export const ArtifactsPage = pageOf(Artifact);
export const ArtifactParams = z.object({ artifact_id: Identifier });
export const ArtifactDeleted = z.object({ artifact_id: Identifier, deleted: z.literal(true) });
