#!/usr/bin/env node
/**
 * `charger-agent` (DESIGN.md §11):
 *
 *   charger-agent run --data-dir DIR --platform-url URL [--ca FILE] --sn SN [--model M] [--manufacturer M]
 *                     [--firmware V] [--hal simulated|MODULE_PATH] [--connectors N] [--v2g] [--config FILE]
 *   charger-agent status --data-dir DIR [--json]      (not implemented yet)
 *   charger-agent diag   --data-dir DIR [--json]      (not implemented yet)
 *
 * Exit codes of `run`: 0 after SIGTERM/SIGINT and a clean shutdown; 1 unexpected failure; 2 usage or
 * configuration error; 3 the platform refuses this charger's identity (409 already registered, 403 not on the
 * allowlist) — a person has to act, restarting will not help.
 */
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import {
  ConfigError,
  describeRunConfig,
  type RunConfig,
  type RunFlags,
  resolveRunConfig,
} from './agent-config.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, isAgentFatalError } from './agent-errors.js';
import { startAgent } from './agent-runtime.js';
import type { Hal } from './hal.js';
import { loadHal } from './hal-loader.js';
import { createAgentLogger } from './logger.js';
import { AGENT_VERSION } from './version.js';

function fail(message: string, code: number): never {
  process.stderr.write(`charger-agent: ${message}\n`);
  process.exit(code);
}

async function run(flags: RunFlags): Promise<void> {
  let config: RunConfig;
  try {
    config = resolveRunConfig(flags);
  } catch (error) {
    if (error instanceof ConfigError) fail(error.message, EXIT_USAGE);
    throw error;
  }
  let ca: string | undefined;
  if (config.ca) {
    try {
      ca = readFileSync(config.ca, 'utf8');
    } catch (error) {
      fail(
        `cannot read --ca ${config.ca}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
        EXIT_USAGE,
      );
    }
  }
  let agentLogger: Awaited<ReturnType<typeof createAgentLogger>>;
  try {
    agentLogger = await createAgentLogger({ dataDir: config.dataDir, level: config.logLevel });
  } catch (error) {
    fail(`cannot write to --data-dir ${config.dataDir}: ${(error as Error).message}`, EXIT_USAGE);
  }
  const { logger } = agentLogger;
  const exit = (code: number): never => {
    agentLogger.close();
    process.exit(code);
  };
  process.on('uncaughtException', (error) => {
    logger.fatal({ err: error.message, stack: error.stack }, 'uncaught exception');
    exit(EXIT_FAILURE);
  });
  process.on('unhandledRejection', (reason) => {
    logger.fatal({ err: reason instanceof Error ? reason.message : String(reason) }, 'unhandled rejection');
    exit(EXIT_FAILURE);
  });

  let hal: Hal;
  try {
    hal = await loadHal(config.hal, {
      ...(config.connectors !== undefined ? { connectors: config.connectors } : {}),
      ...(config.v2g !== undefined ? { v2g: config.v2g } : {}),
      ...(config.halOptions ? { config: config.halOptions } : {}),
    });
  } catch (error) {
    logger.fatal({ hal: config.hal }, (error as Error).message);
    return exit(EXIT_USAGE);
  }

  let runtime: Awaited<ReturnType<typeof startAgent>>;
  try {
    runtime = await startAgent({
      config: {
        dataDir: config.dataDir,
        platformUrl: config.platformUrl,
        sn: config.sn,
        ...(config.model ? { model: config.model } : {}),
        ...(config.manufacturer ? { manufacturer: config.manufacturer } : {}),
        ...(config.firmware ? { firmware: config.firmware } : {}),
        ...(ca !== undefined ? { ca } : {}),
        secretRotationDays: config.secretRotationDays,
        signRequests: config.signRequests,
      },
      hal,
      logger,
      runConfig: describeRunConfig(config),
    });
  } catch (error) {
    if (isAgentFatalError(error)) {
      logger.fatal({ hint: error.hint }, error.message);
      return exit(error.exitCode);
    }
    logger.fatal({ err: (error as Error).message }, 'agent failed to start');
    return exit(EXIT_FAILURE);
  }

  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals += 1;
    if (signals > 1) {
      logger.warn({ signal }, 'second signal: exiting at once');
      exit(EXIT_FAILURE);
    }
    logger.info({ signal }, 'shutting down');
    runtime.stop().then(
      () => exit(EXIT_OK),
      (error: unknown) => {
        logger.error({ err: (error as Error).message }, 'shutdown failed');
        exit(EXIT_FAILURE);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  const fatal = await runtime.fatal;
  await runtime.stop().catch(() => undefined);
  exit(fatal.exitCode);
}

function notImplemented(name: string): void {
  process.stderr.write(`charger-agent ${name}: not implemented yet\n`);
  process.exit(EXIT_USAGE);
}

export function buildCli(): Command {
  const program = new Command('charger-agent')
    .description('The on-charger agent of the charger platform')
    .version(AGENT_VERSION)
    .exitOverride();
  program
    .command('run')
    .description('run the agent: register, follow schedules and commands, report to the platform')
    .option('--data-dir <dir>', 'where the agent keeps its state and logs')
    .option('--platform-url <url>', 'the platform base address, https://HOST:PORT')
    .option('--ca <file>', 'PEM certificate of the CA that signed the platform certificate')
    .option('--sn <sn>', 'this charger’s serial number')
    .option('--model <m>', 'model name reported at registration')
    .option('--manufacturer <m>', 'manufacturer reported at registration')
    .option('--firmware <v>', 'firmware version reported at registration')
    .option('--hal <spec>', 'simulated, or the path of a HAL module', 'simulated')
    .option('--connectors <n>', 'number of connectors (simulated HAL)')
    .option('--v2g', 'V2G-capable connectors (simulated HAL)')
    .option('--config <file>', 'JSON file with the same keys; flags win')
    .action(async (options: RunFlags & { hal?: string }, command: Command) => {
      // A default would hide the config file's `hal`: use it only when neither names one.
      const halFromFlag = command.getOptionValueSource('hal') === 'cli' ? options.hal : undefined;
      await run({ ...options, ...(halFromFlag !== undefined ? { hal: halFromFlag } : { hal: undefined }) });
    });
  program
    .command('status')
    .description('what the agent is doing (not implemented yet)')
    .option('--data-dir <dir>')
    .option('--json')
    .action(() => notImplemented('status'));
  program
    .command('diag')
    .description('check configuration, network, TLS, token, clock, disk and store (not implemented yet)')
    .option('--data-dir <dir>')
    .option('--json')
    .action(() => notImplemented('diag'));
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
