#!/usr/bin/env node
// @ts-check
/**
 * Builds the operator dashboard (dashboard/, DESIGN.md §16) into dist/dashboard/: index.html, dashboard.js (the
 * app, Preact and uPlot bundled by esbuild) and dashboard.css. Run by `npm run build`, so the README's two commands
 * build it. The platform serves these files itself (`platform/dashboard-page.ts`); nothing is fetched from
 * elsewhere, and the build fails if anything outside dashboard/, shared/ and the two libraries enters the bundle.
 *
 * A plain .mjs file so that it runs with no compile step: build tooling, like scripts/build-agent.mjs.
 */
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const OUT = path.join(ROOT, 'dist', 'dashboard');
const ALLOWED = [/^dashboard\//, /^shared\//, /^node_modules\/preact\//, /^node_modules\/uplot\//];

rmSync(OUT, { recursive: true, force: true });
mkdirSync(OUT, { recursive: true });
const result = await esbuild.build({
  absWorkingDir: ROOT,
  entryPoints: { dashboard: 'dashboard/src/main.tsx' },
  outdir: OUT,
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['chrome111', 'firefox114', 'safari16.4'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  sourcemap: 'linked',
  metafile: true,
  legalComments: 'linked',
  logLevel: 'warning',
});
const strays = Object.keys(result.metafile.inputs).filter((f) => !ALLOWED.some((a) => a.test(f)));
if (strays.length > 0) {
  console.error(`build-dashboard: unexpected inputs in the bundle:\n  ${strays.join('\n  ')}`);
  process.exit(1);
}
copyFileSync(path.join(ROOT, 'dashboard', 'index.html'), path.join(OUT, 'index.html'));
const sizes = Object.entries(result.metafile.outputs)
  .filter(([f]) => !f.endsWith('.map'))
  .map(([f, o]) => `${path.basename(f)} ${(o.bytes / 1024).toFixed(1)} KiB`);
console.log(`dashboard: ${sizes.join(', ')}`);
