/**
 * The Node.js lines every program of the project runs on (DESIGN.md §17): 22 and 24. Node 20 reached end of
 * life in April 2026, and better-sqlite3 13 (the N-API build the project needs: 12.x aborts on Node 24)
 * segfaults on it at the first statement — so an entry point checks the line before anything opens a database,
 * and a wrong Node gets a sentence instead of a crash.
 *
 * No imports: this module must run on any Node, including the ones it refuses.
 */

/** The LTS lines the project is tested on (CI runs both). */
export const SUPPORTED_NODE_LINES: readonly number[] = [22, 24];
/** The oldest major that runs at all; `engines.node` in package.json says the same (`>=22`). */
export const MINIMUM_NODE_MAJOR = 22;

export type NodeSupport =
  | { readonly ok: true; readonly warning?: string }
  | { readonly ok: false; readonly message: string };

/** Pure: what to do on Node `version` (e.g. `20.20.2`, as `process.versions.node` gives it). */
export function nodeSupport(version: string, program: string): NodeSupport {
  const major = Number.parseInt(version, 10);
  const lines = SUPPORTED_NODE_LINES.join(' and ');
  if (!Number.isInteger(major) || major < MINIMUM_NODE_MAJOR) {
    return {
      ok: false,
      message:
        `${program}: Node.js ${version} is not supported; it needs Node.js ${MINIMUM_NODE_MAJOR} or newer (${lines} are the tested lines). ` +
        "Install one; in the project's checkout, `npm run` and `npx` use the Node 24 that `npm ci` installs.",
    };
  }
  if (!SUPPORTED_NODE_LINES.includes(major)) {
    return {
      ok: true,
      warning: `${program}: Node.js ${version} is not a tested line (${lines} are); running anyway.`,
    };
  }
  return { ok: true };
}

/** The entry points' guard: refuse (exit 1, a sentence on stderr) or warn, before any other module runs. */
export function requireSupportedNode(program: string): void {
  const support = nodeSupport(process.versions.node, program);
  if (!support.ok) {
    process.stderr.write(`${support.message}\n`);
    process.exit(1);
  }
  if (support.warning !== undefined) process.stderr.write(`${support.warning}\n`);
}
