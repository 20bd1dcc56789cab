import type { Command } from 'commander';
import type { Scope } from '../../shared/index.js';
import { toTimestamp } from '../../shared/index.js';
import { CLIENT_ROTATION_GRACE_SECONDS } from '../domain/client-credentials.js';
import { createClient, rotateClientSecret } from '../services/client-secrets.js';
import type { DatabaseChoice } from '../storage/backends.js';
import type { PlatformKeys } from '../storage/platform-keys.js';
import type { ClientSummary, Store } from '../storage/store.js';
import { databaseOption, integer } from './cli-options.js';

/**
 * `charger-platform clients ...` (DESIGN.md §11, §18): create, list, revoke, rotate-secret, require-signature.
 * A running `serve` on the same data directory (or every instance on the same PostgreSQL) notices a change
 * within a couple of seconds: SQLite's `data_version`, PostgreSQL's NOTIFY (principal-directory.ts).
 */

/** Opens the deployment for one admin command (cli.ts); refuses a directory without one. */
export type WithStore = <T>(
  o: { dataDir: string; database: DatabaseChoice },
  fn: (store: Store, keys: PlatformKeys) => Promise<T>,
) => Promise<T>;

/** A refusal the operator can act on: printed as one sentence, exit code 1 (cli.ts). */
class ClientsError extends Error {}

/** The longest grace `rotate-secret` takes: 30 days, far beyond any token's life. */
const MAX_GRACE_SECONDS = 30 * 86_400;

function print(json: boolean | undefined, data: unknown, human: string): void {
  process.stdout.write(json ? `${JSON.stringify(data)}\n` : `${human}\n`);
}

/** The `clients list --json` item: no secret, ever. */
function listItem(c: ClientSummary) {
  return {
    client_id: c.client_id,
    operator_ids: c.operator_ids,
    scopes: c.scopes,
    status: c.status,
    created_at: toTimestamp(c.created_ms),
  };
}

function table(items: ReturnType<typeof listItem>[]): string {
  if (items.length === 0) return '(no clients)';
  const rows = [
    ['CLIENT', 'STATUS', 'SCOPES', 'OPERATORS', 'CREATED'],
    ...items.map((c) => [c.client_id, c.status, c.scopes.join(','), c.operator_ids.join(','), c.created_at]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

function parseList(value: string): string[] {
  return [
    ...new Set(
      value
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean),
    ),
  ];
}

export function addClientsCommands(program: Command, withStore: WithStore): void {
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
      const operatorIds = parseList(String(o.operator));
      const scopes = [
        ...new Set(
          String(o.scopes)
            .split(',')
            .map((x) => x.trim()),
        ),
      ];
      if (scopes.length === 0 || scopes.some((x) => x !== 'read' && x !== 'write')) {
        throw new ClientsError('--scopes must be read, write or read,write');
      }
      if (operatorIds.length === 0) throw new ClientsError('--operator needs at least one operator id');
      const { client, secret } = await withStore(o, async (s, keys) => {
        for (const id of operatorIds)
          if (!(await s.getOperator(id))) throw new ClientsError(`no operator ${id}`);
        const created = await createClient(
          { store: s, keys },
          { operator_ids: operatorIds, scopes: scopes as Scope[] },
        );
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
    .command('list')
    .description('every API client, with its operators, scopes and status (never a secret)')
    .requiredOption('--data-dir <dir>')
    .addOption(databaseOption())
    .option('--json', 'machine-readable output')
    .action(async (o) => {
      const items = (await withStore(o, (s) => s.listClients())).map(listItem);
      print(o.json, items, table(items));
    });

  clients
    .command('revoke')
    .description(
      'refuse the client’s secret and every token it holds, for good; disable its webhook endpoints',
    )
    .requiredOption('--data-dir <dir>')
    .addOption(databaseOption())
    .requiredOption('--client <id>')
    .action(async (o) => {
      const outcome = await withStore(o, (s) => s.revokeClient(o.client));
      if (outcome === 'unknown') throw new ClientsError(`no client ${o.client}`);
      process.stdout.write(
        outcome === 'revoked'
          ? `client ${o.client} revoked: its secret and tokens are refused and its webhook endpoints disabled\n`
          : `client ${o.client} was already revoked: nothing changed\n`,
      );
    });

  clients
    .command('rotate-secret')
    .description('give the client a new secret; the old one and its tokens work until the grace is over')
    .requiredOption('--data-dir <dir>')
    .addOption(databaseOption())
    .requiredOption('--client <id>')
    .option(
      '--grace <seconds>',
      'how long the old secret and its tokens keep working (0: not at all)',
      integer(0, MAX_GRACE_SECONDS),
      CLIENT_ROTATION_GRACE_SECONDS,
    )
    .option('--json', 'machine-readable output')
    .action(async (o) => {
      const grace = Number(o.grace);
      const rotation = await withStore(o, (s, keys) =>
        rotateClientSecret({ store: s, keys }, o.client, grace * 1000),
      );
      if (rotation.outcome !== 'rotated')
        throw new ClientsError(
          rotation.outcome === 'unknown'
            ? `no client ${o.client}`
            : `client ${o.client} is revoked: a revoked client gets no new secret`,
        );
      const out = { client_id: o.client as string, client_secret: rotation.secret };
      const until =
        grace === 0
          ? 'the old secret and its tokens are refused now'
          : `the old secret and its tokens work for ${grace} s more`;
      print(o.json, out, `client_id:     ${out.client_id}\nclient_secret: ${out.client_secret}\n${until}`);
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
      if (!done) throw new ClientsError(`no client ${o.client}`);
      process.stdout.write(`client ${o.client} ${o.off ? 'may sign' : 'must sign'} write requests\n`);
    });
}
