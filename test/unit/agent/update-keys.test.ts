import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, resolveRunConfig } from '../../../agent/agent-config.js';
import { readUpdateKeys } from '../../../agent/updates/update-keys.js';
import { tempDir } from '../../helpers/agent.js';

const base = { dataDir: 'd', platformUrl: 'https://p', sn: 'S' };

describe('update keys', () => {
  let tmp: ReturnType<typeof tempDir>;
  beforeEach(() => {
    tmp = tempDir('update-keys-');
  });
  afterEach(() => tmp.remove());

  const write = (name: string, text: string) => {
    const file = path.join(tmp.dir, name);
    writeFileSync(file, text);
    return file;
  };
  const pemOf = (type: 'ed25519' | 'ed448' | 'x25519') => {
    const { publicKey, privateKey } = generateKeyPairSync(type as 'ed25519');
    return {
      public: publicKey.export({ type: 'spki', format: 'pem' }) as string,
      private: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    };
  };

  it('come from --update-key (repeatable, relative to the working directory) or the file, flags replacing the list', () => {
    expect(resolveRunConfig(base).updateKeys).toEqual([]);
    expect(resolveRunConfig({ ...base, updateKey: ['a.pem', '/keys/b.pem'] }, '/work').updateKeys).toEqual([
      '/work/a.pem',
      '/keys/b.pem',
    ]);
    const file = write(
      'agent.json',
      JSON.stringify({ ...base, 'update-keys': ['keys/oem.pem', 'keys/oem-2.pem'] }),
    );
    expect(resolveRunConfig({ config: file }, '/elsewhere').updateKeys).toEqual([
      path.join(tmp.dir, 'keys/oem.pem'),
      path.join(tmp.dir, 'keys/oem-2.pem'),
    ]);
    expect(resolveRunConfig({ config: file, updateKey: ['mine.pem'] }, '/work').updateKeys).toEqual([
      '/work/mine.pem',
    ]);
    write('agent.json', JSON.stringify({ ...base, updateKeys: 'oem.pem' }));
    expect(() => resolveRunConfig({ config: file })).toThrow(/updateKeys: /);
  });

  it('are read as Ed25519 public keys, in order', () => {
    const a = pemOf('ed25519');
    const b = pemOf('ed25519');
    const keys = readUpdateKeys([write('a.pem', a.public), write('b.pem', b.public)]);
    expect(keys.map((k) => k.export({ type: 'spki', format: 'pem' }))).toEqual([a.public, b.public]);
    expect(readUpdateKeys([])).toEqual([]);
  });

  it.each([
    [
      'a missing file',
      () => path.join(tmp.dir, 'nope.pem'),
      /^cannot read --update-key .*nope\.pem: ENOENT$/,
    ],
    ['text that is no key', () => write('junk.pem', 'hello'), /junk\.pem is not a PEM public key$/],
    [
      'an Ed448 key',
      () => write('ed448.pem', pemOf('ed448').public),
      /ed448\.pem is not an Ed25519 key \(it is ed448\)$/,
    ],
    [
      'an X25519 key',
      () => write('x.pem', pemOf('x25519').public),
      /x\.pem is not an Ed25519 key \(it is x25519\)$/,
    ],
    ['the private key', () => write('oem.key', pemOf('ed25519').private), /oem\.key is a private key/],
  ])('refuse %s with one clear line', (_, file, message) => {
    const read = () => readUpdateKeys([file()]);
    expect(read).toThrow(ConfigError);
    expect(read).toThrow(message);
  });
});
