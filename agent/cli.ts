#!/usr/bin/env node
/**
 * `charger-agent` (DESIGN.md §11):
 *
 *   charger-agent run --data-dir DIR --platform-url URL [--ca FILE] --sn SN [--model M] [--manufacturer M]
 *                     [--firmware V] [--hal simulated|MODULE_PATH] [--connectors N] [--v2g] [--config FILE]
 *                     [--client-cert FILE --client-key FILE] [--update-key FILE ...]
 *   charger-agent status    --data-dir DIR [--json] [--prefix DIR]
 *   charger-agent diag      --data-dir DIR [--json] [--timeout SECONDS]
 *   charger-agent schedules --data-dir DIR [--json]
 *   charger-agent commands  --data-dir DIR [--limit N] [--json]
 *   charger-agent install   --bundle FILE.tar.gz --prefix DIR [--version V]   (A/B releases, updates/releases.ts)
 *
 * Exit codes of `run`: 0 after SIGTERM/SIGINT and a clean shutdown; 1 unexpected failure; 2 usage or
 * configuration error; 3 the platform refuses this charger's identity (409 already registered, 403 not on the
 * allowlist, or no acceptable client certificate) — a person has to act, restarting will not help.
 *
 * Exit codes of the technician commands (`TECH_EXIT`, technician/read-store.ts): 0 healthy / all checks passed /
 * listed; 1 unexpected failure (e.g. the store cannot be read); 2 usage; 4 status degraded or a diag check
 * failed; 5 no agent store in --data-dir (status also: not registered yet).
 */
import './supported-node.js';
import path from 'node:path';
import { Command, CommanderError } from 'commander';
import { checkTimezonesWith } from '../shared/primitives.js';
import type { RunFlags } from './agent-config.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE } from './agent-errors.js';
import { isReadableZone } from './core/tz/zone-offsets.js';
import { fail, run } from './run-command.js';
// The technician commands are loaded when one runs, never by `run`: the agent at cadence does not carry their
// code (diag alone brings all of undici and more schemas; docs/benchmarks.md, "Agent footprint").
import { DEFAULT_DIAG_TIMEOUT_MS, TECH_EXIT } from './technician/read-store.js';
import { jsonForTerminal } from './technician/terminal-text.js';
import { AGENT_VERSION } from './version.js';

// A schedule's zone is valid here when the agent can read its rules: from the tz database without Intl.
checkTimezonesWith(isReadableZone);

/** Prints and exits once stdout has taken the text (a pending DNS lookup must not keep diag alive). */
function finish(text: string, code: number): Promise<never> {
  return new Promise(() => {
    // A reader that went away (`status | head`) is no reason to fail differently.
    process.stdout.once('error', () => process.exit(code));
    process.stdout.write(text, () => process.exit(code));
  });
}

const absolute = <T extends TechOptions>(options: T): T => ({
  ...options,
  dataDir: path.resolve(options.dataDir),
});

/** JSON escapes C0 itself; DEL, C1 and bidi controls from the platform are escaped too (terminal-text.ts). */
const asJson = (value: unknown) => `${jsonForTerminal(JSON.stringify(value, null, 2))}\n`;

interface TechOptions {
  dataDir: string;
  json?: boolean;
}

/** Opens the store for a technician command, or prints why it cannot and exits. */
async function storeFor(name: string, options: TechOptions) {
  const { openStoreForReading } = await import('./technician/read-store.js');
  const access = openStoreForReading(options.dataDir);
  if (access.ok) return access.store;
  const missing = access.reason === 'missing' || access.reason === 'uninitialised';
  const code = missing ? TECH_EXIT.notRegistered : TECH_EXIT.failure;
  if (name === 'status' && missing) {
    const [{ noStoreReport }, { renderNoStore }] = await Promise.all([
      import('./technician/status.js'),
      import('./technician/render-status.js'),
    ]);
    const report = noStoreReport(options.dataDir, access.message);
    return finish(options.json ? asJson(report) : renderNoStore(report), code);
  }
  if (options.json) {
    return finish(asJson({ error: access.reason, message: access.message, hint: access.hint }), code);
  }
  process.stderr.write(`charger-agent ${name}: ${access.message}\n  hint: ${access.hint}\n`);
  process.exit(code);
}

async function status(options: TechOptions & { prefix?: string }): Promise<void> {
  const [{ collectStatus, statusExitCode }, { renderStatus }, { collectReleases, releaseLayoutFor }] =
    await Promise.all([
      import('./technician/status.js'),
      import('./technician/render-status.js'),
      import('./technician/release-status.js'),
    ]);
  const store = await storeFor('status', options);
  const report = collectStatus(store, { dataDir: options.dataDir });
  store.close();
  const layout = releaseLayoutFor(options.prefix && path.resolve(options.prefix));
  if (layout !== undefined) report.releases = collectReleases(layout);
  await finish(options.json ? asJson(report) : renderStatus(report), statusExitCode(report.state));
}

async function diag(options: TechOptions & { timeout?: string }): Promise<void> {
  let timeoutMs = DEFAULT_DIAG_TIMEOUT_MS;
  if (options.timeout !== undefined) {
    const seconds = Number(options.timeout);
    if (!Number.isFinite(seconds) || seconds <= 0 || seconds > 120) {
      fail('--timeout must be a number of seconds, more than 0 and at most 120', TECH_EXIT.usage);
    }
    timeoutMs = Math.round(seconds * 1000);
  }
  const [{ runDiag }, { renderDiag }] = await Promise.all([
    import('./technician/diag/run-diag.js'),
    import('./technician/diag/render-diag.js'),
  ]);
  const { report, exitCode } = await runDiag({ dataDir: options.dataDir, timeoutMs });
  await finish(options.json ? asJson(report) : renderDiag(report), exitCode);
}

async function schedules(options: TechOptions): Promise<void> {
  const { collectSchedules, renderSchedules } = await import('./technician/listings.js');
  const store = await storeFor('schedules', options);
  const report = collectSchedules(store);
  store.close();
  await finish(options.json ? asJson(report) : renderSchedules(report), TECH_EXIT.ok);
}

async function commands(options: TechOptions & { limit?: string }): Promise<void> {
  let limit = 20;
  if (options.limit !== undefined) {
    if (!/^\d+$/.test(options.limit) || Number(options.limit) < 1 || Number(options.limit) > 10_000) {
      fail('--limit must be a whole number, 1-10000', TECH_EXIT.usage);
    }
    limit = Number(options.limit);
  }
  const { collectCommands, renderCommands } = await import('./technician/listings.js');
  const store = await storeFor('commands', options);
  const report = collectCommands(store, limit);
  store.close();
  await finish(options.json ? asJson(report) : renderCommands(report), TECH_EXIT.ok);
}

async function install(options: { bundle: string; prefix: string; version?: string }): Promise<void> {
  const { installBundle } = await import('./updates/release-install.js');
  const result = await installBundle(options);
  if (!result.ok) fail(`install: ${result.reason}`, EXIT_FAILURE);
  const launcher = path.join(path.resolve(options.prefix), 'bin', 'charger-agent');
  const previous = result.previous === undefined ? '' : ` (previous: ${result.previous})`;
  await finish(
    `installed ${result.version} as the current release${previous}; run it with ${launcher} run ...\n`,
    EXIT_OK,
  );
}

export function buildCli(): Command {
  const program = new Command('charger-agent')
    .description('The on-charger agent of the charger platform')
    .version(AGENT_VERSION)
    // The program's own --version only before a subcommand: `install --version V` is install's.
    .enablePositionalOptions()
    .exitOverride();
  program
    .command('run')
    .description('run the agent: register, follow schedules and commands, report to the platform')
    .option('--data-dir <dir>', 'where the agent keeps its state and logs')
    .option('--platform-url <url>', 'the platform base address, https://HOST:PORT')
    .option('--ca <file>', 'PEM certificate of the CA that signed the platform certificate')
    .option('--client-cert <file>', 'PEM client certificate naming the serial (attested registration)')
    .option('--client-key <file>', 'PEM private key of --client-cert')
    .option('--sn <sn>', 'this charger’s serial number')
    .option('--model <m>', 'model name reported at registration')
    .option('--manufacturer <m>', 'manufacturer reported at registration')
    .option('--firmware <v>', 'firmware version reported at registration')
    .option('--hal <spec>', 'simulated, or the path of a HAL module', 'simulated')
    .option('--connectors <n>', 'number of connectors (simulated HAL)')
    .option('--v2g', 'V2G-capable connectors (simulated HAL)')
    .option(
      '--update-key <file>',
      'Ed25519 public key (PEM) trusted for updates; repeat for several (none: every update is refused)',
      (file: string, previous: string[] | undefined) => [...(previous ?? []), file],
    )
    .option('--config <file>', 'JSON file with the same keys; flags win')
    .action(async (options: RunFlags & { hal?: string }, command: Command) => {
      // A default would hide the config file's `hal`: use it only when neither names one.
      const halFromFlag = command.getOptionValueSource('hal') === 'cli' ? options.hal : undefined;
      await run({ ...options, ...(halFromFlag !== undefined ? { hal: halFromFlag } : { hal: undefined }) });
    });
  const dataDir = '--data-dir <dir>';
  const dataDirHelp = 'the agent’s data directory (as given to run)';
  const exitCodes =
    '\nExit codes: 0 ok; 1 unexpected failure; 2 usage; 4 degraded / a check failed; 5 no store (status: not registered yet).';
  program
    .command('status')
    .description(
      'what the agent is doing: identity, connectivity, connectors, schedules in force, outbox, commands',
    )
    .requiredOption(dataDir, dataDirHelp)
    .option('--json', 'machine-readable output')
    .option('--prefix <dir>', 'the A/B install to show releases of (default: the launcher’s)')
    .addHelpText('after', exitCodes)
    .action((options: TechOptions & { prefix?: string }) => status(absolute(options)));
  program
    .command('diag')
    .description('check store, configuration, DNS, TCP, TLS, token, round trip, clock, disk and logs')
    .requiredOption(dataDir, dataDirHelp)
    .option('--json', 'machine-readable output: {ok, checks: [{name, status, detail, hint}]}')
    .option('--timeout <seconds>', 'limit for each network step', String(DEFAULT_DIAG_TIMEOUT_MS / 1000))
    .addHelpText('after', exitCodes)
    .action((options: TechOptions & { timeout?: string }) => diag(absolute(options)));
  program
    .command('schedules')
    .description(
      'the stored schedules, overrides and flexibility limits per connector, and what is in force now',
    )
    .requiredOption(dataDir, dataDirHelp)
    .option('--json', 'machine-readable output')
    .action((options: TechOptions) => schedules(absolute(options)));
  program
    .command('commands')
    .description('the command journal, newest first')
    .requiredOption(dataDir, dataDirHelp)
    .option('--limit <n>', 'how many entries', '20')
    .option('--json', 'machine-readable output')
    .action((options: TechOptions & { limit?: string }) => commands(absolute(options)));
  program
    .command('install')
    .description(
      'lay out an A/B install from a bundle archive: DIR/releases/<version>, DIR/current, DIR/bin/charger-agent',
    )
    .requiredOption('--bundle <file>', 'the bundle archive (npm run build:agent -- --archive FILE)')
    .requiredOption('--prefix <dir>', 'the install directory, e.g. /opt/charger-agent')
    .option('--version <v>', 'refuse the bundle unless it is this version')
    .action((options: { bundle: string; prefix: string; version?: string }) => install(options));
  return program;
}

try {
  await buildCli().parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) {
    process.exit(error.exitCode === 0 ? EXIT_OK : EXIT_USAGE);
  }
  process.stderr.write(`charger-agent: ${(error as Error).message}\n`);
  process.exit(EXIT_FAILURE);
}
