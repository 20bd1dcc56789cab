#!/usr/bin/env node
// Placeholder until the fleet issue lands: the bin exists so scripts can rely on its name.
process.stderr.write('charger-sim: not implemented yet\n');
process.exit(2);
