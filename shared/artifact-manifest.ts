/**
 * Update artifacts (DESIGN.md §19): a file and its manifest, signed by the OEM with Ed25519. Kept free of zod so
 * that the charger agent can check a manifest with nothing but `node:crypto`.
 */
export const ARTIFACT_KINDS = ['agent', 'firmware'] as const;

/** The largest artifact the platform takes (an upload over it answers 413). */
export const ARTIFACT_MAX_BYTES = 512 * 1024 * 1024;
/**
 * New artifacts are stored in chunks of this size (the last one shorter), so that a range read touches only its
 * chunks, and a download holds one chunk at a time: 64 downloads at once hold a few tens of MiB, not hundreds.
 * Each artifact records the size it was stored with.
 */
export const ARTIFACT_CHUNK_BYTES = 256 * 1024;
/** The upload's header carrying the manifest's signature (base64). */
export const ARTIFACT_SIGNATURE_HEADER = 'x-artifact-signature';
/** First line of the signed text; a new layout of the text gets a new one. */
export const ARTIFACT_SIGNING_PREFIX = 'charger-artifact-v1';

/** A version or a target: letters, digits and `. _ + -`, starting with a letter or digit, at most 64. */
export const ARTIFACT_NAME = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$/;
/** An Ed25519 signature (64 bytes) in standard base64. */
export const ARTIFACT_SIGNATURE = /^[A-Za-z0-9+/]{86}==$/;
/** A SHA-256 digest in lowercase hex. */
export const SHA256_HEX = /^[0-9a-f]{64}$/;

/** What the OEM signs about a file. `target` is empty when the artifact fits every charger of its kind. */
export interface ArtifactManifest {
  kind: (typeof ARTIFACT_KINDS)[number];
  version: string;
  target: string;
  sha256: string;
  size: number;
}

/** The canonical text the signature covers (DESIGN.md §19), byte for byte. */
export function artifactSigningText(m: ArtifactManifest): string {
  return `${ARTIFACT_SIGNING_PREFIX}\n${m.kind}\n${m.version}\n${m.target}\n${m.sha256}\n${m.size}\n`;
}
