import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import {
  fileSpan,
  firstLineTime,
  keepLine,
  lastLineTime,
  lineTimeMs,
  logFilesOldestFirst,
  overlaps,
} from '../../../agent/diagnostics/log-window.js';
import { archiveRootName, compactUtc } from '../../../agent/diagnostics/manifest.js';
import { journalPart } from '../../../agent/diagnostics/parts.js';
import { knownSecrets, REDACTED, redactSecrets, scrubText } from '../../../agent/diagnostics/redact.js';
import { cutOffset, logBudget, MAX_ATTEMPTS } from '../../../agent/diagnostics/truncation.js';
import type { JournalEntry } from '../../../agent/store/agent-store.js';

const _run = promisify(execFile);

/** The diagnostics archive's pure rules (agent/diagnostics/): log window, secrets, size and names. */

const T0 = Date.parse('2026-03-27T12:00:00.000Z');
const MIN = 60_000;
const iso = (ms: number) => new Date(ms).toISOString();
const pinoLine = (ms: number, msg: string) =>
  `{"level":30,"time":"${iso(ms)}","name":"charger-agent","msg":"${msg}"}`;

describe('diagnostics archive: which log lines', () => {
  const W = { startMs: T0, endMs: T0 + 10 * MIN };

  it.each([
    ['pino isoTime', pinoLine(T0, 'x'), T0],
    ['pino epoch ms', `{"level":30,"time":${T0},"msg":"x"}`, T0],
    ['time after other keys', `{"msg":"x","time":"${iso(T0)}"}`, T0],
    ['a line cut by a power loss', `{"level":30,"time":"${iso(T0)}","name":"charger-ag`, T0],
    ['a cut line without its time', '{"level":30,"ti', undefined],
    ['not JSON', 'Segmentation fault', undefined],
    ['JSON without a time', '{"msg":"x"}', undefined],
    ['an unreadable time', '{"level":30,"time":"yesterday","msg":"x"}', undefined],
    ['a message that quotes a time', `{"level":30,"msg":"\\"time\\":\\"${iso(T0)}\\""}`, undefined],
  ])('reads the time of %s', (_name, line, expected) => {
    expect(lineTimeMs(line)).toBe(expected);
  });

  it.each([
    ['at the start (inclusive)', T0, false, true],
    ['at the end (inclusive)', T0 + 10 * MIN, false, true],
    ['inside', T0 + MIN, false, true],
    ['a ms before', T0 - 1, true, false],
    ['a ms after', T0 + 10 * MIN + 1, true, false],
    ['no time, file overlaps', undefined, true, true],
    ['no time, file does not overlap', undefined, false, false],
  ])('keeps a line %s', (_name, time, fileOverlaps, expected) => {
    expect(keepLine(time, fileOverlaps, W)).toBe(expected);
  });

  it.each([
    ['both times read', T0 - MIN, T0 + MIN, 0, { startMs: T0 - MIN, endMs: T0 + MIN }],
    ['no head time: the tail time', undefined, T0, 0, { startMs: T0, endMs: T0 }],
    ['no tail time: head to mtime', T0, undefined, T0 + 5 * MIN, { startMs: T0, endMs: T0 + 5 * MIN }],
    ['nothing read: the mtime', undefined, undefined, T0 + 7, { startMs: T0 + 7, endMs: T0 + 7 }],
  ])('gives a file span when %s', (_name, first, last, mtime, expected) => {
    expect(fileSpan(first, last, mtime)).toEqual(expected);
  });

  it.each([
    ['before', { startMs: T0 - 2 * MIN, endMs: T0 - 1 }, false],
    ['touching the start', { startMs: T0 - MIN, endMs: T0 }, true],
    ['inside', { startMs: T0 + MIN, endMs: T0 + 2 * MIN }, true],
    ['around', { startMs: T0 - MIN, endMs: T0 + 20 * MIN }, true],
    ['after', { startMs: T0 + 10 * MIN + 1, endMs: T0 + 20 * MIN }, false],
  ])('says a span %s the window overlaps it: %s', (_name, span, expected) => {
    expect(overlaps(span, W)).toBe(expected);
  });

  it('finds the first time in a head and the last in a tail, skipping their cut lines', () => {
    const text = [
      'garbage',
      pinoLine(T0, 'a'),
      pinoLine(T0 + MIN, 'b'),
      pinoLine(T0 + 9 * MIN, 'c').slice(0, 60),
    ];
    // A head's last line and a tail's first may be cut by the read: not taken (a cut line's time is).
    expect(firstLineTime(text.join('\n'), false)).toBe(T0);
    expect(firstLineTime(text.slice(1, 2).join('\n'), false)).toBeUndefined();
    expect(firstLineTime(text.slice(1, 2).join('\n'), true)).toBe(T0);
    expect(lastLineTime(text.join('\n'), false)).toBe(T0 + 9 * MIN);
    expect(lastLineTime(`${pinoLine(T0 + MIN, 'cut')}\n${pinoLine(T0, 'a')}`.slice(3), false)).toBe(T0);
  });

  it('orders the rotated files oldest first and ignores foreign files', () => {
    expect(
      logFilesOldestFirst([
        'agent.log',
        'agent.log.1',
        'agent.log.10',
        'agent.log.2',
        'other.log',
        'agent.log.x',
      ]),
    ).toEqual(['agent.log.10', 'agent.log.2', 'agent.log.1', 'agent.log']);
  });
});

describe('diagnostics archive: secrets out of the configuration', () => {
  const PEM = '-----BEGIN PRIVATE KEY-----\nMIIEv...\n-----END PRIVATE KEY-----\n';

  it.each([
    [
      'a file path under a key-like key',
      { clientKey: '/etc/charger/client.key' },
      { clientKey: '/etc/charger/client.key' },
    ],
    [
      'update key paths',
      { updateKeys: ['/etc/k1.pem', '/etc/k2.pem'] },
      { updateKeys: ['/etc/k1.pem', '/etc/k2.pem'] },
    ],
    [
      'a quantity',
      { secretRotationDays: 90, secret_rotation_days: 30 },
      { secretRotationDays: 90, secret_rotation_days: 30 },
    ],
    ['a switch', { signRequests: true, token_refresh: false }, { signRequests: true, token_refresh: false }],
    [
      'a password',
      { halOptions: { modbusPassword: 'hunter2-long' } },
      { halOptions: { modbusPassword: REDACTED } },
    ],
    ['a token', { access_token: 'abc.def.ghi' }, { access_token: REDACTED }],
    ['a relative path (not a path to us)', { privateKey: 'keys/x.pem' }, { privateKey: REDACTED }],
    ['a numeric key', { apiKey: 123456789 }, { apiKey: REDACTED }],
    [
      'an object under a secret key',
      { apiKeys: { primary: 'abc', expires_in_seconds: 60 } },
      { apiKeys: { primary: REDACTED, expires_in_seconds: 60 } },
    ],
    [
      'PEM content under any key',
      { ca: PEM, nested: [{ cert: PEM }] },
      { ca: REDACTED, nested: [{ cert: REDACTED }] },
    ],
    ['a PEM disguised as a path', { clientKey: `/x${PEM}` }, { clientKey: REDACTED }],
    [
      'ordinary settings',
      { sn: 'SN-1', hal: 'simulated', connectors: 2, v2g: null },
      { sn: 'SN-1', hal: 'simulated', connectors: 2, v2g: null },
    ],
  ])('%s', (_name, input, expected) => {
    const before = structuredClone(input);
    expect(redactSecrets(input)).toEqual(expected);
    expect(input).toEqual(before);
  });

  it.each([
    ['the secret as is', 'x s3cr3t-value-1 y', ['s3cr3t-value-1'], `x ${REDACTED} y`],
    ['every occurrence', 'AAAAAAAA-AAAAAAAA', ['AAAAAAAA'], `${REDACTED}-${REDACTED}`],
    ['JSON-escaped', '{"m":"a\\"quoted\\"secret"}', ['a"quoted"secret'], `{"m":"${REDACTED}"}`],
    ['too short to be a credential', 'a b c', ['b'], 'a b c'],
  ])('scrubs %s', (_name, text, secrets, expected) => {
    expect(scrubText(text, secrets)).toBe(expected);
  });

  it('knows the store’s secrets by value', () => {
    const identity = {
      deviceId: 'dev_1',
      secret: 'the-device-secret',
      pendingSecret: 'the-pending-secret',
      sn: 'SN',
      platformUrl: 'https://p',
      registeredAt: iso(T0),
    };
    const token = { accessToken: 'the-access-token', expiresAt: iso(T0), obtainedAt: iso(T0) };
    expect(knownSecrets(identity, token)).toEqual([
      'the-device-secret',
      'the-pending-secret',
      'the-access-token',
    ]);
    expect(knownSecrets(undefined, undefined)).toEqual([]);
  });
});

describe('diagnostics archive: size and names', () => {
  it.each([
    ['fits', { archiveBytes: 100, maxBytes: 100, logBytes: 1000, attempt: 0 }, { kind: 'fits' }],
    [
      'twice too large: a bit under half',
      { archiveBytes: 200, maxBytes: 100, logBytes: 1000, attempt: 0 },
      { kind: 'shrink', keepLogBytes: 450 },
    ],
    [
      'barely too large: at least a byte less',
      { archiveBytes: 1001, maxBytes: 1000, logBytes: 5, attempt: 0 },
      { kind: 'shrink', keepLogBytes: 4 },
    ],
    [
      'the last try: no log',
      { archiveBytes: 200, maxBytes: 100, logBytes: 1000, attempt: MAX_ATTEMPTS - 2 },
      { kind: 'shrink', keepLogBytes: 0 },
    ],
    [
      'too large without logs',
      { archiveBytes: 200, maxBytes: 100, logBytes: 0, attempt: 1 },
      { kind: 'too_large' },
    ],
  ])('budget: %s', (_name, input, expected) => {
    expect(logBudget(input)).toEqual(expected);
  });

  it.each([
    [1000, 400, 600],
    [1000, 0, 1000],
    [1000, 5000, 0],
  ])('cuts a %i-byte log keeping %i bytes at %i', (size, keep, offset) => {
    expect(cutOffset(size, keep)).toBe(offset);
  });

  it.each([
    ['SN-0042', 'diagnostics-SN-0042-20260327T120000Z'],
    ['../etc/pass wd', 'diagnostics-.._etc_pass_wd-20260327T120000Z'],
    ['..', 'diagnostics-charger-20260327T120000Z'],
    [undefined, 'diagnostics-charger-20260327T120000Z'],
  ])('names the top directory for %s', (who, expected) => {
    expect(archiveRootName(who, T0)).toBe(expected);
    expect(compactUtc(T0 + 999)).toBe('20260327T120000Z');
  });

  it('keeps the journal of the last 7 days, at most 500 entries, newest first', () => {
    const entry = (i: number, at: number): JournalEntry => ({
      commandId: `cmd_${i}`,
      command: 'set_configuration',
      params: { values: { secret_rotation_days: 30 }, token: 'not-for-the-archive' },
      expiry: iso(at + MIN),
      status: 'succeeded',
      receivedAt: iso(at),
      updatedAt: iso(at),
    });
    const recent = Array.from({ length: 600 }, (_, i) => entry(i, T0 - i * 60_000));
    const part = journalPart([...recent, entry(999, T0 - 8 * 86_400_000)], T0);
    expect(part.commands).toHaveLength(500);
    expect(part.commands[0]?.command_id).toBe('cmd_0');
    expect(part.commands[0]?.params).toEqual({ values: { secret_rotation_days: 30 }, token: REDACTED });
    const old = journalPart([entry(1, T0 - 6 * 86_400_000), entry(2, T0 - 8 * 86_400_000)], T0);
    expect(old.commands.map((c) => c.command_id)).toEqual(['cmd_1']);
  });
});

/** Every file of the archive, extracted by the system's tar, and the whole uncompressed tar stream. */
