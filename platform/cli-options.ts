import { InvalidArgumentError, Option } from 'commander';
import { DATABASE_ENV, type DatabaseChoice, parseDatabaseChoice } from './storage/open-store.js';

/** A whole number within bounds, for commander (DESIGN.md §11: a bad value is a usage error). */
export function integer(min: number, max: number) {
  return (value: string): number => {
    if (!/^\d+$/.test(value)) throw new InvalidArgumentError('must be a whole number');
    const n = Number(value);
    if (n < min || n > max) throw new InvalidArgumentError(`must be between ${min} and ${max}`);
    return n;
  };
}

/** `--database`, on `serve` and every admin command (DESIGN.md §11, §12). */
export function databaseOption(): Option {
  return new Option(
    '--database <db>',
    `sqlite (DIR/platform.sqlite) or a postgres:// URL (or set ${DATABASE_ENV}, which keeps a password out of the process list)`,
  )
    .env(DATABASE_ENV)
    .default({ kind: 'sqlite' } satisfies DatabaseChoice, 'sqlite')
    .argParser((value: string) => {
      const choice = parseDatabaseChoice(value);
      if (!choice) throw new InvalidArgumentError('must be sqlite or a postgres:// URL');
      return choice;
    });
}
