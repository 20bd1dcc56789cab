import { writeFileSync } from 'node:fs';
import type { Command } from 'commander';
import { makeTestEnrolmentCa } from './charger-certificates.js';

/**
 * `charger-sim enrolment-ca --cert FILE --key FILE [--name NAME]`: a test enrolment CA for a simulated fleet
 * under `--registration attested` (DESIGN.md §18). Neither file may exist yet: an existing CA (a real one above
 * all) is never overwritten. The key is written 0600.
 */
export function addEnrolmentCaCommand(program: Command, onExit: (code: number) => void): void {
  program
    .command('enrolment-ca')
    .description('make a test enrolment CA for charger-sim fleet --enrolment-ca-cert/--enrolment-ca-key')
    .requiredOption('--cert <file>', 'where to write the CA certificate (PEM); must not exist')
    .requiredOption('--key <file>', 'where to write its private key (PEM, 0600); must not exist')
    .option('--name <name>', 'the CA’s common name', 'charger-sim test enrolment CA')
    .action(async (o: { cert: string; key: string; name: string }) => {
      const ca = await makeTestEnrolmentCa(o.name);
      try {
        // `wx`: refuse to replace anything already there.
        writeFileSync(o.key, ca.key, { flag: 'wx', mode: 0o600 });
      } catch (error) {
        process.stderr.write(`charger-sim enrolment-ca: ${o.key}: ${(error as Error).message}\n`);
        onExit(2);
        return;
      }
      try {
        writeFileSync(o.cert, ca.cert, { flag: 'wx', mode: 0o644 });
      } catch (error) {
        process.stderr.write(`charger-sim enrolment-ca: ${o.cert}: ${(error as Error).message}\n`);
        onExit(2);
        return;
      }
      process.stderr.write(
        `charger-sim enrolment-ca: wrote ${o.cert} and ${o.key}; enrol it with ` +
          `'charger-platform enrolments add --operator ID --ca ${o.cert} [--site SITE_ID]'\n`,
      );
      onExit(0);
    });
}
