import { type Command, InvalidArgumentError, Option } from 'commander';
import { DATABASE_ENV, DEFAULT_DATABASE, parseDatabaseChoice } from '../storage/backends.js';

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
    .default(DEFAULT_DATABASE, 'sqlite')
    .argParser((value: string) => {
      const choice = parseDatabaseChoice(value);
      if (!choice) throw new InvalidArgumentError('must be sqlite or a postgres:// URL');
      return choice;
    });
}

/** Where `--key-file` may also be given: keeps a password-like path out of shell history in scripts. */
export const KEY_FILE_ENV = 'CHARGER_PLATFORM_KEY_FILE';

/**
 * `--key-file FILE`, on `serve` and every admin command (DESIGN.md §18): the platform key is kept there, outside
 * the data directory (a secrets mount), and never written into it.
 */
export function keyFileOption(): Option {
  return new Option(
    '--key-file <file>',
    `the platform key, kept outside the data directory (created 0600 if missing; or set ${KEY_FILE_ENV})`,
  ).env(KEY_FILE_ENV);
}

/** Gives every command that takes `--data-dir` (serve and the admin commands, nested ones too) `--key-file`. */
export function addKeyFileOptions(command: Command): void {
  for (const sub of command.commands) {
    if (sub.options.some((o) => o.long === '--data-dir')) sub.addOption(keyFileOption());
    addKeyFileOptions(sub);
  }
}
