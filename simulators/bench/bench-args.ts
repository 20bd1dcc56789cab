import { parseArgs } from 'node:util';

/**
 * Command lines of the benchmark scripts (`node dist/simulators/bench/*.js`, `npm run bench`, `npm run soak`).
 * Every option is a number with a default; `--help` prints the usage; an unknown option, a missing value or
 * one that is not a positive number is a usage error (exit 2) — a benchmark must never start a long load
 * with a setting other than the one asked for (a mistyped `--fleet-count` used to run with the default).
 */
export interface NumberOption {
  default: number;
  help: string;
  /** Rounded values are refused: counts of chargers, rounds, workers. */
  integer?: boolean;
  /** Zero is accepted (default: values must be > 0). */
  zero?: boolean;
  /** How the help shows the default, when it depends on other options. */
  defaultText?: string;
}

export interface BenchCommandLine<K extends string> {
  /** What the script does and how it is called (the doc comment's first lines). */
  usage: string;
  options: Record<K, NumberOption>;
  /** Accepted first positional arguments (a mode), the first being the default. */
  modes?: readonly string[];
}

export type BenchArgs<K extends string> =
  | { kind: 'run'; values: Record<K, number>; given: ReadonlySet<K>; mode: string | undefined }
  | { kind: 'help'; text: string }
  | { kind: 'usage_error'; message: string; text: string };

export function helpText<K extends string>(cli: BenchCommandLine<K>): string {
  const lines = Object.entries<NumberOption>(cli.options).map(
    ([name, o]) => `${`  --${name} <n>`.padEnd(26)}${o.help} (default ${o.defaultText ?? o.default})`,
  );
  lines.push(`${'  -h, --help'.padEnd(26)}print this and exit`);
  return `${cli.usage}\n\nOptions:\n${lines.join('\n')}\n`;
}

/** Pure: the parsed values, or what to print. */
export function parseBenchArgs<K extends string>(
  cli: BenchCommandLine<K>,
  argv: readonly string[],
): BenchArgs<K> {
  const text = helpText(cli);
  const names = Object.keys(cli.options) as K[];
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: {
        help: { type: 'boolean', short: 'h' },
        ...Object.fromEntries(names.map((n) => [n, { type: 'string' as const }])),
      },
      strict: true,
      allowPositionals: cli.modes !== undefined,
    });
  } catch (error) {
    return { kind: 'usage_error', message: (error as Error).message, text };
  }
  if (parsed.values.help) return { kind: 'help', text };
  let mode: string | undefined;
  if (cli.modes) {
    if (parsed.positionals.length > 1)
      return { kind: 'usage_error', message: `one mode at most, got ${parsed.positionals.join(' ')}`, text };
    mode = parsed.positionals[0] ?? cli.modes[0];
    if (mode === undefined || !cli.modes.includes(mode))
      return { kind: 'usage_error', message: `unknown mode ${mode}; one of ${cli.modes.join(', ')}`, text };
  }
  const values = {} as Record<K, number>;
  const given = new Set<K>();
  for (const name of names) {
    const option = cli.options[name];
    const raw = parsed.values[name];
    if (raw === undefined) {
      values[name] = option.default;
      continue;
    }
    const value = Number(raw);
    const valid =
      typeof raw === 'string' &&
      raw.trim() !== '' &&
      Number.isFinite(value) &&
      (option.zero ? value >= 0 : value > 0) &&
      (!option.integer || Number.isInteger(value));
    if (!valid) {
      const what = option.integer ? 'whole number' : 'number';
      return {
        kind: 'usage_error',
        message: `--${name} must be a ${option.zero ? 'non-negative' : 'positive'} ${what}, got ${String(raw)}`,
        text,
      };
    }
    values[name] = value;
    given.add(name);
  }
  return { kind: 'run', values, given, mode };
}

/** The script's edge: prints the help (exit 0) or the usage error (exit 2), else returns the values. */
export function benchArgsOrExit<K extends string>(
  cli: BenchCommandLine<K>,
  argv: readonly string[] = process.argv.slice(2),
): { values: Record<K, number>; given: ReadonlySet<K>; mode: string | undefined } {
  const result = parseBenchArgs(cli, argv);
  if (result.kind === 'help') {
    process.stdout.write(result.text);
    process.exit(0);
  }
  if (result.kind === 'usage_error') {
    process.stderr.write(`error: ${result.message}\n\n${result.text}`);
    process.exit(2);
  }
  return result;
}
