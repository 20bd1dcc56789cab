#!/usr/bin/env node
/**
 * `charger-sim` (DESIGN.md §11):
 *
 *   charger-sim fleet --platform-url URL [--ca FILE] --count N [--duration SECONDS] [--data-dir DIR] [--json]
 *                     [--enrolment-ca-cert FILE --enrolment-ca-key FILE]
 *   charger-sim enrolment-ca --cert FILE --key FILE [--name NAME]     (a test CA for attested registration)
 *
 * plus the optional tuning flags of docs/simulators.md. Exit codes: 0 no errors, 1 the run had errors,
 * 2 usage error.
 */
import './supported-node.js';
import { Command, CommanderError } from 'commander';
import { AGENT_VERSION } from '../agent/version.js';
import { addEnrolmentCaCommand } from './fleet/enrolment-ca-cli.js';
import { addFleetCommand, EXIT_ERRORS, EXIT_OK, EXIT_USAGE } from './fleet/fleet-cli.js';

let exitCode = EXIT_OK;
const program = new Command('charger-sim')
  .description('Simulated chargers for the charger platform')
  .version(AGENT_VERSION)
  .exitOverride();
addFleetCommand(program, (code) => {
  exitCode = code;
});
addEnrolmentCaCommand(program, (code) => {
  exitCode = code;
});

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) process.exit(error.exitCode === 0 ? EXIT_OK : EXIT_USAGE);
  process.stderr.write(`charger-sim: ${(error as Error).stack ?? (error as Error).message}\n`);
  process.exit(EXIT_ERRORS);
}
// Every charger is stopped and the pool closed; exit without waiting for stray timers of the simulation.
process.exit(exitCode);
