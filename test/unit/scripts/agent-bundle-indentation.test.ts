import { describe, expect, it } from 'vitest';
// @ts-expect-error a build script in plain JavaScript (checked with // @ts-check), without a declaration file
import { withoutIndentation } from '../../../scripts/agent-bundle-footprint.mjs';

const strip = (text: string): string => withoutIndentation(text, 'chunk.mjs');

describe('build:agent takes the indentation off its sources', () => {
  it('takes it off code and comments, and keeps every line where it was', () => {
    const source = [
      'function f(a) {',
      '  if (a) {',
      '    return 1;',
      '  }',
      '  /* a',
      '   * comment */',
      '}',
      '',
    ].join('\n');
    const out = strip(source);
    expect(out).toBe(
      ['function f(a) {', 'if (a) {', 'return 1;', '}', '/* a', '* comment */', '}', ''].join('\n'),
    );
    expect(out.split('\n')).toHaveLength(source.split('\n').length);
  });

  it('keeps the text of template literals, also around substitutions and nested templates', () => {
    const source = [
      'const sql = `',
      '    SELECT *',
      '      FROM t ${where(',
      '        `nested',
      '   kept`,',
      '      )}',
      '    ORDER BY id`;',
      '  const s = "  not at a line start";',
      '',
    ].join('\n');
    expect(strip(source)).toBe(
      [
        'const sql = `',
        '    SELECT *',
        '      FROM t ${where(',
        '`nested',
        '   kept`,',
        ')}',
        '    ORDER BY id`;',
        'const s = "  not at a line start";',
        '',
      ].join('\n'),
    );
  });

  it('keeps a string continued over lines', () => {
    const source = 'const s = "a\\\n    b";\n  x();\n';
    expect(strip(source)).toBe('const s = "a\\\n    b";\nx();\n');
  });

  it('refuses a source that does not parse', () => {
    expect(() => strip('const x = `unterminated\n  ')).toThrow(/does not parse/);
  });
});
