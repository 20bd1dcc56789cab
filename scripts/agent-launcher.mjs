// @ts-check
/**
 * The A/B launcher (agent/updates/release-launcher.ts, DESIGN.md §19) as one CommonJS file with no imports but
 * Node's built-ins: `charger-agent install` copies it to PREFIX/bin/charger-agent, and updates never replace it.
 * Used by build-agent.mjs (it goes into every bundle as charger-agent-launcher.cjs) and by the tests.
 */
import path from 'node:path';
import * as esbuild from 'esbuild';

/**
 * @param {string} root the checkout
 * @param {string} outfile where the launcher goes
 */
export async function buildLauncher(root, outfile) {
  const built = await esbuild.build({
    absWorkingDir: root,
    entryPoints: [path.join(root, 'agent', 'updates', 'release-launcher.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node22',
    minify: false,
    legalComments: 'none',
    metafile: true,
    logLevel: 'warning',
    banner: {
      js: '#!/usr/bin/env node\n// charger-agent launcher (A/B releases): see oem-guide.md, "A/B agent releases". Never replaced by updates.',
    },
  });
  // Node built-ins only, and nothing but the agent's own modules: it must run on any future release's Node.
  for (const input of Object.keys(built.metafile.inputs)) {
    if (!input.startsWith('agent/')) throw new Error(`the launcher must not bundle ${input}`);
  }
  return built;
}
