import { describe, expect, it } from 'vitest';
import { ApiError } from '../../../dashboard/src/api.js';
import { csvField, RECORD_COLUMNS, recordsToCsv } from '../../../dashboard/src/csv.js';
import { compact, newScheduleId, optionalNumber } from '../../../dashboard/src/form-values.js';
import { ago, isoToLocalInput, localInputToIso } from '../../../dashboard/src/format.js';
import { href, parseRoute } from '../../../dashboard/src/router.js';

describe('CSV export', () => {
  it.each([
    [undefined, ''],
    [12.5, '12.5'],
    ['plain', 'plain'],
    ['a,b', '"a,b"'],
    ['say "hi"', '"say ""hi"""'],
    ['two\nlines', '"two\nlines"'],
    ['=HYPERLINK("x")', '"\'=HYPERLINK(""x"")"'],
    ['+1', "'+1"],
    [-3, '-3'],
  ])('field %j → %s', (value, expected) => {
    expect(csvField(value)).toBe(expected);
  });

  it('writes a header and one CRLF line per record, vehicle info flattened', () => {
    const csv = recordsToCsv([
      {
        record_id: 'rec_1',
        device_id: 'dev_1',
        connector_id: 1,
        start_time: '2026-11-25T08:00:00Z',
        end_time: '2026-11-25T09:00:00Z',
        energy: 10.5,
        vehicle_info: { soc_start: 20, soc_end: 80 },
      },
    ]);
    const lines = csv.split('\r\n');
    expect(lines[0]).toBe(RECORD_COLUMNS.join(','));
    expect(lines[1]).toBe('rec_1,dev_1,1,2026-11-25T08:00:00Z,2026-11-25T09:00:00Z,10.5,,,,,,,20,80');
    expect(lines[2]).toBe('');
    expect(lines).toHaveLength(3);
  });
});

describe('routes', () => {
  it.each([
    ['', { page: 'overview' }],
    ['#/', { page: 'overview' }],
    ['#/sites/site_1', { page: 'site', siteId: 'site_1' }],
    ['#/devices/dev_abc', { page: 'device', deviceId: 'dev_abc' }],
    ['#/updates/upd_1', { page: 'update', updateId: 'upd_1' }],
    ['#/updates/<x>', { page: 'not-found', hash: '/updates/<x>' }],
    ['#/updates', { page: 'not-found', hash: '/updates' }],
    ['#/devices/<script>', { page: 'not-found', hash: '/devices/<script>' }],
    ['#/devices/a/b', { page: 'not-found', hash: '/devices/a/b' }],
    ['#/nowhere', { page: 'not-found', hash: '/nowhere' }],
  ])('%s', (hash, expected) => {
    expect(parseRoute(hash)).toEqual(expected);
  });

  it('keeps the Firmware page’s version filter in the URL and reads it back', () => {
    const q = new URLSearchParams({ agent_version: '1.2.0+b1' });
    const route = parseRoute(href.firmware(q));
    expect(route.page).toBe('firmware');
    if (route.page === 'firmware') expect(route.query.get('agent_version')).toBe('1.2.0+b1');
    expect(parseRoute(href.firmware())).toEqual({ page: 'firmware', query: new URLSearchParams() });
    expect(parseRoute(href.update('upd_9'))).toEqual({ page: 'update', updateId: 'upd_9' });
  });

  it('keeps the records filters in the URL and reads them back', () => {
    const q = new URLSearchParams({ device_id: 'dev_1', start_time: '2026-11-01T00:00:00.000Z' });
    const route = parseRoute(href.records(q));
    expect(route.page).toBe('records');
    if (route.page === 'records') expect(Object.fromEntries(route.query)).toEqual(Object.fromEntries(q));
  });
});

describe('form values', () => {
  it.each([
    ['', undefined],
    ['  ', undefined],
    ['7.4', 7.4],
    ['abc', 'abc'],
  ])('optional number %j', (input, expected) => {
    expect(optionalNumber(input)).toEqual(expected);
  });

  it('leaves out empty fields', () => {
    expect(compact({ a: 1, b: undefined, c: '', d: 'x', e: 0 })).toEqual({ a: 1, d: 'x', e: 0 });
  });

  it('makes schedule ids the API accepts', () => {
    const id = newScheduleId(Date.parse('2026-11-25T10:05:00Z'), () => 0.5);
    expect(id).toMatch(/^sch-202611251005-[0-9a-z]{4}$/);
  });

  it('turns datetime-local values into instants and back', () => {
    const iso = localInputToIso('2026-11-25T10:05');
    expect(iso).toBe(new Date('2026-11-25T10:05').toISOString());
    expect(isoToLocalInput(iso)).toBe('2026-11-25T10:05');
    expect(localInputToIso('')).toBeUndefined();
  });

  it('says how long ago', () => {
    const now = Date.parse('2026-11-25T10:00:00Z');
    expect(ago('2026-11-25T09:59:48Z', now)).toBe('12 s ago');
    expect(ago('2026-11-25T09:56:00Z', now)).toBe('4 min ago');
    expect(ago(undefined, now)).toBe('—');
  });
});

describe('API errors as the page shows them', () => {
  it.each([
    [new ApiError('Invalid client credentials', 401, 2001, undefined), 'Invalid client credentials [2001]'],
    [
      new ApiError('Invalid parameter duration: Invalid input', 400, 1001, { field: 'duration' }),
      'Invalid parameter duration: Invalid input [1001]',
    ],
    [
      new ApiError('Body is not valid', 400, 1001, { field: 'time_slots.0.end' }),
      'Body is not valid (field: time_slots.0.end) [1001]',
    ],
    [
      new ApiError('Rate limit exceeded', 429, 5001, { retry_after_seconds: 12 }),
      'Rate limit exceeded (retry after 12 s) [5001]',
    ],
    [new ApiError('HTTP 502 Bad Gateway', 502, undefined, undefined), 'HTTP 502 Bad Gateway'],
  ])('%#', (error, expected) => {
    expect(error.describe()).toBe(expected);
  });
});
