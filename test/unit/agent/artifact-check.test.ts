import { createHash, generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SignedArtifactManifest } from '../../../agent/core/update-manifest.js';
import { checkArtifact } from '../../../agent/updates/artifact-check.js';
import { type ArtifactManifest, artifactSigningText } from '../../../shared/artifact-manifest.js';
import { tempDir } from '../../helpers/agent.js';

const oem = generateKeyPairSync('ed25519');
const other = generateKeyPairSync('ed25519');
// Over one read chunk (64 KiB), so the file is really streamed in pieces.
const content = Buffer.alloc(200_000, 0);
for (let i = 0; i < content.length; i++) content[i] = (i * 31) % 251;

function signed(data: Buffer, privateKey: KeyObject): SignedArtifactManifest {
  const manifest: ArtifactManifest = {
    kind: 'agent',
    version: '1.2.0',
    target: 'linux-arm64',
    sha256: createHash('sha256').update(data).digest('hex'),
    size: data.length,
  };
  const signature = sign(null, Buffer.from(artifactSigningText(manifest)), privateKey).toString('base64');
  return { ...manifest, signature };
}

describe('checkArtifact', () => {
  let tmp: ReturnType<typeof tempDir>;
  let file: string;
  beforeEach(() => {
    tmp = tempDir('artifact-check-');
    file = path.join(tmp.dir, 'agent-1.2.0.tar.gz');
    writeFileSync(file, content);
  });
  afterEach(() => tmp.remove());

  it('accepts the signed file and keeps it', async () => {
    expect(await checkArtifact(file, signed(content, oem.privateKey), [oem.publicKey])).toEqual({ ok: true });
    expect(existsSync(file)).toBe(true);
  });

  it('accepts when any trusted key signed it (the second of two)', async () => {
    const keys = [other.publicKey, oem.publicKey];
    expect(await checkArtifact(file, signed(content, oem.privateKey), keys)).toEqual({ ok: true });
  });

  it('ignores a trusted key of another type rather than failing on it', async () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey;
    expect(await checkArtifact(file, signed(content, oem.privateKey), [rsa, oem.publicKey])).toEqual({
      ok: true,
    });
  });

  const failures: [
    string,
    (m: SignedArtifactManifest) => { m: SignedArtifactManifest; keys?: KeyObject[] },
    string,
  ][] = [
    [
      'a tampered byte',
      (m) => {
        const tampered = Buffer.from(content);
        tampered[100_000] = (tampered[100_000]! + 1) % 256;
        writeFileSync(file, tampered);
        return { m };
      },
      'sha256_mismatch',
    ],
    [
      'a truncated file',
      (m) => {
        writeFileSync(file, content.subarray(0, content.length - 1));
        return { m };
      },
      'size_mismatch',
    ],
    [
      'a longer file',
      (m) => {
        writeFileSync(file, Buffer.concat([content, Buffer.from([0])]));
        return { m };
      },
      'size_mismatch',
    ],
    ['a key that did not sign it', (m) => ({ m, keys: [other.publicKey] }), 'invalid_signature'],
    ['no trusted key', (m) => ({ m, keys: [] }), 'no_trusted_keys'],
    // The file matches its manifest, but the manifest is not what the OEM signed.
    ['a changed manifest', (m) => ({ m: { ...m, version: '6.6.6' } }), 'invalid_signature'],
    ['a malformed signature', (m) => ({ m: { ...m, signature: 'not base64' } }), 'invalid_signature'],
  ];
  it.each(failures)('refuses %s and deletes the file', async (_, arrange, reason) => {
    const { m, keys = [oem.publicKey] } = arrange(signed(content, oem.privateKey));
    expect(await checkArtifact(file, m, keys)).toEqual({ ok: false, reason });
    expect(existsSync(file)).toBe(false);
  });

  it('rejects with the I/O error when the file is gone', async () => {
    const m = signed(content, oem.privateKey);
    await expect(checkArtifact(path.join(tmp.dir, 'nope'), m, [oem.publicKey])).rejects.toThrow(/ENOENT/);
  });
});
