import { describe, expect, it } from 'vitest';
import { repeatedLimit, type StoredLimit } from '../../../agent/core/limit-policy.js';

const limit = (ends_at: string, commandId = 'cmd_new'): StoredLimit => ({
  control_id: 'ctl_1',
  kind: 'power_limit',
  power_limit_percent: 50,
  starts_at: '2026-03-01T10:00:00.000Z',
  ends_at,
  commandId,
  receivedAt: '2026-03-01T10:05:00.000Z',
});

describe('a repeated limit never extends', () => {
  it.each([
    {
      case: 'first time: kept as sent',
      existing: undefined,
      incoming: '2026-03-01T12:00:00.000Z',
      kept: '2026-03-01T12:00:00.000Z',
    },
    {
      case: 'a reversal shortens it',
      existing: '2026-03-01T12:00:00.000Z',
      incoming: '2026-03-01T10:30:00.000Z',
      kept: '2026-03-01T10:30:00.000Z',
    },
    {
      case: 'the original late, after its reversal: stays short',
      existing: '2026-03-01T10:30:00.000Z',
      incoming: '2026-03-01T12:00:00.000Z',
      kept: '2026-03-01T10:30:00.000Z',
    },
    {
      case: 'the same end again',
      existing: '2026-03-01T12:00:00.000Z',
      incoming: '2026-03-01T12:00:00.000Z',
      kept: '2026-03-01T12:00:00.000Z',
    },
    {
      case: 'instants compared, not strings',
      existing: '2026-03-01T12:00:00Z',
      incoming: '2026-03-01T12:00:00.500Z',
      kept: '2026-03-01T12:00:00Z',
    },
    {
      case: 'an unreadable stored end does not hold a new one back',
      existing: 'garbage',
      incoming: '2026-03-01T12:00:00.000Z',
      kept: '2026-03-01T12:00:00.000Z',
    },
  ])('$case', ({ existing, incoming, kept }) => {
    const sent = limit(incoming);
    const result = repeatedLimit(existing === undefined ? undefined : { ends_at: existing }, sent);
    expect(result).toEqual({ ...sent, ends_at: kept });
    // The rest of the repeat (its command, reason, percent) is what is stored; the input is left alone.
    expect(sent.ends_at).toBe(incoming);
  });
});
