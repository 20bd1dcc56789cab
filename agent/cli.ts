#!/usr/bin/env node
// Placeholder until the agent issue lands: the bin exists so scripts can rely on its name.
process.stderr.write('charger-agent: not implemented yet\n');
process.exit(2);
