#!/usr/bin/env node
import './cli/supported-node.js';
import { Command } from 'commander';
import { isIanaTimezone } from '../shared/index.js';
import { addArtifactsCommand } from './cli/cli-artifacts.js';
import { addClientsCommands } from './cli/cli-clients.js';
import { addEnrolmentsCommand } from './cli/cli-enrolments.js';
import { addKeyFileOptions, databaseOption } from './cli/cli-options.js';
import { addServeCommand } from './cli/cli-serve.js';
import { ConfigError } from './cli/serve-settings.js';
import { backendOf, type DatabaseChoice } from './storage/backends.js';
import { openStore } from './storage/open-store.js';
import { loadOrCreatePlatformKeys, PlatformKeyError, type PlatformKeys } from './storage/platform-keys.js';
import { asDataDirError, ensureWritableDataDir } from './storage/storage-faults.js';
import type { Store } from './storage/store.js';

/** Admin and serve commands (DESIGN.md §11). Admin commands open the data directory directly. */

class UserError extends Error {}

function print(json: boolean | undefined, data: unknown, human: string): void {
  process.stdout.write(json ? `${JSON.stringify(data)}\n` : `${human}\n`);
}

/**
 * Opens the deployment in `dataDir` for one admin command. Only `create` (`operators create`, the first step of a
 * set-up) may start a new deployment there; every other command refuses a directory without one, so that a
 * mistyped `--data-dir` says so instead of answering from (and leaving behind) an empty deployment.
 */
async function withStore<T>(
  o: { dataDir: string; database: DatabaseChoice; keyFile?: string },
  fn: (store: Store, keys: PlatformKeys) => Promise<T>,
  { create = false }: { create?: boolean } = {},
): Promise<T> {
  const { dataDir, database, keyFile } = o;
  const backend = backendOf(database);
  if (!create && !backend.hasDeployment(database, dataDir, keyFile)) {
    const missing = backend.deploymentMarker(database, dataDir);
    throw new UserError(
      `no platform deployment in ${dataDir} (no ${missing}): check --data-dir; ` +
        "'operators create' or 'serve' creates one",
    );
  }
  ensureWritableDataDir(dataDir);
  const keys = loadOrCreatePlatformKeys(dataDir, { keyFile });
  const store = await openStore(database, dataDir, keys).catch((err: unknown) => {
    throw asDataDirError(dataDir, err);
  });
  try {
    return await fn(store, keys);
  } catch (err) {
    // A full or read-only disk: say which directory and what to do, not SQLite's bare message.
    throw asDataDirError(dataDir, err);
  } finally {
    await store.close();
  }
}

const program = new Command('charger-platform')
  .description('Charger platform integration API server and its admin commands')
  .showHelpAfterError();

addServeCommand(program);

const operators = program.command('operators').description('Manage operators (tenants)');
operators
  .command('create')
  .requiredOption('--data-dir <dir>')
  .addOption(databaseOption())
  .requiredOption('--name <name>')
  .option('--json', 'machine-readable output')
  .action(async (o) => {
    const name = String(o.name).trim();
    if (!name) throw new UserError('--name must not be empty');
    const op = await withStore(o, (s) => s.createOperator(name), { create: true });
    print(o.json, { operator_id: op.operator_id }, `created operator ${op.operator_id} (${op.name})`);
  });
operators
  .command('list')
  .requiredOption('--data-dir <dir>')
  .addOption(databaseOption())
  .option('--json', 'machine-readable output')
  .action(async (o) => {
    const list = await withStore(o, (s) => s.listOperators());
    print(o.json, list, list.map((x) => `${x.operator_id}\t${x.name}`).join('\n') || '(no operators)');
  });

const sites = program.command('sites').description('Manage sites');
sites
  .command('create')
  .requiredOption('--data-dir <dir>')
  .addOption(databaseOption())
  .requiredOption('--operator <id>')
  .requiredOption('--name <name>')
  .option('--timezone <tz>', 'IANA timezone', 'UTC')
  .option('--json', 'machine-readable output')
  .action(async (o) => {
    if (!isIanaTimezone(o.timezone)) throw new UserError(`unknown timezone ${o.timezone}`);
    const site = await withStore(o, async (s) => {
      if (!(await s.getOperator(o.operator))) throw new UserError(`no operator ${o.operator}`);
      return s.createSite({ operator_id: o.operator, name: o.name, timezone: o.timezone });
    });
    print(o.json, { site_id: site.site_id }, `created site ${site.site_id} (${site.name}, ${site.timezone})`);
  });
sites
  .command('list')
  .requiredOption('--data-dir <dir>')
  .addOption(databaseOption())
  .option('--operator <id>')
  .option('--json', 'machine-readable output')
  .action(async (o) => {
    const list = await withStore(o, (s) => s.listSites(o.operator));
    print(
      o.json,
      list.map(({ site_id, operator_id, name }) => ({ site_id, operator_id, name })),
      list.map((x) => `${x.site_id}\t${x.operator_id}\t${x.name}\t${x.timezone}`).join('\n') || '(no sites)',
    );
  });

addClientsCommands(program, withStore);

const devices = program.command('devices').description('Manage chargers');
devices
  .command('require-signature')
  .description('require (or with --off, stop requiring) HMAC signatures on the charger’s write requests')
  .requiredOption('--data-dir <dir>')
  .addOption(databaseOption())
  .requiredOption('--device <id>')
  .option('--off', 'signatures become optional again')
  .action(async (o) => {
    const done = await withStore(o, (s) => s.setRequireSignature('device', o.device, !o.off));
    if (!done) throw new UserError(`no device ${o.device}`);
    process.stdout.write(`device ${o.device} ${o.off ? 'may sign' : 'must sign'} write requests\n`);
  });
devices
  .command('allow')
  .description('add a serial number to the registration allowlist')
  .requiredOption('--data-dir <dir>')
  .addOption(databaseOption())
  .requiredOption('--sn <sn>')
  .action(async (o) => {
    await withStore(o, (s) => s.allowSerial(o.sn));
    process.stdout.write(`serial ${o.sn} may register\n`);
  });
devices
  .command('assign')
  .description('put a charger in a site')
  .requiredOption('--data-dir <dir>')
  .addOption(databaseOption())
  .requiredOption('--device <id>')
  .requiredOption('--site <id>')
  .action(async (o) => {
    await withStore(o, async (s) => {
      if (!(await s.getSite(o.site))) throw new UserError(`no site ${o.site}`);
      if (!(await s.assignDevice(o.device, o.site))) throw new UserError(`no device ${o.device}`);
    });
    process.stdout.write(`device ${o.device} is in site ${o.site}\n`);
  });
devices
  .command('reset')
  .description('revoke a charger’s secret and tokens so that its serial number may register again')
  .requiredOption('--data-dir <dir>')
  .addOption(databaseOption())
  .requiredOption('--device <id>')
  .action(async (o) => {
    const done = await withStore(o, (s) => s.resetDevice(o.device));
    if (!done) throw new UserError(`no device ${o.device}`);
    process.stdout.write(`device ${o.device} reset: its credentials are revoked and it may register again\n`);
  });

addEnrolmentsCommand(program, withStore);
addArtifactsCommand(program, withStore);
// After every command is defined (other modules add theirs): --key-file wherever --data-dir is taken.
addKeyFileOptions(program);

program.parseAsync(process.argv).catch((err: unknown) => {
  if (err instanceof UserError || err instanceof ConfigError || err instanceof PlatformKeyError) {
    process.stderr.write(`charger-platform: ${err.message}\n`);
    process.exit(1);
  }
  process.stderr.write(`charger-platform: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
