import type { ArtifactKind } from '../../shared/index.js';
import type { Page } from './page.js';

/**
 * Update artifacts (DESIGN.md §19): an operator's files, stored in the database in chunks of the artifact's
 * `chunk_bytes` (both backends), so that every instance serves every artifact and a range read touches
 * only its chunks. An upload is written chunk by chunk while it arrives and becomes visible only once finished.
 */
export interface ArtifactRow {
  artifact_id: string;
  operator_id: string;
  kind: ArtifactKind;
  version: string;
  /** Empty: every charger of its kind. */
  target: string;
  /** Lowercase hex; empty while uploading. */
  sha256: string;
  /** Bytes; 0 while uploading. */
  size: number;
  /** The OEM's Ed25519 signature of the manifest, base64 (shared/artifact-manifest.ts). */
  signature: string;
  status: 'uploading' | 'ready';
  /** The size of its chunks (every one but the last): ARTIFACT_CHUNK_BYTES when it was stored. */
  chunk_bytes: number;
  created_ms: number;
}

export type NewArtifact = Pick<
  ArtifactRow,
  'artifact_id' | 'operator_id' | 'kind' | 'version' | 'target' | 'signature' | 'chunk_bytes' | 'created_ms'
>;

export interface ArtifactRepository {
  /**
   * Starts an upload: a row in `uploading` that no listing or read shows. `'duplicate'` when the operator already
   * has a ready or uploading artifact of this kind, version and target (a release is uploaded once).
   */
  beginArtifact(row: NewArtifact): Promise<'ok' | 'duplicate'>;
  /** Stores chunk `index` (0-based) of an uploading artifact; every chunk but the last is `chunk_bytes`. */
  putArtifactChunk(artifactId: string, index: number, data: Buffer): Promise<void>;
  /** Marks the upload ready with what the platform measured; undefined when it is gone (deleted meanwhile). */
  finishArtifact(
    artifactId: string,
    measured: { sha256: string; size: number },
  ): Promise<ArtifactRow | undefined>;
  /** Removes the artifact and its chunks, whatever its state (a failed upload, or a deletion); false when absent. */
  deleteArtifact(artifactId: string): Promise<boolean>;
  /** A ready artifact, only if it belongs to one of these operators (tenancy). */
  getArtifactForOperators(
    artifactId: string,
    operatorIds: readonly string[],
  ): Promise<ArtifactRow | undefined>;
  /** A ready artifact, whoever owns it (the charger download checks its update instead). */
  getArtifact(artifactId: string): Promise<ArtifactRow | undefined>;
  /** Ready artifacts of these operators, newest first (created, then id, descending). */
  listArtifacts(
    operatorIds: readonly string[],
    query: { kind?: ArtifactKind | undefined; page: number; size: number },
  ): Promise<Page<ArtifactRow>>;
  /** Chunks `first` to `last` (inclusive) of a ready artifact, in order; fewer if the artifact has fewer. */
  readArtifactChunks(artifactId: string, first: number, last: number): Promise<Buffer[]>;
  /** Uploads still `uploading` that began before `beforeMs` (an instance died mid-upload): their ids. */
  staleArtifactUploads(beforeMs: number): Promise<string[]>;
}
