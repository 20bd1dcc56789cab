// @ts-check
/**
 * What `build:agent` (scripts/build-agent.mjs) does to the agent bundle for the charger's memory only, each worth
 * its figure in docs/benchmarks.md, "Agent footprint": an esbuild plugin that leaves `node:http2` out, and the
 * writer of esbuild's output that keeps every source in Latin-1 and takes off its indentation.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

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
/** Writes esbuild's output files, every JavaScript one in Latin-1 characters only and without indentation. */
export function writeCompactSources(/** @type {import('esbuild').OutputFile[]} */ files) {
  for (const file of files) {
    const text = /\.m?js$/.test(file.path)
      ? withoutIndentation(
          file.text.replace(/[\u0100-\u{10ffff}]/gu, (ch) => ASCII_SPELLING.get(ch) ?? '?'),
          file.path,
        )
      : file.text;
    mkdirSync(path.dirname(file.path), { recursive: true });
    writeFileSync(file.path, text);
  }
}

/**
 * The source with the indentation taken off every line, except where a line begins inside a template literal (or
 * a string, should esbuild ever print one over several lines), whose text it is part of. esbuild indents by two
 * spaces a level, 16% of the agent's source, which V8 holds for as long as the module lives (0.5 MiB RSS,
 * docs/benchmarks.md, "Agent footprint"). Every line stays where it was: a stack trace's line numbers still point
 * into the shipped file, only its columns move. Checked here: every literal reads the same after as before.
 */
export function withoutIndentation(/** @type {string} */ text, /** @type {string} */ fileName) {
  const before = literalsOf(text, fileName);
  let out = '';
  let lineStart = 0;
  let next = 0; // the first literal that may still contain a line start
  while (lineStart < text.length) {
    const newline = text.indexOf('\n', lineStart);
    const lineEnd = newline === -1 ? text.length : newline + 1;
    while (next < before.length && (before[next]?.end ?? 0) <= lineStart) next++;
    const inside = next < before.length && (before[next]?.start ?? Number.POSITIVE_INFINITY) < lineStart;
    const line = text.slice(lineStart, lineEnd);
    out += inside ? line : line.replace(/^[ \t]+/, '');
    lineStart = lineEnd;
  }
  const after = literalsOf(out, fileName);
  if (after.length !== before.length || after.some((literal, i) => literal.text !== before[i]?.text)) {
    throw new Error(`taking the indentation off ${fileName} changed a literal`);
  }
  return out;
}

const LITERAL_KINDS = new Set([
  ts.SyntaxKind.NoSubstitutionTemplateLiteral,
  ts.SyntaxKind.TemplateHead,
  ts.SyntaxKind.TemplateMiddle,
  ts.SyntaxKind.TemplateTail,
  ts.SyntaxKind.StringLiteral,
]);

/** The template and string literals of a script, in source order, with their spans and text. */
function literalsOf(/** @type {string} */ text, /** @type {string} */ fileName) {
  const file = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.JS);
  // @ts-expect-error parseDiagnostics is internal, and the only way to know the parse went right
  const problems = /** @type {readonly ts.Diagnostic[]} */ (file.parseDiagnostics ?? []);
  if (problems.length > 0) throw new Error(`${fileName} does not parse: ${problems[0]?.messageText}`);
  /** @type {{ start: number; end: number; text: string }[]} */
  const found = [];
  const visit = (/** @type {ts.Node} */ node) => {
    if (LITERAL_KINDS.has(node.kind)) {
      const start = node.getStart(file);
      found.push({ start, end: node.end, text: text.slice(start, node.end) });
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found.sort((a, b) => a.start - b.start);
}
