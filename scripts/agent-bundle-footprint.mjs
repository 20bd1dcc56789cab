// @ts-check
/**
 * What `build:agent` (scripts/build-agent.mjs) does to the agent bundle for the charger's memory only, each worth
 * its figure in docs/benchmarks.md, "Agent footprint": an esbuild plugin that leaves `node:http2` out, and the
 * writer of esbuild's output that keeps every source in Latin-1.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * undici's HTTP/2 client loads `node:http2` when undici loads, and falls back to no HTTP/2 where Node has none
 * (lib/dispatcher/client-h2.js). The agent speaks HTTP/1.1 only (platform-client.ts never sets `allowH2`), so the
 * bundle takes that fallback: `node:http2` and everything it loads stay out of the charger's memory (2 MiB RSS,
 * docs/benchmarks.md, "Agent footprint").
 */
export const withoutHttp2 = {
  name: 'without-http2',
  /** @param {import('esbuild').PluginBuild} build */
  setup(build) {
    build.onResolve({ filter: /^(node:)?http2$/ }, (args) =>
      /[\\/]undici[\\/]lib[\\/]dispatcher[\\/]client-h2\.js$/.test(args.importer)
        ? { path: 'http2', namespace: 'without-http2' }
        : undefined,
    );
    build.onLoad({ filter: /.*/, namespace: 'without-http2' }, () => ({
      contents: "throw new Error('HTTP/2 is not part of the charger agent');",
      loader: 'js',
    }));
  },
};

/**
 * V8 keeps a module's source in memory for as long as the module lives, at one byte per character only when every
 * character fits in Latin-1: one em dash in a comment esbuild keeps doubles the resident source of its chunk
 * (1.1 MiB RSS for the agent's, docs/benchmarks.md, "Agent footprint"). esbuild already escapes every non-ASCII
 * character of code (its default charset), so what is left is in comments, where an ASCII spelling serves.
 */
const ASCII_SPELLING = new Map([
  ['\u2014', '--'],
  ['\u2013', '-'],
  ['\u2018', "'"],
  ['\u2019', "'"],
  ['\u201c', '"'],
  ['\u201d', '"'],
  ['\u2026', '...'],
  ['\u2192', '->'],
  ['\u2264', '<='],
  ['\u2265', '>='],
  ['\u00d7', 'x'],
]);
/** Writes esbuild's output files, every JavaScript one in Latin-1 characters only. */
export function writeOneByteSources(/** @type {import('esbuild').OutputFile[]} */ files) {
  for (const file of files) {
    const text = /\.m?js$/.test(file.path)
      ? file.text.replace(/[\u0100-\u{10ffff}]/gu, (ch) => ASCII_SPELLING.get(ch) ?? '?')
      : file.text;
    mkdirSync(path.dirname(file.path), { recursive: true });
    writeFileSync(file.path, text);
  }
}
