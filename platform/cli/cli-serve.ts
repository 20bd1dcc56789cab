import { type Command, InvalidArgumentError, Option } from 'commander';
import { DEFAULT_CONNECTION_LIMITS, MAX_CONNECTIONS_LIMIT } from '../http/connection-limits.js';
import { parseCorsOrigin } from '../http/cors.js';
import { GUARD_LIMITS } from '../http/rate-limit/rate-limiter.js';
import {
  DEFAULT_SIM_CHARGERS,
  type SandboxFleet,
  type SandboxFleetStart,
  startSandboxFleet,
} from '../sandbox/sandbox-fleet.js';
import { ensureSandboxUpdateKey } from '../sandbox/sandbox-update-key.js';
import { DEFAULT_RETENTION } from '../storage/retention-policy.js';
import { databaseOption, integer } from './cli-options.js';
import type { RunningPlatform } from './serve.js';
import { ConfigError, DEFAULT_METRICS_HOST, DEFAULT_METRICS_PORT, REDIS_ENV } from './serve-settings.js';

/** `charger-platform serve` (DESIGN.md §11): its options, the banner, and a clean close on SIGTERM or SIGINT. */
export function addServeCommand(program: Command): void {
  program
    .command('serve')
    .description('Serve both API surfaces over HTTPS')
    .requiredOption('--data-dir <dir>', 'data directory (keys, TLS material, and the SQLite database)')
    .addOption(databaseOption())
    .addOption(
      new Option(
        '--redis <url>',
        `redis:// URL of the Redis that several instances share (with --database postgres://...; or set ${REDIS_ENV})`,
      ).env(REDIS_ENV),
    )
    .option(
      '--instance-id <name>',
      "this instance's name in logs, metrics and /readyz (default: host name and pid)",
    )
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--port <port>', 'port to listen on (0 picks a free one)', integer(0, 65535), 8443)
    .addOption(
      new Option('--env <env>', 'deployment environment')
        .choices(['production', 'sandbox'])
        .default('production'),
    )
    .option('--tls-cert <file>', 'PEM certificate')
    .option('--tls-key <file>', 'PEM private key')
    .option('--self-signed', 'create a self-signed certificate in production')
    .addOption(
      new Option(
        '--registration <policy>',
        'charger registration policy (default: open in sandbox, allowlist in production); attested: a client certificate from an enrolment group (charger-platform enrolments)',
      ).choices(['open', 'allowlist', 'attested']),
    )
    .option('--token-ttl <seconds>', 'access token lifetime (at most a day)', integer(1, 86_400), 86_400)
    .option(
      '--address-limit <n>',
      'requests a minute one source address may make to the token endpoints and registration',
      integer(1, 1_000_000_000),
      GUARD_LIMITS.unauthenticated.limit,
    )
    .addOption(
      new Option(
        '--log-level <level>',
        'log level (a sandbox running its simulated fleet: warn, unless given)',
      )
        .choices(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'])
        .default('info'),
    )
    .option(
      '--retention-telemetry-days <days>',
      'keep raw telemetry this long (0: forever)',
      integer(0, 100_000),
      DEFAULT_RETENTION.telemetryDays,
    )
    .option(
      '--retention-history-days <days>',
      'keep device events and finished commands and controls this long (0: forever)',
      integer(0, 100_000),
      DEFAULT_RETENTION.historyDays,
    )
    .option(
      '--retention-rollup-days <days>',
      'keep 15-minute energy rollups this long (0: forever)',
      integer(0, 100_000),
      DEFAULT_RETENTION.rollupDays,
    )
    .option(
      '--cors-origin <origins>',
      'browser origin allowed to call the API (CORS), exactly as the browser sends it, e.g. ' +
        'https://app.example.com; repeat the option or separate origins with commas (default: none, CORS off)',
      corsOrigins,
      [],
    )
    .option(
      '--webhooks-allow-private',
      'deliver webhooks to http URLs and to loopback and private addresses too (default: only in the sandbox)',
    )
    .option(
      '--metrics-host <host>',
      'address of the Prometheus metrics listener (plain HTTP: keep it on a private interface)',
      DEFAULT_METRICS_HOST,
    )
    .option(
      '--metrics-port <port>',
      'port of the Prometheus metrics listener (0: no metrics listener)',
      integer(0, 65535),
      DEFAULT_METRICS_PORT,
    )
    .option(
      '--max-connections <n>',
      'connections this instance holds at once; more are closed as they arrive',
      integer(1, MAX_CONNECTIONS_LIMIT),
      DEFAULT_CONNECTION_LIMITS.maxConnections,
    )
    .option(
      '--proxy-protocol',
      'every connection starts with a PROXY protocol v2 header (HAProxy send-proxy-v2) naming the client',
    )
    .option(
      '--sim-chargers <n>',
      `sandbox only: run N simulated chargers (the real agent on simulated hardware) against it (default ${DEFAULT_SIM_CHARGERS}; 0: none)`,
      integer(0, 1_000),
    )
    .action(async (o, command: Command) => {
      const simChargers = simulatedChargers(o);
      // The chargers' requests would fill the terminal with request logs: unless asked, the sandbox logs warnings.
      const logLevel =
        simChargers > 0 && command.getOptionValueSource('logLevel') === 'default' ? 'warn' : o.logLevel;
      // Loaded here, not at the CLI's start: the admin commands never need the server.
      const { startServing } = await import('./serve.js');
      const running = await startServing({
        retention: {
          telemetryDays: o.retentionTelemetryDays,
          historyDays: o.retentionHistoryDays,
          rollupDays: o.retentionRollupDays,
        },
        dataDir: o.dataDir,
        keyFile: o.keyFile,
        database: o.database,
        redis: o.redis,
        instanceId: o.instanceId,
        host: o.host,
        port: o.port,
        env: o.env,
        tlsCert: o.tlsCert,
        tlsKey: o.tlsKey,
        selfSigned: o.selfSigned,
        registration: o.registration,
        tokenTtl: o.tokenTtl,
        addressLimit: addressLimitFor(
          o.addressLimit,
          command.getOptionValueSource('addressLimit') !== 'default',
          simChargers,
        ),
        logLevel,
        corsOrigins: o.corsOrigin,
        metricsHost: o.metricsHost,
        metricsPort: o.metricsPort,
        webhooksAllowPrivate: o.webhooksAllowPrivate,
        maxConnections: o.maxConnections,
        proxyProtocol: o.proxyProtocol,
      });
      let closing = false;
      let fleet: SandboxFleet | undefined;
      const shutdown = (signal: string) => {
        if (closing) return;
        closing = true;
        process.stderr.write(`charger-platform: ${signal}, closing\n`);
        // The chargers first, while the platform still answers their last reports and offline heartbeats.
        (fleet?.stop() ?? Promise.resolve())
          .then(() => running.close())
          .then(
            () => process.exit(0),
            (err: unknown) => {
              process.stderr.write(
                `charger-platform: closing failed: ${err instanceof Error ? err.message : String(err)}\n`,
              );
              process.exit(1);
            },
          );
      };
      process.on('SIGTERM', () => shutdown('SIGTERM'));
      process.on('SIGINT', () => shutdown('SIGINT'));
      let fleetStart: SandboxFleetStart | undefined;
      const updateKey = o.env === 'sandbox' ? ensureSandboxUpdateKey(o.dataDir) : undefined;
      if (simChargers > 0) {
        fleet = startSandboxFleet({
          count: simChargers,
          ...(updateKey ? { updateKey: updateKey.publicKey } : {}),
          platformUrl: localUrl(o.host, running.port),
          caPath: running.tls.certPath,
          dataDir: o.dataDir,
          onOutput: (line) => process.stderr.write(`[sim-fleet] ${line}\n`),
          onUnexpectedExit: (how) =>
            process.stderr.write(
              `warning: the simulated fleet ${how}; the platform keeps serving (restart the sandbox to start it again)\n`,
            ),
        });
        fleetStart = await fleet.started;
      }
      // The banner tells supervisors and tests that it serves: only once a signal would close it cleanly.
      if (!closing) process.stderr.write(`${banner(running, o.env, fleetStart, updateKey?.privateKey)}\n`);
    });
}

/**
 * `--sim-chargers`: the sandbox runs DEFAULT_SIM_CHARGERS unless told otherwise (DESIGN.md §16) — but not by
 * default on one of several instances (`--redis`), which would each run the same chargers: give it to one of
 * them. Production refuses the option whatever its value, before anything is written.
 */
/**
 * The sandbox's own fleet registers from this host: an address budget left at its default grows to 3 requests a
 * charger (a registration, a token and a retry), so `--sim-chargers 1000` is not throttled by its own platform.
 */
export function addressLimitFor(limit: number, chosen: boolean, simChargers: number): number {
  return chosen ? limit : Math.max(limit, 3 * simChargers);
}

function simulatedChargers(o: {
  env: string;
  simChargers?: number;
  redis?: string;
  registration?: string;
}): number {
  if (o.env !== 'sandbox') {
    if (o.simChargers !== undefined)
      throw new ConfigError(
        '--sim-chargers is for the sandbox (--env sandbox): production runs no simulated chargers',
      );
    return 0;
  }
  // The sandbox's own chargers have no certificates: under attested registration every one would be refused.
  if (o.registration === 'attested') {
    if (o.simChargers)
      throw new ConfigError(
        '--sim-chargers needs open or allowlist registration: the sandbox fleet has no client certificates ' +
          '(charger-sim fleet --enrolment-ca-cert/--enrolment-ca-key enrols a fleet under --registration attested)',
      );
    return 0;
  }
  return o.simChargers ?? (o.redis ? 0 : DEFAULT_SIM_CHARGERS);
}

/** The platform's address as a charger on this machine reaches it: a wildcard listener through the loopback. */
function localUrl(host: string, port: number): string {
  const local = host === '0.0.0.0' || host === '::' || host === '' ? '127.0.0.1' : host;
  return `https://${local.includes(':') ? `[${local}]` : local}:${port}`;
}

/** `--cors-origin`: repeatable, each value one origin or several separated by commas. */
function corsOrigins(value: string, previous: string[]): string[] {
  const given = value.split(',').filter((o) => o.trim() !== '');
  if (given.length === 0)
    throw new InvalidArgumentError('must name an origin such as https://app.example.com');
  try {
    return [...new Set([...previous, ...given.map(parseCorsOrigin)])];
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}

function banner(
  running: RunningPlatform,
  env: string,
  fleet: SandboxFleetStart | undefined,
  updateKey: string | undefined,
): string {
  const lines = [
    `charger-platform ${env} listening on ${running.url}`,
    `TLS certificate: ${running.tls.certPath}${running.tls.created ? ' (created, self-signed)' : ''}`,
  ];
  if (running.redis) lines.push(`instance ${running.instanceId}, sharing state through ${running.redis}`);
  if (running.metricsUrl) lines.push(`Prometheus metrics on ${running.metricsUrl}`);
  lines.push(`Dashboard: ${running.url}/dashboard (sign in with an API client's id and secret)`);
  if (fleet?.ok)
    lines.push(
      `Simulated fleet: ${fleet.count} chargers (${fleet.v2gChargers} V2G) running the real agent; --sim-chargers 0 turns it off`,
    );
  else if (fleet)
    lines.push(`Simulated fleet: not started (${fleet.reason}); the platform serves without it`);
  if (updateKey)
    lines.push(
      `Update key: ${updateKey} (the simulated fleet trusts it: npm run build:agent -- --sign-key ${updateKey} ...)`,
    );
  const sb = running.sandbox;
  if (sb) {
    lines.push(
      '',
      'Sandbox API client (read, write):',
      `  client_id:     ${sb.clientId}`,
      `  client_secret: ${sb.clientSecret}`,
      '',
      'Try it:',
      `  TOKEN=$(curl -s --cacert ${running.tls.certPath} ${running.url}/v1/operator/oauth/token \\`,
      `    -H 'content-type: application/json' \\`,
      `    -d '{"client_id":"${sb.clientId}","client_secret":"${sb.clientSecret}","grant_type":"client_credentials"}' \\`,
      `    | node -pe 'JSON.parse(require("fs").readFileSync(0)).access_token')`,
      `  curl -s --cacert ${running.tls.certPath} -H "authorization: Bearer $TOKEN" ${running.url}/v1/operator/devices/${sb.exampleDeviceId}`,
      `  curl -s --cacert ${running.tls.certPath} -H "authorization: Bearer $TOKEN" "${running.url}/v1/operator/charging-records?size=5"`,
    );
    // The seeded chargers are offline; the simulated ones are the ones that answer commands.
    if (fleet?.ok)
      lines.push(
        `  curl -s --cacert ${running.tls.certPath} -H "authorization: Bearer $TOKEN" "${running.url}/v1/operator/devices?status=online"`,
      );
    lines.push('');
  }
  return lines.join('\n');
}
