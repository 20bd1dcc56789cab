import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FleetOptionsError, resolveFleetSettings } from '../../../simulators/fleet/fleet-options.js';

/** `charger-sim fleet --update-key FILE`: every agent of the fleet trusts the key; a bad file is an option error. */
const dir = mkdtempSync(join(tmpdir(), 'fleet-keys-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const { publicKey, privateKey } = generateKeyPairSync('ed25519');
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};
const base = { platformUrl: 'https://127.0.0.1:8443', count: 2 };

describe('the fleet’s update keys', () => {
  it('are read once for the fleet; none means none', () => {
    const pub = file('pub.pem', publicKey.export({ type: 'spki', format: 'pem' }) as string);
    const keys = resolveFleetSettings({ ...base, updateKeyFiles: [pub] }).updateKeys;
    expect(keys.map((k) => k.asymmetricKeyType)).toEqual(['ed25519']);
    expect(resolveFleetSettings(base).updateKeys).toEqual([]);
  });

  it.each([
    ['a missing file', join(dir, 'absent.pem'), /cannot read --update-key/],
    ['a private key', 'priv', /is a private key/],
    ['not a key', 'junk', /is not a PEM public key/],
  ])('refuses %s with an option error', (_, which, message) => {
    const path =
      which === 'priv'
        ? file('priv.pem', privateKey.export({ type: 'pkcs8', format: 'pem' }) as string)
        : which === 'junk'
          ? file('junk.pem', 'hello')
          : which;
    const attempt = () => resolveFleetSettings({ ...base, updateKeyFiles: [path] });
    expect(attempt).toThrow(FleetOptionsError);
    expect(attempt).toThrow(message);
  });
});
