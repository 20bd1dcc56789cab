import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import * as z from 'zod/mini';
import { isReadableZone } from '../../../agent/core/tz/zone-offsets.js';
import { checkTimezonesWith, isIanaTimezone, Timezone } from '../../../shared/primitives.js';

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

describe('checkTimezonesWith (the agent reads a zone without Intl)', () => {
  afterEach(() => {
    checkTimezonesWith(isIanaTimezone);
  });

  it('replaces the check of the Timezone schema', () => {
    checkTimezonesWith((name) => name === 'Test/Zone');
    expect(z.safeParse(Timezone, 'Test/Zone').success).toBe(true);
    expect(z.safeParse(Timezone, 'Europe/Berlin').success).toBe(false);
    checkTimezonesWith(isIanaTimezone);
    expect(z.safeParse(Timezone, 'Europe/Berlin').success).toBe(true);
  });

  it.skipIf(!existsSync('/usr/share/zoneinfo/Asia/Kolkata') || process.env.TZDIR !== undefined)(
    "the agent's check reads a zone outside ICU's canonical list from the tz database, without a DateTimeFormat",
    () => {
      expect(Intl.supportedValuesOf('timeZone')).not.toContain('Asia/Kolkata');
      const built = vi.spyOn(Intl, 'DateTimeFormat');
      checkTimezonesWith(isReadableZone);
      expect(z.safeParse(Timezone, 'Asia/Kolkata').success).toBe(true);
      expect(z.safeParse(Timezone, 'US/Eastern').success).toBe(true);
      expect(built).not.toHaveBeenCalled();
      // Not in the database: Intl decides, as for the platform.
      expect(z.safeParse(Timezone, 'europe/berlin').success).toBe(true);
      expect(z.safeParse(Timezone, 'Mars/Olympus_Mons').success).toBe(false);
      expect(built).toHaveBeenCalled();
      built.mockRestore();
    },
  );
});
