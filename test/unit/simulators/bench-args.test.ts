import { describe, expect, it } from 'vitest';
import { type BenchCommandLine, parseBenchArgs } from '../../../simulators/bench/bench-args.js';

const cli: BenchCommandLine<'count' | 'minutes' | 'connections'> = {
  usage: 'Usage: bench [fleet|search] [options]',
  modes: ['fleet', 'search'],
  options: {
    count: { default: 2000, integer: true, help: 'chargers' },
    minutes: { default: 5, help: 'minutes' },
    connections: { default: 0, zero: true, integer: true, help: 'pool' },
  },
};

describe('bench command lines', () => {
  it('takes the defaults and the first mode when nothing is given', () => {
    const r = parseBenchArgs(cli, []);
    expect(r).toEqual({
      kind: 'run',
      mode: 'fleet',
      values: { count: 2000, minutes: 5, connections: 0 },
      given: new Set(),
      texts: {},
      flags: {},
    });
  });

  it('reads numbers in both spellings and says which were given', () => {
    const r = parseBenchArgs(cli, ['search', '--count', '4500', '--minutes=0.5']);
    expect(r.kind).toBe('run');
    if (r.kind !== 'run') return;
    expect(r.mode).toBe('search');
    expect(r.values).toEqual({ count: 4500, minutes: 0.5, connections: 0 });
    expect([...r.given].sort()).toEqual(['count', 'minutes']);
  });

  it('answers --help with the usage and every option with its default, and starts nothing', () => {
    for (const argv of [['--help'], ['-h'], ['search', '--count', '3', '--help']]) {
      const r = parseBenchArgs(cli, argv);
      expect(r.kind).toBe('help');
      if (r.kind !== 'help') continue;
      expect(r.text).toContain('Usage: bench');
      expect(r.text).toMatch(/--count <n>\s+chargers \(default 2000\)/);
      expect(r.text).toMatch(/--connections <n>\s+pool \(default 0\)/);
    }
  });

  it.each([
    [['--cuont', '5'], /Unknown option '--cuont'/],
    [['--count'], /argument missing/],
    [['--count', 'abc'], /--count must be a positive whole number, got abc/],
    [['--count', '2.5'], /--count must be a positive whole number, got 2.5/],
    [['--count='], /--count must be a positive whole number/],
    [['--count=0'], /--count must be a positive whole number, got 0/],
    [['--minutes=-1'], /--minutes must be a positive number, got -1/],
    [['--minutes', 'Infinity'], /--minutes must be a positive number/],
    [['--connections=-1'], /--connections must be a non-negative whole number/],
    [['serch'], /unknown mode serch; one of fleet, search/],
    [['fleet', 'search'], /one mode at most/],
  ])('refuses %j with a usage error that says why', (argv, message) => {
    const r = parseBenchArgs(cli, argv);
    expect(r.kind).toBe('usage_error');
    if (r.kind !== 'usage_error') return;
    expect(r.message).toMatch(message);
    expect(r.text).toContain('Usage: bench');
  });

  it('accepts zero only where the option allows it', () => {
    const r = parseBenchArgs(cli, ['--connections', '0']);
    expect(r.kind === 'run' && r.values.connections).toBe(0);
  });

  it('takes no mode when the script has none', () => {
    const plain: BenchCommandLine<'minutes'> = {
      usage: 'Usage: footprint',
      options: { minutes: { default: 10, help: 'minutes' } },
    };
    expect(parseBenchArgs(plain, []).kind).toBe('run');
    const r = parseBenchArgs(plain, ['extra']);
    expect(r.kind === 'usage_error' && r.message).toMatch(/Unexpected argument 'extra'/);
  });

  it('reads text options and flags where the script declares them', () => {
    const paths: BenchCommandLine<'records', 'json', 'keep'> = {
      usage: 'Usage: volume',
      options: { records: { default: 100, integer: true, help: 'records' } },
      texts: { json: { value: 'FILE', help: 'write the figures' } },
      flags: { keep: { help: 'keep the data' } },
    };
    const r = parseBenchArgs(paths, ['--json', 'out.json', '--keep']);
    expect(r.kind === 'run' && r.texts).toEqual({ json: 'out.json' });
    expect(r.kind === 'run' && r.flags).toEqual({ keep: true });
    const none = parseBenchArgs(paths, []);
    expect(none.kind === 'run' && [none.texts, none.flags]).toEqual([{}, { keep: false }]);
    const help = parseBenchArgs(paths, ['--help']);
    expect(help.kind === 'help' && help.text).toMatch(/--json <FILE>\s+write the figures/);
    expect(help.kind === 'help' && help.text).toMatch(/--keep\s+keep the data/);
    const empty = parseBenchArgs(paths, ['--json=']);
    expect(empty.kind === 'usage_error' && empty.message).toMatch(/--json needs a FILE/);
  });
});
