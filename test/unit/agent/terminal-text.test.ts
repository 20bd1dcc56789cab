import { describe, expect, it } from 'vitest';
import { jsonForTerminal, printable, printableLines } from '../../../agent/technician/terminal-text.js';

describe('printable', () => {
  it.each([
    ['plain text', 'plain text'],
    ['Depot Süd — “peak” ⚡ 日本', 'Depot Süd — “peak” ⚡ 日本'],
    ['back\\slash', 'back\\slash'],
    ['\u001b[2J\u001b[H', '\\e[2J\\e[H'],
    ['\u001b]0;pwned\u0007', '\\e]0;pwned\\x07'],
    ['two\nlines', 'two\\nlines'],
    ['cr\roverwrite', 'cr\\roverwrite'],
    ['a\tb', 'a\\tb'],
    ['nul\u0000', 'nul\\x00'],
    ['bs\u0008', 'bs\\x08'],
    ['\u001f', '\\x1f'],
    ['del\u007f', 'del\\x7f'],
    ['\u0080', '\\x80'],
    ['csi\u009b31m', 'csi\\x9b31m'],
    ['\u009f', '\\x9f'],
    ['\u00a0nbsp', '\u00a0nbsp'], // printable, just after C1
    ['~', '~'], // just before DEL
    [' ', ' '], // just after C0
    ['rtl\u202eexe.pdf', 'rtl\\u{202e}exe.pdf'],
    ['\u2066isolate\u2069', '\\u{2066}isolate\\u{2069}'],
    ['\u200f', '\\u{200f}'],
    ['', ''],
  ])('%j → %j', (input, expected) => {
    expect(printable(input)).toBe(expected);
  });

  it('is idempotent, so a value escaped twice reads the same', () => {
    const once = printable('\u001b[31mred\u009b\n');
    expect(printable(once)).toBe(once);
  });
});

describe('printableLines', () => {
  it('keeps the line breaks of a report and escapes everything else', () => {
    expect(printableLines('a\u001b[2K\nb\r\n\tc\n')).toBe('a\\e[2K\nb\\r\n\\tc\n');
  });
});

describe('jsonForTerminal', () => {
  it.each([
    ['plain', 'plain'],
    ['\u001b[2J', '\u001b[2J'],
    ['del\u007f', 'del\u007f'],
    ['csi\u009b31m', 'csi\u009b31m'],
    ['rtl\u202e', 'rtl\u202e'],
  ])('%j round-trips and prints no raw DEL, C1 or bidi control', (value) => {
    const text = jsonForTerminal(JSON.stringify({ reason: value }));
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the point of the check
    expect(text).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e]/);
    expect(JSON.parse(text)).toEqual({ reason: value });
  });
});
