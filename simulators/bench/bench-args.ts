import { parseArgs } from 'node:util';

/**
 * Command lines of the benchmark scripts (`node dist/simulators/bench/*.js`, `npm run bench`, `npm run soak`).
 * Every option is a number with a default (a few scripts add paths and flags); `--help` prints the usage; an
 * unknown option, a missing value or one that is not a positive number is a usage error (exit 2) — a benchmark
 * must never start a long load with a setting other than the one asked for (a mistyped `--fleet-count` used to
 * run with the default).
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

/** An option with a text value (a path), absent unless given; an empty value is refused. */
export interface TextOption {
  help: string;
  /** How the help names the value, e.g. DIR. */
  value: string;
  /** Why the value is refused (a usage error), or undefined when it is fine. */
  check?: (value: string) => string | undefined;
}

/** `--redis URL` of the benchmarks that run several instances (issue 16). */
export const REDIS_OPTION: TextOption = {
  value: 'URL',
  help: 'the Redis the instances share (redis://host:port)',
  check: (value) => (/^rediss?:\/\/./.test(value) ? undefined : `--redis needs a redis:// URL, got ${value}`),
};

/**
 * `--database URL` of the benchmarks that can run the platform on PostgreSQL: the server they make a
 * throw-away database on (`bench-database.ts`). Without it they run on SQLite.
 */
export const DATABASE_OPTION: TextOption = {
  value: 'URL',
  help: 'run on PostgreSQL: a throw-away database on this server (postgres://user@host:port/db), dropped after',
  check: (value) =>
    /^postgres(ql)?:\/\/./.test(value)
      ? undefined
      : `--database needs a postgres:// server URL, got ${value}`,
};

/** An option without a value, false unless given. */
export interface FlagOption {
  help: string;
}

export interface BenchCommandLine<K extends string, T extends string = never, F extends string = never> {
  /** What the script does and how it is called (the doc comment's first lines). */
  usage: string;
  options: Record<K, NumberOption>;
  texts?: Record<T, TextOption>;
  flags?: Record<F, FlagOption>;
  /** Accepted first positional arguments (a mode), the first being the default. */
  modes?: readonly string[];
}

export interface BenchRun<K extends string, T extends string = never, F extends string = never> {
  values: Record<K, number>;
  given: ReadonlySet<K>;
  mode: string | undefined;
  texts: Partial<Record<T, string>>;
  flags: Record<F, boolean>;
}

export type BenchArgs<K extends string, T extends string = never, F extends string = never> =
  | ({ kind: 'run' } & BenchRun<K, T, F>)
  | { kind: 'help'; text: string }
  | { kind: 'usage_error'; message: string; text: string };

export function helpText<K extends string, T extends string, F extends string>(
  cli: BenchCommandLine<K, T, F>,
): string {
  const lines = Object.entries<NumberOption>(cli.options).map(
    ([name, o]) => `${`  --${name} <n>`.padEnd(26)}${o.help} (default ${o.defaultText ?? o.default})`,
  );
  for (const [name, o] of Object.entries<TextOption>(cli.texts ?? ({} as Record<T, TextOption>)))
    lines.push(`${`  --${name} <${o.value}>`.padEnd(26)}${o.help}`);
  for (const [name, o] of Object.entries<FlagOption>(cli.flags ?? ({} as Record<F, FlagOption>)))
    lines.push(`${`  --${name}`.padEnd(26)}${o.help}`);
  lines.push(`${'  -h, --help'.padEnd(26)}print this and exit`);
  return `${cli.usage}\n\nOptions:\n${lines.join('\n')}\n`;
}

/** Pure: the parsed values, or what to print. */
export function parseBenchArgs<K extends string, T extends string = never, F extends string = never>(
  cli: BenchCommandLine<K, T, F>,
  argv: readonly string[],
): BenchArgs<K, T, F> {
  const text = helpText(cli);
  const names = Object.keys(cli.options) as K[];
  const textNames = Object.keys(cli.texts ?? {}) as T[];
  const flagNames = Object.keys(cli.flags ?? {}) as F[];
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: {
        help: { type: 'boolean', short: 'h' },
        ...Object.fromEntries([...names, ...textNames].map((n: string) => [n, { type: 'string' as const }])),
        ...Object.fromEntries(flagNames.map((n: string) => [n, { type: 'boolean' as const }])),
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
  const texts: Partial<Record<T, string>> = {};
  for (const name of textNames) {
    const raw = parsed.values[name];
    if (raw === undefined) continue;
    if (typeof raw !== 'string' || raw.trim() === '')
      return { kind: 'usage_error', message: `--${name} needs a ${cli.texts![name].value}`, text };
    const refused = cli.texts![name].check?.(raw);
    if (refused !== undefined) return { kind: 'usage_error', message: refused, text };
    texts[name] = raw;
  }
  const flags = Object.fromEntries(flagNames.map((n) => [n, parsed.values[n] === true])) as Record<
    F,
    boolean
  >;
  return { kind: 'run', values, given, mode, texts, flags };
}

/** The script's edge: prints the help (exit 0) or the usage error (exit 2), else returns the values. */
export function benchArgsOrExit<K extends string, T extends string = never, F extends string = never>(
  cli: BenchCommandLine<K, T, F>,
  argv: readonly string[] = process.argv.slice(2),
): BenchRun<K, T, F> {
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
