import { describe, expect, it } from 'vitest';
import {
  checkUpdateManifest,
  type ManifestFields,
  type ManifestRefusalReason,
  type UpdateTargetContext,
} from '../../../agent/core/update-manifest.js';
import { ARTIFACT_MAX_BYTES } from '../../../shared/artifact-manifest.js';

const good = {
  kind: 'agent',
  version: '1.2.0',
  target: 'linux-arm64',
  sha256: 'a'.repeat(64),
  size: 1_000,
  signature: `${'A'.repeat(86)}==`,
};
const ctx: UpdateTargetContext = { agentTarget: 'linux-arm64', model: 'ACME-22', trustedKeys: 1 };

describe('checkUpdateManifest', () => {
  const accepted: [string, ManifestFields, UpdateTargetContext][] = [
    ['an agent for this build target', good, ctx],
    ['an agent for every target', { ...good, target: '' }, ctx],
    ['an agent for every target, on a bundle that names none', { ...good, target: '' }, { trustedKeys: 1 }],
    ['firmware for this model', { ...good, kind: 'firmware', target: 'ACME-22' }, ctx],
    ['firmware for every model', { ...good, kind: 'firmware', target: '' }, ctx],
    ['the largest size', { ...good, size: ARTIFACT_MAX_BYTES }, ctx],
    ['one byte', { ...good, size: 1 }, ctx],
    ['several keys', good, { ...ctx, trustedKeys: 3 }],
  ];
  it.each(accepted)('accepts %s', (_, fields, context) => {
    const result = checkUpdateManifest(fields, context);
    expect(result).toEqual({ ok: true, manifest: fields });
  });

  const refused: [string, ManifestFields, UpdateTargetContext, ManifestRefusalReason][] = [
    ['anything without a trusted key', good, { ...ctx, trustedKeys: 0 }, 'no_trusted_keys'],
    ['an unknown kind', { ...good, kind: 'bootloader' }, ctx, 'unknown_kind'],
    ['a missing kind', { ...good, kind: undefined }, ctx, 'unknown_kind'],
    ['an empty version', { ...good, version: '' }, ctx, 'invalid_version'],
    ['a version with a slash', { ...good, version: '../1.0' }, ctx, 'invalid_version'],
    ['a version of 65 characters', { ...good, version: 'v'.repeat(65) }, ctx, 'invalid_version'],
    ['a numeric version', { ...good, version: 1 }, ctx, 'invalid_version'],
    ['a missing target', { ...good, target: undefined }, ctx, 'invalid_target'],
    ['a target with a space', { ...good, target: 'linux arm64' }, ctx, 'invalid_target'],
    ['an agent for another build target', { ...good, target: 'linux-x64' }, ctx, 'wrong_target'],
    ['an agent matched against the model', { ...good, target: 'ACME-22' }, ctx, 'wrong_target'],
    [
      'a targeted agent on a bundle that names none',
      good,
      { model: 'ACME-22', trustedKeys: 1 },
      'wrong_target',
    ],
    ['firmware for another model', { ...good, kind: 'firmware', target: 'ACME-23' }, ctx, 'wrong_target'],
    ['firmware matched against the build target', { ...good, kind: 'firmware' }, ctx, 'wrong_target'],
    [
      'targeted firmware on a charger of no model',
      { ...good, kind: 'firmware', target: 'ACME-22' },
      { trustedKeys: 1 },
      'wrong_target',
    ],
    ['an uppercase sha256', { ...good, sha256: 'A'.repeat(64) }, ctx, 'invalid_sha256'],
    ['a short sha256', { ...good, sha256: 'a'.repeat(63) }, ctx, 'invalid_sha256'],
    ['a zero size', { ...good, size: 0 }, ctx, 'invalid_size'],
    ['a fractional size', { ...good, size: 1.5 }, ctx, 'invalid_size'],
    ['a size as text', { ...good, size: '1000' }, ctx, 'invalid_size'],
    ['a negative size', { ...good, size: -1 }, ctx, 'invalid_size'],
    ['a size over the limit', { ...good, size: ARTIFACT_MAX_BYTES + 1 }, ctx, 'too_large'],
    ['a signature that is not base64 of 64 bytes', { ...good, signature: 'AAAA' }, ctx, 'invalid_signature'],
    ['a missing signature', { ...good, signature: undefined }, ctx, 'invalid_signature'],
  ];
  it.each(refused)('refuses %s', (_, fields, context, reason) => {
    const result = checkUpdateManifest(fields, context);
    expect(result).toMatchObject({ ok: false, reason });
    if (!result.ok) expect(result.message).not.toBe('');
  });

  it('names both targets when the target is wrong', () => {
    expect(checkUpdateManifest({ ...good, target: 'linux-x64' }, ctx)).toMatchObject({
      message: "built for linux-x64, not this charger's agent build target (linux-arm64)",
    });
    expect(
      checkUpdateManifest({ ...good, kind: 'firmware', target: 'X1' }, { trustedKeys: 1 }),
    ).toMatchObject({
      message: "built for X1, not this charger's hardware model (unknown)",
    });
  });
});
