import { describe, expect, it } from 'vitest';
import {
  type BundleManifest,
  checkArchiveEntry,
  checkBundle,
  checkRoom,
  parseBundleManifest,
  ROOM_MARGIN_BYTES,
} from '../../../agent/core/release-checks.js';

describe('checkArchiveEntry', () => {
  it.each([
    ['a file at the root', { path: 'package.json', type: 'File' }, true],
    ['a nested file', { path: 'agent/charger-agent.mjs', type: 'File' }, true],
    ['a directory', { path: 'node_modules/better-sqlite3/', type: 'Directory' }, true],
    ['a ./ prefix', { path: './package.json', type: 'File' }, true],
    ['an absolute path', { path: '/etc/passwd', type: 'File' }, false],
    ['a .. segment', { path: 'agent/../../evil', type: 'File' }, false],
    ['a leading ..', { path: '../evil', type: 'File' }, false],
    ['a backslash', { path: 'agent\\..\\evil', type: 'File' }, false],
    ['an empty path', { path: '', type: 'File' }, false],
    ['a device', { path: 'dev', type: 'CharacterDevice' }, false],
    ['a FIFO', { path: 'fifo', type: 'FIFO' }, false],
    ['a symlink inside', { path: 'agent/link', type: 'SymbolicLink', linkpath: '../package.json' }, true],
    ['a symlink to its own directory', { path: 'agent/here', type: 'SymbolicLink', linkpath: '.' }, true],
    ['a symlink out by ..', { path: 'agent/link', type: 'SymbolicLink', linkpath: '../../etc' }, false],
    ['a symlink to an absolute path', { path: 'link', type: 'SymbolicLink', linkpath: '/etc/passwd' }, false],
    ['a symlink to ..', { path: 'link', type: 'SymbolicLink', linkpath: '..' }, false],
    ['a hard link inside', { path: 'b', type: 'Link', linkpath: 'agent/charger-agent.mjs' }, true],
    ['a hard link out', { path: 'b', type: 'Link', linkpath: '../outside' }, false],
    ['a hard link to an absolute path', { path: 'b', type: 'Link', linkpath: '/etc/shadow' }, false],
  ])('%s: %s', (_name, entry, ok) => {
    const check = checkArchiveEntry(entry);
    expect(check.ok).toBe(ok);
    if (!check.ok) expect(check.reason).toContain(JSON.stringify(entry.path));
  });
});

const X64 = { name: 'linux-x64', platform: 'linux', arch: 'x64', libc: 'glibc' };
const ARM = { name: 'linux-arm64', platform: 'linux', arch: 'arm64', libc: 'glibc' };

describe('parseBundleManifest', () => {
  const pkg = (agent: Record<string, unknown>, version: unknown = '1.0.1') => ({
    name: 'charger-agent',
    version,
    chargerAgent: agent,
  });
  it.each([
    [
      'a bundle',
      pkg({ nodeLines: [22, 24], target: X64 }),
      { version: '1.0.1', nodeLines: [22, 24], target: X64 },
    ],
    [
      'an OEM addon bundle',
      pkg({ nodeLines: [24], target: null }),
      { version: '1.0.1', nodeLines: [24], target: null },
    ],
    ['no version', pkg({ nodeLines: [24], target: X64 }, null), { error: expect.stringMatching(/version/) }],
    [
      'a version with a slash',
      pkg({ nodeLines: [24], target: X64 }, '../x'),
      { error: expect.stringMatching(/version/) },
    ],
    ['no Node lines', pkg({ target: X64 }), { error: expect.stringMatching(/Node lines/) }],
    ['no target', pkg({ nodeLines: [24] }), { error: expect.stringMatching(/target/) }],
    [
      'a malformed target',
      pkg({ nodeLines: [24], target: 'x64' }),
      { error: expect.stringMatching(/target/) },
    ],
    ['not an object', 'hello', { error: expect.any(String) }],
  ])('%s', (_name, value, expected) => {
    expect(parseBundleManifest(value)).toEqual(expected);
  });
});

describe('checkBundle', () => {
  const bundle: BundleManifest = { version: '1.0.1', nodeLines: [22, 24], target: X64 };
  it.each([
    ['fits', bundle, { version: '1.0.1', nodeVersion: '24.21.0', runningTarget: X64 }, undefined],
    ['no version asked (install)', bundle, { nodeVersion: '22.12.0', runningTarget: X64 }, undefined],
    [
      'another version',
      bundle,
      { version: '1.0.2', nodeVersion: '24.21.0', runningTarget: X64 },
      'the bundle is version 1.0.1, not 1.0.2',
    ],
    [
      'a Node it does not support',
      bundle,
      { nodeVersion: '20.20.2', runningTarget: X64 },
      "the bundle supports Node 22 and 24, not this charger's 20.20.2",
    ],
    [
      'another target',
      bundle,
      { nodeVersion: '24.21.0', runningTarget: ARM },
      'the bundle is built for linux-x64, not linux-arm64',
    ],
    [
      'an OEM addon over a prebuilt one',
      { ...bundle, target: null },
      { nodeVersion: '24.21.0', runningTarget: X64 },
      'the bundle is built for its own addon (no target), not linux-x64',
    ],
    [
      'an OEM addon over an OEM addon',
      { ...bundle, target: null },
      { nodeVersion: '24.21.0', runningTarget: null },
      undefined,
    ],
  ])('%s', (_name, b, expect_, reason) => {
    const check = checkBundle(b, expect_);
    expect(check).toEqual(reason === undefined ? { ok: true } : { ok: false, reason });
  });
});

describe('checkRoom', () => {
  const MiB = 1024 * 1024;
  it.each([
    [10 * MiB, 10 * MiB + ROOM_MARGIN_BYTES, true],
    [10 * MiB, 10 * MiB + ROOM_MARGIN_BYTES - 1, false],
    [0, 0, false],
  ])('needs %i with %i free: %s', (need, free, ok) => {
    const check = checkRoom(need, free);
    expect(check.ok).toBe(ok);
    if (!check.ok) expect(check.reason).toMatch(/^no room: the release needs [\d.]+ MiB plus 8\.0 MiB spare/);
  });
});
