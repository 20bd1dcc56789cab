/**
 * The real A/B release layer (releases.ts) as the update runner takes it (update-install.ts `AgentReleases`),
 * bound to the layout the launcher named (`CHARGER_AGENT_PREFIX`). An agent started otherwise (not through
 * `DIR/bin/charger-agent`) has none, and refuses agent updates with that reason.
 */
import path from 'node:path';
import { parseBundleManifest } from '../core/release-checks.js';
import { readJsonFile } from './release-files.js';
import {
  clearRollback,
  commitTrial,
  type ReleaseLayout,
  readRollback,
  readTrial,
  releaseLayoutFromEnv,
  stageRelease,
} from './releases.js';
import type { AgentUpdateOptions } from './update-wiring.js';

/** The build target of the release running from `layout` (its package.json), for an agent artifact's target. */
function runningTarget(layout: ReleaseLayout): string | undefined {
  const read = readJsonFile(path.join(layout.prefix, 'current', 'package.json'));
  if (read === undefined || read === 'malformed') return undefined;
  const manifest = parseBundleManifest(read.value);
  return 'error' in manifest || manifest.target === null ? undefined : manifest.target.name;
}

/**
 * What `startAgent` needs for agent updates when it runs under the launcher; `restart` stops the agent and exits
 * with the launcher's restart code.
 */
export function agentUpdatesFromEnv(
  restart: () => void,
  env: NodeJS.ProcessEnv = process.env,
): AgentUpdateOptions | undefined {
  const layout = releaseLayoutFromEnv(env);
  if (!layout) return undefined;
  const target = runningTarget(layout);
  return {
    releases: {
      stage: (input) =>
        stageRelease(layout, {
          archive: input.archive,
          version: input.version,
          snapshot: input.snapshot,
          trial: { update_id: input.updateId, command_id: input.commandId },
          healthSeconds: input.healthSeconds,
          now: input.now,
        }),
      readTrial: () => readTrial(layout),
      commitTrial: () => commitTrial(layout),
      readRollback: () => readRollback(layout),
      clearRollback: () => clearRollback(layout),
    },
    ...(target !== undefined ? { agentTarget: target } : {}),
    requestRestart: restart,
  };
}
