import { describe, expect, it } from 'vitest';
import { CommandStatusReport, DeviceEvent } from '../../../shared/device-api.js';
import { FlexibilityRequest, StopRequest } from '../../../shared/operator-api.js';
import { freeText, replaceControlCharacters } from '../../../shared/primitives.js';
import { validate } from '../../../shared/validation.js';
import { WebhookCreate } from '../../../shared/webhooks.js';

const OK = ['', 'grid peak', 'Depot Süd — “peak” ⚡', '~', '\u00a0', 'a\\nb (a backslash and n)'];
const BAD = [
  '\u0000',
  'a\tb',
  'a\nb',
  'a\rb',
  '\u001b[2J',
  '\u001f',
  '\u007f',
  '\u0080',
  '\u009b31m',
  '\u009f',
];

describe('freeText', () => {
  const schema = freeText(200);
  it.each(OK)('takes %j', (text) => {
    expect(validate(schema, text).ok).toBe(true);
  });
  it.each(BAD)('refuses %j', (text) => {
    const r = validate(schema, text);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.message).toContain('control characters');
  });
  it('still has its length limit', () => {
    expect(validate(schema, 'x'.repeat(201)).ok).toBe(false);
  });
});

describe('the request schemas with free text', () => {
  it.each([
    [
      'webhook description',
      WebhookCreate,
      { url: 'https://h.example/x', events: ['*'], description: 'a\nb' },
      'description',
    ],
    ['stop reason', StopRequest, { reason: '\u001b[2J' }, 'reason'],
    [
      'flexibility reason',
      FlexibilityRequest,
      { target_type: 'all', command: 'pause_charging', params: { duration: 60, reason: 'x\u009b' } },
      'params.reason',
    ],
    ['command status reason', CommandStatusReport, { status: 'failed', reason: 'a\tb' }, 'reason'],
    [
      'event message',
      DeviceEvent,
      { event_id: 'e1', kind: 'boot', timestamp: '2026-01-01T00:00:00Z', message: 'x\u007f' },
      'message',
    ],
  ] as const)('%s names the field', (_what, schema, input, field) => {
    const r = validate(schema, input);
    expect(r.ok).toBe(false);
    if (!r.ok)
      expect(r.error).toMatchObject({ field, message: expect.stringContaining('control characters') });
  });
});

describe('replaceControlCharacters', () => {
  it.each([
    ['clean', 'clean'],
    ['a\nb\tc', 'a b c'],
    ['\u001b[2J', ' [2J'],
    ['x\u007f\u0085\u009fy', 'x   y'],
    ['Süd ⚡', 'Süd ⚡'],
  ])('%j → %j, which freeText takes', (input, expected) => {
    expect(replaceControlCharacters(input)).toBe(expected);
    expect(validate(freeText(200), expected).ok).toBe(true);
  });
});
