/**
 * `charger-agent run` (DESIGN.md §11): the configuration resolved and checked, the HAL loaded, the agent started
 * and stopped on a signal, a fatal error or an update to restart into (exit codes: cli.ts).
 */
import type { KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import {
  ConfigError,
  describeRunConfig,
  type RunConfig,
  type RunFlags,
  resolveRunConfig,
} from './agent-config.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, isAgentFatalError } from './agent-errors.js';
import { RESTART_EXIT_CODE } from './core/release-trial.js';
import type { Hal } from './hal.js';
import { loadHal } from './hal-loader.js';
import { createAgentLogger } from './logger.js';
import { startAgent } from './runtime/agent-runtime.js';
import { agentUpdatesFromEnv } from './updates/release-wiring.js';
import { readUpdateKeys } from './updates/update-keys.js';

/** One line on stderr, then exit with `code`. */
export function fail(message: string, code: number): never {
  process.stderr.write(`charger-agent: ${message}\n`);
  process.exit(code);
}

/**
 * The charger's client certificate and key (`--client-cert`, `--client-key`), read and paired up at start, so
 * that a missing file or a key of another certificate is a start-up error rather than a refused handshake later.
 */
function readClientCertificate(config: RunConfig): { cert: string; key: string } | undefined {
  if (!config.clientCert || !config.clientKey) return undefined;
  const read = (flag: string, file: string) => {
    try {
      return readFileSync(file, 'utf8');
    } catch (error) {
      return fail(
        `cannot read ${flag} ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
        EXIT_USAGE,
      );
    }
  };
  const pair = {
    cert: read('--client-cert', config.clientCert),
    key: read('--client-key', config.clientKey),
  };
  try {
    createSecureContext(pair);
  } catch (error) {
    fail(
      `--client-cert ${config.clientCert} and --client-key ${config.clientKey} are not a PEM certificate and its key: ${(error as Error).message}`,
      EXIT_USAGE,
    );
  }
  return pair;
}

export async function run(flags: RunFlags): Promise<void> {
  let config: RunConfig;
  let updateKeys: KeyObject[];
  try {
    config = resolveRunConfig(flags);
    updateKeys = readUpdateKeys(config.updateKeys);
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
  const clientCert = readClientCertificate(config);
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
  // A restart can be asked for while the agent is still starting (a reset or a staged release resumed after a
  // crash): it waits until there is a runtime to stop.
  let started: () => void = () => undefined;
  const running = new Promise<void>((resolve) => {
    started = resolve;
  });
  const restart = (why: string) => {
    void running.then(() => restartProcess(runtime, logger, exit, why));
  };
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
        ...(clientCert !== undefined ? { clientCert } : {}),
        secretRotationDays: config.secretRotationDays,
        signRequests: config.signRequests,
        updateKeys,
      },
      hal,
      logger,
      runConfig: describeRunConfig(config),
      ...agentUpdateOption(() => restart('restarting into the staged release')),
      // A `reset` (DESIGN.md §20): the launcher, or systemd's Restart=on-failure, starts the agent again.
      restart: () => restart('restarting for a reset'),
    });
  } catch (error) {
    if (isAgentFatalError(error)) {
      logger.fatal({ hint: error.hint }, error.message);
      return exit(error.exitCode);
    }
    logger.fatal({ err: (error as Error).message }, 'agent failed to start');
    return exit(EXIT_FAILURE);
  }

  started();

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

/** Agent updates when the launcher runs this agent (updates/release-wiring.ts), else none. */
function agentUpdateOption(restart: () => void) {
  const updates = agentUpdatesFromEnv(restart);
  return updates ? { updates } : {};
}

/**
 * A staged release or a reset: stop gracefully (the outbox flushed as far as it goes), then exit with the restart
 * code for the launcher (or systemd) to start the agent again.
 */
function restartProcess(
  runtime: { stop(): Promise<void> },
  logger: { info(msg: string): void },
  exit: (code: number) => void,
  why: string,
): void {
  logger.info(why);
  runtime.stop().then(
    () => exit(RESTART_EXIT_CODE),
    () => exit(RESTART_EXIT_CODE),
  );
}
