import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { checkEnrolmentCa } from '../domain/attestation.js';
import type { DatabaseChoice } from '../storage/backends.js';
import type { EnrolmentRow, Store } from '../storage/store.js';
import { databaseOption } from './cli-options.js';

/**
 * `charger-platform enrolments add|list|revoke` (DESIGN.md §18): the OEM CAs whose charger certificates let
 * chargers register under `serve --registration attested`, each for one operator and optionally one site.
 */

/** How cli.ts opens the deployment for one admin command. */
export type WithStore = <T>(
  o: { dataDir: string; database: DatabaseChoice },
  fn: (store: Store) => Promise<T>,
) => Promise<T>;

class EnrolmentError extends Error {}

/** What `add` answers and `list --json` lists: never the PEM, which the CA file already holds. */
function summary(g: EnrolmentRow) {
  return {
    enrolment_id: g.enrolment_id,
    operator_id: g.operator_id,
    site_id: g.site_id,
    name: g.name,
    ca_fingerprint: g.ca_fingerprint,
  };
}

async function readCa(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    throw new EnrolmentError(
      `cannot read --ca ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
    );
  }
}

async function addEnrolment(
  store: Store,
  o: { operator: string; site?: string; name?: string },
  ca: { pem: string; fingerprint: string; commonName: string | undefined },
): Promise<EnrolmentRow> {
  if (!(await store.getOperator(o.operator))) throw new EnrolmentError(`no operator ${o.operator}`);
  if (o.site !== undefined) {
    const site = await store.getSite(o.site);
    if (!site) throw new EnrolmentError(`no site ${o.site}`);
    if (site.operator_id !== o.operator)
      throw new EnrolmentError(`site ${o.site} belongs to another operator, not ${o.operator}`);
  }
  const created = await store.createEnrolment({
    operator_id: o.operator,
    site_id: o.site ?? null,
    name: o.name ?? ca.commonName ?? ca.fingerprint,
    ca_pem: ca.pem,
    ca_fingerprint: ca.fingerprint,
  });
  if (created === 'duplicate_ca') {
    throw new EnrolmentError(
      `an active enrolment group already has this CA (${ca.fingerprint}); revoke it first or use another CA`,
    );
  }
  return created;
}

export function addEnrolmentsCommand(program: Command, withStore: WithStore): void {
  const enrolments = program
    .command('enrolments')
    .description(
      'Manage enrolment groups: manufacturer CAs whose chargers register under --registration attested',
    );
  enrolments
    .command('add')
    .description('trust a CA to vouch for chargers of an operator (and place them in a site at once)')
    .requiredOption('--data-dir <dir>')
    .addOption(databaseOption())
    .requiredOption('--operator <id>', 'the operator the chargers join')
    .requiredOption('--ca <file>', 'the CA certificate (PEM, basicConstraints CA:TRUE)')
    .option('--site <id>', 'a site of that operator the chargers are placed in when they register')
    .option('--name <name>', "a name for the group (default: the CA's common name)")
    .option('--json', 'machine-readable output')
    .action(async (o) => {
      const name = o.name === undefined ? undefined : String(o.name).trim();
      if (name === '') throw new EnrolmentError('--name must not be empty');
      const checked = checkEnrolmentCa(await readCa(o.ca));
      if (!checked.ok) throw new EnrolmentError(`--ca ${o.ca} ${checked.error}`);
      const group = await withStore(o, (s) =>
        addEnrolment(s, { operator: o.operator, site: o.site, ...(name ? { name } : {}) }, checked),
      );
      const out = summary(group);
      process.stdout.write(
        o.json
          ? `${JSON.stringify(out)}\n`
          : `created enrolment group ${out.enrolment_id} (${out.name}) for operator ${out.operator_id}` +
              `${out.site_id ? `, site ${out.site_id}` : ''}\nCA fingerprint (SHA-256): ${out.ca_fingerprint}\n`,
      );
    });
  enrolments
    .command('list')
    .description('list enrolment groups, active and revoked')
    .requiredOption('--data-dir <dir>')
    .addOption(databaseOption())
    .option('--json', 'machine-readable output')
    .action(async (o) => {
      const groups = await withStore(o, (s) => s.listEnrolments());
      if (o.json) {
        process.stdout.write(`${JSON.stringify(groups.map((g) => ({ ...summary(g), status: g.status })))}\n`);
        return;
      }
      const lines = groups.map((g) =>
        [g.enrolment_id, g.status, g.operator_id, g.site_id ?? '-', g.name, g.ca_fingerprint].join('\t'),
      );
      const header = 'ENROLMENT\tSTATUS\tOPERATOR\tSITE\tNAME\tCA FINGERPRINT (SHA-256)';
      process.stdout.write(lines.length ? `${[header, ...lines].join('\n')}\n` : '(no enrolment groups)\n');
    });
  enrolments
    .command('revoke')
    .description('stop a group vouching for chargers (registered chargers keep their credentials)')
    .requiredOption('--data-dir <dir>')
    .addOption(databaseOption())
    .requiredOption('--enrolment <id>')
    .action(async (o) => {
      const done = await withStore(o, (s) => s.revokeEnrolment(o.enrolment));
      if (!done) throw new EnrolmentError(`no enrolment group ${o.enrolment}`);
      process.stdout.write(`enrolment group ${o.enrolment} revoked: its certificates register no charger\n`);
    });
}
