/**
 * Whether the charger takes an update's manifest (DESIGN.md §19, "The agent"), decided before a byte is
 * downloaded: a manifest it could never install (unknown kind, another target, too large, malformed) or cannot
 * verify (no trusted key) is refused at once rather than after a 512 MiB download. Pure; the downloaded file is
 * checked against the accepted manifest by updates/artifact-check.ts.
 *
 * Which target a charger answers to depends on the kind: an `agent` artifact is built for a machine
 * (`linux-arm64`, the name build:agent gives its bundle and its manifest), a `firmware` artifact for a hardware
 * model (the model the charger registers with: `--model`, else the HAL's). An empty target fits every charger.
 */
import {
  ARTIFACT_KINDS,
  ARTIFACT_MAX_BYTES,
  ARTIFACT_NAME,
  ARTIFACT_SIGNATURE,
  type ArtifactManifest,
  SHA256_HEX,
} from '../../shared/artifact-manifest.js';

/** A manifest and the OEM's signature over it (base64), as the `update` command carries them. */
export interface SignedArtifactManifest extends ArtifactManifest {
  signature: string;
}

/** What this charger is, for matching a manifest's `target`. */
export interface UpdateTargetContext {
  /** The agent's build target (`linux-arm64`...); absent when the bundle names none (an OEM's own addon). */
  agentTarget?: string;
  /** The hardware model the charger registered with. */
  model?: string;
  /** How many update keys the agent trusts (`--update-key`): with none, every update is refused. */
  trustedKeys: number;
}

export type ManifestRefusalReason =
  | 'no_trusted_keys'
  | 'unknown_kind'
  | 'invalid_version'
  | 'invalid_target'
  | 'wrong_target'
  | 'invalid_sha256'
  | 'invalid_size'
  | 'too_large'
  | 'invalid_signature';

export type ManifestCheck =
  | { ok: true; manifest: SignedArtifactManifest }
  | { ok: false; reason: ManifestRefusalReason; message: string };

/** The manifest fields of an `update` command as they arrived (not yet trusted to have any type). */
export interface ManifestFields {
  kind?: unknown;
  version?: unknown;
  target?: unknown;
  sha256?: unknown;
  size?: unknown;
  signature?: unknown;
}

const refuse = (reason: ManifestRefusalReason, message: string): ManifestCheck => ({
  ok: false,
  reason,
  message,
});

const isKind = (value: unknown): value is ArtifactManifest['kind'] =>
  (ARTIFACT_KINDS as readonly unknown[]).includes(value);

const matches = (pattern: RegExp, value: unknown): value is string =>
  typeof value === 'string' && pattern.test(value);

/** The target this charger answers to for an artifact of `kind` (undefined: it knows none). */
export function chargerTargetFor(
  kind: ArtifactManifest['kind'],
  ctx: UpdateTargetContext,
): string | undefined {
  return kind === 'agent' ? ctx.agentTarget : ctx.model;
}

/** Accepts the manifest, typed, or says why not (the first reason found, in the order of the fields). */
export function checkUpdateManifest(fields: ManifestFields, ctx: UpdateTargetContext): ManifestCheck {
  if (ctx.trustedKeys < 1)
    return refuse('no_trusted_keys', 'this charger trusts no update key (--update-key): it takes no update');
  const { kind, version, target, sha256, size, signature } = fields;
  if (!isKind(kind)) return refuse('unknown_kind', `kind must be one of ${ARTIFACT_KINDS.join(', ')}`);
  if (!matches(ARTIFACT_NAME, version))
    return refuse('invalid_version', 'version must be 1-64 letters, digits and . _ + -');
  if (typeof target !== 'string' || (target !== '' && !ARTIFACT_NAME.test(target)))
    return refuse('invalid_target', 'target must be empty or 1-64 letters, digits and . _ + -');
  const own = chargerTargetFor(kind, ctx);
  if (target !== '' && target !== own) {
    const what = kind === 'agent' ? 'agent build target' : 'hardware model';
    return refuse('wrong_target', `built for ${target}, not this charger's ${what} (${own ?? 'unknown'})`);
  }
  if (!matches(SHA256_HEX, sha256)) return refuse('invalid_sha256', 'sha256 must be 64 lowercase hex digits');
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 1)
    return refuse('invalid_size', 'size must be a whole number of bytes, at least 1');
  if (size > ARTIFACT_MAX_BYTES)
    return refuse('too_large', `size ${size} is over the ${ARTIFACT_MAX_BYTES} bytes an artifact may have`);
  if (!matches(ARTIFACT_SIGNATURE, signature))
    return refuse('invalid_signature', 'signature must be an Ed25519 signature in base64 (88 characters)');
  return { ok: true, manifest: { kind, version, target, sha256, size, signature } };
}
