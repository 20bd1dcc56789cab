// @ts-check
/**
 * Stages or commits an A/B release from a process of its own, so that a test can SIGKILL it at a step
 * (CHARGER_AGENT_TEST_KILL_AT, agent/updates/release-files.ts), as the update runner would do it in the agent:
 *
 *   node release-harness.mjs stage PREFIX ARCHIVE VERSION DATA_DIR HEALTH_SECONDS
 *   node release-harness.mjs commit PREFIX
 *
 * It runs the BUILT library (dist/, `tsc -p tsconfig.build.json` first). The store snapshot is better-sqlite3's
 * backup from a connection of its own to DATA_DIR/agent.sqlite. Prints the result as JSON.
 */
import path from 'node:path';
import Database from 'better-sqlite3';
import { commitTrial, stageRelease } from '../../dist/agent/updates/releases.js';

const [command, prefix, ...rest] = process.argv.slice(2);
const layout = { prefix: path.resolve(prefix ?? '.') };

if (command === 'stage') {
  const [archive, version, dataDir, healthSeconds] = rest;
  const db = new Database(path.join(dataDir ?? '.', 'agent.sqlite'));
  const result = await stageRelease(layout, {
    archive: archive ?? '',
    version: version ?? '',
    snapshot: async (toFile) => {
      await db.backup(toFile);
    },
    trial: { update_id: 'upd_harness', command_id: 'cmd_harness' },
    healthSeconds: Number(healthSeconds),
    now: Date.now(),
  });
  db.close();
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(result.ok ? 0 : 1);
} else if (command === 'commit') {
  await commitTrial(layout);
  process.stdout.write('{"ok":true}\n');
} else {
  process.stderr.write('usage: release-harness.mjs stage|commit PREFIX ...\n');
  process.exit(2);
}
