/**
 * The check of a downloaded update file before anything installs it (DESIGN.md §19, "The agent"): its size and
 * sha256 against the manifest, then the OEM's Ed25519 signature over the manifest with each trusted key. The
 * file is streamed (an artifact may be 512 MiB; a charger may have less memory) and deleted on any failure, so
 * an unverified file never stays where an installer could pick it up.
 */
import { createHash, type KeyObject, verify } from 'node:crypto';
import { createReadStream, promises as fs } from 'node:fs';
import { ARTIFACT_SIGNATURE, artifactSigningText } from '../../shared/artifact-manifest.js';
import type { SignedArtifactManifest } from '../core/update-manifest.js';

export type ArtifactCheckFailure =
  | 'no_trusted_keys'
  | 'size_mismatch'
  | 'sha256_mismatch'
  | 'invalid_signature';
export type ArtifactCheck = { ok: true } | { ok: false; reason: ArtifactCheckFailure };

/** Size and sha256 of the file, read in chunks; stops reading once it holds more than `limit` bytes. */
async function digestOf(file: string, limit: number): Promise<{ size: number; sha256: string }> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of createReadStream(file)) {
    size += (chunk as Buffer).length;
    if (size > limit) break;
    hash.update(chunk as Buffer);
  }
  return { size, sha256: hash.digest('hex') };
}

/** Whether any trusted key signed the manifest. A key of the wrong type counts as not signing, never throws. */
export function signedByAny(manifest: SignedArtifactManifest, keys: readonly KeyObject[]): boolean {
  if (!ARTIFACT_SIGNATURE.test(manifest.signature)) return false;
  const data = Buffer.from(artifactSigningText(manifest), 'utf8');
  const signature = Buffer.from(manifest.signature, 'base64');
  return keys.some((key) => {
    try {
      return verify(null, data, key, signature);
    } catch {
      return false;
    }
  });
}

async function verdict(
  file: string,
  manifest: SignedArtifactManifest,
  keys: readonly KeyObject[],
): Promise<ArtifactCheck> {
  if (keys.length === 0) return { ok: false, reason: 'no_trusted_keys' };
  const { size, sha256 } = await digestOf(file, manifest.size);
  if (size !== manifest.size) return { ok: false, reason: 'size_mismatch' };
  if (sha256 !== manifest.sha256) return { ok: false, reason: 'sha256_mismatch' };
  // The file is the manifest's; the manifest must be the OEM's.
  if (!signedByAny(manifest, keys)) return { ok: false, reason: 'invalid_signature' };
  return { ok: true };
}

/**
 * Checks `file` against `manifest`; on any failure the file is deleted. A file that cannot be read at all (gone,
 * no permission) rejects with the I/O error — that is a failed download, not a verdict on the artifact — and is
 * deleted too where it still exists.
 */
export async function checkArtifact(
  file: string,
  manifest: SignedArtifactManifest,
  keys: readonly KeyObject[],
): Promise<ArtifactCheck> {
  let result: ArtifactCheck;
  try {
    result = await verdict(file, manifest, keys);
  } catch (error) {
    await fs.rm(file, { force: true });
    throw error;
  }
  if (!result.ok) await fs.rm(file, { force: true });
  return result;
}
