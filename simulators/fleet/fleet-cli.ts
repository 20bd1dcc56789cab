/**
 * `charger-sim fleet` (DESIGN.md §11): a thin shell over `runFleet`.
 *
 *   charger-sim fleet --platform-url URL [--ca FILE] --count N [--duration SECONDS] [--data-dir DIR] [--json]
 *                     [--enrolment-ca-cert FILE --enrolment-ca-key FILE]
 *                     [--seed N] [--ramp SECONDS] [--all-charging] [--v2g-share F] [--outage-share F]
 *                     [--telemetry-interval SECONDS] [--heartbeat-interval SECONDS] [--log-level L] [--strict]
 *                     [--workers N] [--pace realistic|sandbox]
 *
 * Started with an IPC channel (the sandbox's fleet), it reports its start and stops when its parent goes away
 * (`parent-link.ts`).
 *
 * Exit codes: 0 the run had no errors; 1 it had errors (what counts: fleet-stats.ts, docs/simulators.md);
 * 2 usage error. SIGINT/SIGTERM stop early, gracefully; a second one exits at once with 1.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { type Command, Option } from 'commander';
import { FLEET_PACES, type FleetPace } from './fleet-mix.js';
import { type FleetLogLevel, type FleetOptions, FleetOptionsError, fleetPlan } from './fleet-options.js';
import { runFleet } from './fleet-runner.js';
import type { FleetSummary } from './fleet-summary.js';
import { type FleetHandle, runFleetInWorkers } from './fleet-workers.js';
import { linkToParent } from './parent-link.js';
import { formatSummary, startProgressLine } from './progress-line.js';

export const EXIT_OK = 0;
export const EXIT_ERRORS = 1;
export const EXIT_USAGE = 2;

export class UsageError extends Error {}

interface FleetFlags {
  platformUrl?: string;
  ca?: string;
  enrolmentCaCert?: string;
  enrolmentCaKey?: string;
  count?: string;
  duration?: string;
  dataDir?: string;
  json?: boolean;
  seed?: string;
  ramp?: string;
  allCharging?: boolean;
  v2gShare?: string;
  outageShare?: string;
  telemetryInterval?: string;
  heartbeatInterval?: string;
  logLevel?: FleetLogLevel;
  strict?: boolean;
  workers?: string;
  pace?: FleetPace;
  updateKey?: string[];
  agentReleases?: boolean;
  agentLogs?: boolean;
}

function seconds(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < 0)
    throw new UsageError(`${flag} must be a number of seconds ≥ 0`);
  return Math.round(n * 1000);
}

/** `0.2` or `20%`. */
function fraction(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const percent = value.trim().endsWith('%');
  const n = Number(percent ? value.trim().slice(0, -1) : value);
  const f = percent ? n / 100 : n;
  if (value.trim() === '' || !Number.isFinite(f) || f < 0 || f > 1)
    throw new UsageError(`${flag} must be a share between 0 and 1 (or 0%-100%)`);
  return f;
}

function wholeNumber(flag: string, value: string | undefined, min: number): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value.trim()) || Number(value) < min)
    throw new UsageError(`${flag} must be a whole number ≥ ${min}`);
  return Number(value);
}

function readOptional(flag: string, file: string | undefined): string | undefined {
  if (file === undefined) return undefined;
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new UsageError(
      `cannot read ${flag} ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
}

async function fleetCommand(flags: FleetFlags): Promise<number> {
  if (!flags.platformUrl) throw new UsageError('--platform-url is required');
  const count = wholeNumber('--count', flags.count, 1);
  if (count === undefined) throw new UsageError('--count is required');
  const ca = readOptional('--ca', flags.ca);
  if ((flags.enrolmentCaCert === undefined) !== (flags.enrolmentCaKey === undefined))
    throw new UsageError('--enrolment-ca-cert and --enrolment-ca-key go together');
  const enrolmentCaCert = readOptional('--enrolment-ca-cert', flags.enrolmentCaCert);
  const enrolmentCaKey = readOptional('--enrolment-ca-key', flags.enrolmentCaKey);
  const durationMs = seconds('--duration', flags.duration);
  const rampMs = seconds('--ramp', flags.ramp);
  const seed = wholeNumber('--seed', flags.seed, 0);
  const v2gShare = fraction('--v2g-share', flags.v2gShare);
  const outageShare = fraction('--outage-share', flags.outageShare);
  const telemetryIntervalMs = seconds('--telemetry-interval', flags.telemetryInterval);
  const heartbeatIntervalMs = seconds('--heartbeat-interval', flags.heartbeatInterval);
  const workers = wholeNumber('--workers', flags.workers, 1) ?? 1;

  const options: FleetOptions = {
    platformUrl: flags.platformUrl,
    count,
    ...(ca !== undefined ? { ca } : {}),
    ...(enrolmentCaCert !== undefined && enrolmentCaKey !== undefined
      ? { enrolmentCa: { cert: enrolmentCaCert, key: enrolmentCaKey } }
      : {}),
    ...(durationMs !== undefined ? { durationMs } : {}),
    ...(flags.dataDir !== undefined ? { dataDir: path.resolve(flags.dataDir) } : {}),
    ...(seed !== undefined ? { seed } : {}),
    ...(rampMs !== undefined ? { rampMs } : {}),
    ...(flags.allCharging ? { allCharging: true } : {}),
    ...(v2gShare !== undefined ? { v2gShare } : {}),
    ...(outageShare !== undefined ? { outageShare } : {}),
    ...(telemetryIntervalMs !== undefined ? { telemetryIntervalMs } : {}),
    ...(heartbeatIntervalMs !== undefined ? { heartbeatIntervalMs } : {}),
    ...(flags.logLevel ? { logLevel: flags.logLevel } : {}),
    ...(flags.strict ? { strict: true } : {}),
    ...(flags.pace ? { pace: flags.pace } : {}),
    ...(flags.updateKey?.length ? { updateKeyFiles: flags.updateKey.map((f) => path.resolve(f)) } : {}),
    ...(flags.agentReleases ? { agentReleases: true } : {}),
    ...(flags.agentLogs ? { agentLogs: true } : {}),
  };
  const fleet: FleetHandle =
    workers > 1 ? await runFleetInWorkers(options, workers) : await runFleet(options);

  const stopProgress = process.stderr.isTTY ? startProgressLine(fleet, process.stderr) : undefined;
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals += 1;
    if (signals > 1) {
      stopProgress?.();
      process.stderr.write(`charger-sim fleet: second ${signal}: exiting at once\n`);
      process.exit(EXIT_ERRORS);
    }
    if (process.stderr.isTTY)
      process.stderr.write(`\r\x1b[2Kcharger-sim fleet: ${signal}: stopping every charger…\n`);
    void fleet.stop();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const unlink = linkToParent(
    {
      type: 'fleet_started',
      seed: fleet.seed,
      count,
      v2g_chargers: fleetPlan(options, fleet.seed).filter((plan) => plan.v2g).length,
    },
    () => void fleet.stop(),
  );

  const summary: FleetSummary = await fleet.done;
  stopProgress?.();
  unlink();
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
  process.stdout.write(flags.json ? `${JSON.stringify(summary, null, 2)}\n` : formatSummary(summary));
  return summary.errors === 0 ? EXIT_OK : EXIT_ERRORS;
}

/** Adds `fleet` to the `charger-sim` program; `onExit` receives the exit code. */
export function addFleetCommand(program: Command, onExit: (code: number) => void): void {
  program
    .command('fleet')
    .description('run N simulated chargers (the real agent on simulated hardware) against a platform')
    .option('--platform-url <url>', 'the platform base address, https://HOST:PORT')
    .option('--ca <file>', 'PEM certificate of the CA that signed the platform certificate')
    .option(
      '--enrolment-ca-cert <file>',
      'attested registration: an enrolment CA (PEM) that signs a certificate for each charger’s serial',
    )
    .option('--enrolment-ca-key <file>', 'the private key of --enrolment-ca-cert (PEM, EC P-256 or RSA)')
    .option('--count <n>', 'how many chargers')
    .option('--duration <seconds>', 'stop after this long (default: run until SIGINT/SIGTERM)')
    .option('--data-dir <dir>', 'keep each charger’s store on disk in DIR/<sn>/ (default: in memory)')
    .option('--json', 'print the summary as JSON')
    .option(
      '--seed <n>',
      'seed of the mix and of every charger; serials are SIM-<seed>-<n> (default: random)',
    )
    .option('--ramp <seconds>', 'start the chargers evenly over this long (default: count / 50)')
    .option('--all-charging', 'every connector has a car that charges continuously (load benchmarks)')
    .option('--v2g-share <f>', 'share of V2G chargers, 0..1 or N% (default 0.2)')
    .option('--outage-share <f>', 'share of chargers that lose their network once, 0..1 or N% (default 0.05)')
    .option('--telemetry-interval <seconds>', 'telemetry interval while charging (default 5)')
    .option('--heartbeat-interval <seconds>', 'heartbeat period (default 30)')
    .addOption(
      new Option('--log-level <level>', 'agent logs to stderr from this level (default silent)').choices([
        'fatal',
        'error',
        'warn',
        'info',
        'debug',
        'trace',
        'silent',
      ]),
    )
    .option('--strict', 'count retried 429s and recovered transient failures as errors too')
    .option('--workers <n>', 'split the chargers over N worker threads (default 1: the main thread)')
    .option(
      '--update-key <file>',
      'an OEM public key (PEM) the agents trust for updates; repeatable (none: they refuse every update)',
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option(
      '--agent-releases',
      'each charger takes agent updates: an A/B layout under --data-dir, the launcher simulated (docs/simulators.md)',
    )
    .option(
      '--agent-logs',
      "each charger also writes its own log files under --data-dir, as on hardware (its diagnostics archive's logs)",
    )
    .addOption(
      new Option(
        '--pace <pace>',
        'how fast vehicles come and go: realistic (hours) or sandbox (minutes, and at least one V2G charger)',
      ).choices(FLEET_PACES),
    )
    .action(async (flags: FleetFlags) => {
      try {
        onExit(await fleetCommand(flags));
      } catch (error) {
        if (error instanceof UsageError || error instanceof FleetOptionsError) {
          process.stderr.write(`charger-sim fleet: ${error.message}\n`);
          onExit(EXIT_USAGE);
          return;
        }
        throw error;
      }
    });
}
