#!/usr/bin/env node
import './supported-node.js';
import { Command, InvalidArgumentError, Option } from 'commander';
import { isIanaTimezone, type Scope } from '../shared/index.js';
import { parseCorsOrigin } from './cors.js';
import { loadOrCreatePlatformKeys } from './platform-keys.js';
import {
  ConfigError,
  DEFAULT_METRICS_HOST,
  DEFAULT_METRICS_PORT,
  REDIS_ENV,
  type RunningPlatform,
  startServing,
} from './serve.js';
import {
  DATABASE_ENV,
  type DatabaseChoice,
  describeChoice,
  hasDeployment,
  openStore,
  parseDatabaseChoice,
} from './storage/open-store.js';
import { DEFAULT_RETENTION } from './storage/retention-policy.js';
import { asDataDirError, ensureWritableDataDir } from './storage/storage-faults.js';
import type { Store } from './storage/store.js';

/** Admin and serve commands (DESIGN.md §11). Admin commands open the data directory directly. */

class UserError extends Error {}

function integer(min: number, max: number) {
  return (value: string): number => {
    if (!/^\d+$/.test(value)) throw new InvalidArgumentError('must be a whole number');
    const n = Number(value);
    if (n < min || n > max) throw new InvalidArgumentError(`must be between ${min} and ${max}`);
    return n;
  };
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

function print(json: boolean | undefined, data: unknown, human: string): void {
  process.stdout.write(json ? `${JSON.stringify(data)}\n` : `${human}\n`);
}

/** `--database`, on `serve` and every admin command (DESIGN.md §11, §12). */
function databaseOption(): Option {
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

/**
 * Opens the deployment in `dataDir` for one admin command. Only `create` (`operators create`, the first step of a
 * set-up) may start a new deployment there; every other command refuses a directory without one, so that a
 * mistyped `--data-dir` says so instead of answering from (and leaving behind) an empty deployment.
 */
async function withStore<T>(
  o: { dataDir: string; database: DatabaseChoice },
  fn: (store: Store) => Promise<T>,
  { create = false }: { create?: boolean } = {},
): Promise<T> {
  const { dataDir, database } = o;
  if (!create && !hasDeployment(database, dataDir)) {
    const missing = database.kind === 'sqlite' ? describeChoice(database, dataDir) : 'keys/platform.key';
    throw new UserError(
      `no platform deployment in ${dataDir} (no ${missing}): check --data-dir; ` +
        "'operators create' or 'serve' creates one",
    );
  }
  ensureWritableDataDir(dataDir);
  const store = await openStore(database, dataDir, loadOrCreatePlatformKeys(dataDir)).catch(
    (err: unknown) => {
      throw asDataDirError(dataDir, err);
    },
  );
  try {
    return await fn(store);
  } catch (err) {
    // A full or read-only disk: say which directory and what to do, not SQLite's bare message.
    throw asDataDirError(dataDir, err);
  } finally {
    await store.close();
  }
}

function banner(running: RunningPlatform, env: string): string {
  const lines = [
    `charger-platform ${env} listening on ${running.url}`,
    `TLS certificate: ${running.tls.certPath}${running.tls.created ? ' (created, self-signed)' : ''}`,
  ];
  if (running.redis) lines.push(`instance ${running.instanceId}, sharing state through ${running.redis}`);
  if (running.metricsUrl) lines.push(`Prometheus metrics on ${running.metricsUrl}`);
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
      '',
    );
  }
  return lines.join('\n');
}

const program = new Command('charger-platform')
  .description('Charger platform integration API server and its admin commands')
  .showHelpAfterError();

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
      'charger registration policy (default: open in sandbox, allowlist in production)',
    ).choices(['open', 'allowlist']),
  )
  .option('--token-ttl <seconds>', 'access token lifetime', integer(1, 30 * 86_400), 86_400)
  .addOption(
    new Option('--log-level <level>', 'log level')
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
  .action(async (o) => {
    const running = await startServing({
      retention: {
        telemetryDays: o.retentionTelemetryDays,
        historyDays: o.retentionHistoryDays,
        rollupDays: o.retentionRollupDays,
      },
      dataDir: o.dataDir,
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
      logLevel: o.logLevel,
      corsOrigins: o.corsOrigin,
      metricsHost: o.metricsHost,
      metricsPort: o.metricsPort,
      webhooksAllowPrivate: o.webhooksAllowPrivate,
    });
    let closing = false;
    const shutdown = (signal: string) => {
      if (closing) return;
      closing = true;
      process.stderr.write(`charger-platform: ${signal}, closing\n`);
      running.close().then(
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
    // The banner tells supervisors and tests that it serves: only once a signal would close it cleanly.
    process.stderr.write(`${banner(running, o.env)}\n`);
  });

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

const clients = program.command('clients').description('Manage API clients');
clients
  .command('create')
  .requiredOption('--data-dir <dir>')
  .addOption(databaseOption())
  .requiredOption('--operator <ids>', 'operator id, or several separated by commas')
  .requiredOption('--scopes <scopes>', 'read, write or read,write')
  .option('--require-signature', 'the client must sign every write request (HMAC, X-Signature)')
  .option('--json', 'machine-readable output')
  .action(async (o) => {
    const operatorIds = String(o.operator)
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean);
    const scopes = [
      ...new Set(
        String(o.scopes)
          .split(',')
          .map((x) => x.trim()),
      ),
    ];
    if (scopes.length === 0 || scopes.some((x) => x !== 'read' && x !== 'write')) {
      throw new UserError('--scopes must be read, write or read,write');
    }
    if (operatorIds.length === 0) throw new UserError('--operator needs at least one operator id');
    const { client, secret } = await withStore(o, async (s) => {
      for (const id of operatorIds) if (!(await s.getOperator(id))) throw new UserError(`no operator ${id}`);
      const created = await s.createClient({ operator_ids: operatorIds, scopes: scopes as Scope[] });
      if (o.requireSignature) await s.setRequireSignature('client', created.client.client_id, true);
      return created;
    });
    const out = { client_id: client.client_id, client_secret: secret, scopes: client.scopes };
    print(
      o.json,
      out,
      `client_id:     ${out.client_id}\nclient_secret: ${secret}\nscopes:        ${out.scopes.join(',')}`,
    );
  });

clients
  .command('require-signature')
  .description('require (or with --off, stop requiring) HMAC signatures on the client’s write requests')
  .requiredOption('--data-dir <dir>')
  .addOption(databaseOption())
  .requiredOption('--client <id>')
  .option('--off', 'signatures become optional again')
  .action(async (o) => {
    const done = await withStore(o, (s) => s.setRequireSignature('client', o.client, !o.off));
    if (!done) throw new UserError(`no client ${o.client}`);
    process.stdout.write(`client ${o.client} ${o.off ? 'may sign' : 'must sign'} write requests\n`);
  });

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

program.parseAsync(process.argv).catch((err: unknown) => {
  if (err instanceof UserError || err instanceof ConfigError) {
    process.stderr.write(`charger-platform: ${err.message}\n`);
    process.exit(1);
  }
  process.stderr.write(`charger-platform: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
