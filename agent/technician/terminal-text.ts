/**
 * Text from the platform (reasons, ids, error messages) is printed on a technician's terminal by `status`,
 * `diag`, `schedules` and `commands` (DESIGN.md §18). A control character in it would be obeyed by the terminal:
 * ESC or CSI sequences can clear the screen, rewrite earlier lines or set the window title. So every printed
 * line is shown with its control characters as visible escapes. Pure functions.
 */

/** C0 (tab and newline included), DEL, C1; and the Unicode controls that reorder text on screen (bidi). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
const NAMED: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t', '\u001b': '\\e' };

function escapeOne(ch: string): string {
  const named = NAMED[ch];
  if (named) return named;
  const code = ch.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`;
}

/** One value for a terminal: every control character shown as an escape (`\e`, `\n`, `\x9b`, `\u{202e}`). */
export function printable(text: string): string {
  return text.replace(UNSAFE, escapeOne);
}

/** A whole rendered report: each line made printable, the line breaks kept. */
export function printableLines(text: string): string {
  return text.split('\n').map(printable).join('\n');
}

const JSON_UNSAFE = /[\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * JSON for a terminal: `JSON.stringify` escapes C0 itself but leaves DEL, C1 (a one-byte CSI) and bidi controls
 * as they are; they become `\uXXXX`, which any JSON reader reads back as the same string.
 */
export function jsonForTerminal(json: string): string {
  return json.replace(JSON_UNSAFE, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
