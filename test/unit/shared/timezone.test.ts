import { describe, expect, it } from 'vitest';
import * as z from 'zod/mini';
import { isIanaTimezone, Timezone } from '../../../shared/primitives.js';

const intlAccepts = (name: string) => {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
};

describe('isIanaTimezone', () => {
  // ICU's canonical list answers first; every other name is what Intl.DateTimeFormat accepts, unchanged.
  const names = [
    ...Intl.supportedValuesOf('timeZone'),
    'UTC',
    'Etc/UTC',
    'GMT',
    'US/Eastern',
    'Asia/Kolkata',
    'Europe/Kyiv',
    'europe/berlin',
    'Etc/GMT+5',
    'Mars/Olympus_Mons',
    'Factory',
    'localtime',
    '../zoneinfo/Europe/Berlin',
    'Europe/Berlin ',
    '',
  ];
  it('accepts exactly what Intl.DateTimeFormat accepts', () => {
    const disagreements = names.filter((name) => isIanaTimezone(name) !== intlAccepts(name));
    expect(disagreements).toEqual([]);
    expect(isIanaTimezone('Europe/Berlin')).toBe(true);
    expect(isIanaTimezone('US/Eastern')).toBe(true);
    expect(isIanaTimezone('Mars/Olympus_Mons')).toBe(false);
  });

  it('is what the Timezone schema checks', () => {
    expect(z.safeParse(Timezone, 'America/New_York').success).toBe(true);
    const refused = z.safeParse(Timezone, 'Mars/Olympus_Mons');
    expect(refused.success).toBe(false);
    expect(refused.error?.issues[0]?.message).toBe('unknown IANA timezone');
    expect(z.safeParse(Timezone, '').success).toBe(false);
  });
});
