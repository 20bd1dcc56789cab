import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { unitLaunch } from '../../../simulators/bench/unit-launch.js';

describe('unitLaunch: how the agent unit starts Node, for the footprint bench', () => {
  it.each([
    ['no options', 'ExecStart=/usr/bin/node /opt/a.mjs run --config x', [], {}],
    [
      'options before the script only',
      'ExecStart=/usr/bin/node --max-semi-space-size=1 --liftoff-only /opt/a.mjs run --config x',
      ['--max-semi-space-size=1', '--liftoff-only'],
      {},
    ],
    [
      'several assignments on one line, a later line wins',
      'Environment=A=1 B=two\nEnvironment=A=3\n#Environment=C=commented',
      [],
      { A: '3', B: 'two' },
    ],
    ['a value holding =', 'Environment=NODE_OPTIONS=--x=1 B=2', [], { NODE_OPTIONS: '--x=1', B: '2' }],
  ])('%s', (_name, text, nodeArgs, env) => {
    expect(unitLaunch(text)).toEqual({ nodeArgs, env });
  });

  it('reads the unit shipped in docs/ with its memory settings', () => {
    const unit = unitLaunch(
      readFileSync(new URL('../../../docs/charger-agent.service', import.meta.url), 'utf8'),
    );
    expect(unit.nodeArgs).toContain('--max-semi-space-size=1');
    expect(unit.env).toMatchObject({ MALLOC_ARENA_MAX: '1', NODE_OPTIONS: '--max-old-space-size=128' });
  });
});
