import { describe, expect, it } from 'vitest';
import {
  bytes,
  isUpdateLive,
  matchesVersion,
  parseSigFile,
  progressEntries,
  releaseFromSig,
  shortSha,
  type UpdateFormFields,
  updateActions,
  updateFormFieldOf,
  updateRequestBody,
  uploadMismatches,
  versionCounts,
  versionFilter,
} from '../../../dashboard/src/firmware-rules.js';

const SHA = 'a'.repeat(64);
const SIG = `${'A'.repeat(86)}==`;

describe('versions across the fleet', () => {
  it.each([
    ['none', [], []],
    [
      'most first, then by version (numeric), unknown last',
      [
        { agent_version: '1.10.0' },
        { agent_version: '1.9.0' },
        {},
        { agent_version: '' },
        { agent_version: '1.9.0' },
      ],
      [
        { version: '1.9.0', count: 2 },
        { version: '1.10.0', count: 1 },
        { version: undefined, count: 2 },
      ],
    ],
    ['only unknown', [{}, {}], [{ version: undefined, count: 2 }]],
    [
      'ties by version',
      [{ agent_version: '2.0.0' }, { agent_version: '1.0.0' }],
      [
        { version: '1.0.0', count: 1 },
        { version: '2.0.0', count: 1 },
      ],
    ],
  ])('%s', (_name, devices, expected) => {
    expect(versionCounts(devices, 'agent_version')).toEqual(expected);
  });

  it.each([
    ['', undefined],
    ['agent_version=1.2.0', { field: 'agent_version', version: '1.2.0' }],
    ['firmware_version=unknown', { field: 'firmware_version', version: 'unknown' }],
    ['agent_version=&firmware_version=3', { field: 'firmware_version', version: '3' }],
    ['page=2', undefined],
  ])('the address %j asks for %j', (query, expected) => {
    expect(versionFilter(new URLSearchParams(query))).toEqual(expected);
  });

  it.each([
    [{ agent_version: '1.2.0' }, '1.2.0', true],
    [{ agent_version: '1.2.0' }, '1.2.1', false],
    [{}, 'unknown', true],
    [{ agent_version: '' }, 'unknown', true],
    [{ agent_version: '1.2.0' }, 'unknown', false],
  ])('%j on %s: %s', (device, version, expected) => {
    expect(matchesVersion(device, { field: 'agent_version', version })).toBe(expected);
  });
});

describe('the .sig file', () => {
  const good = { kind: 'firmware', version: '2.0.1', target: 'AC22', sha256: SHA, size: 10, signature: SIG };
  const bare = { sha256: SHA, size: 10, signature: SIG };
  it.each([
    ['a build manifest', JSON.stringify(good), { ok: true, signed: good }],
    [
      'an empty target: any',
      JSON.stringify({ ...good, target: '' }),
      { ok: true, signed: { ...good, target: undefined } },
    ],
    ['artifacts sign --json: no names', JSON.stringify(bare), { ok: true, signed: bare }],
    ['names not text are left out', JSON.stringify({ ...bare, version: 2 }), { ok: true, signed: bare }],
    ['not JSON', '{kind:', { ok: false, error: 'The signature file is not JSON' }],
    ['an array', '[]', { ok: false, error: 'The signature file is not a JSON object' }],
    ['null', 'null', { ok: false, error: 'The signature file is not a JSON object' }],
    [
      'fields missing or of the wrong type',
      JSON.stringify({ kind: 'agent', sha256: 1, size: '10' }),
      { ok: false, error: 'The signature file lacks sha256, signature, size' },
    ],
    [
      'another kind',
      JSON.stringify({ ...good, kind: 'kernel' }),
      { ok: false, error: "The signature file's kind kernel is neither agent nor firmware" },
    ],
  ])('%s', (_name, text, expected) => {
    expect(parseSigFile(text)).toEqual(expected);
  });

  it.each([
    [{ sha256: SHA, size: 10 }, { sha256: SHA, size: 10 }, []],
    [{ sha256: SHA.toUpperCase(), size: 10 }, { sha256: SHA, size: 10 }, []],
    [{ sha256: SHA, size: 10 }, { sha256: SHA, size: 11 }, ['size: signed 10, uploaded 11']],
    [
      { sha256: SHA, size: 10 },
      { sha256: 'b'.repeat(64), size: 10 },
      ['sha256: signed aaaaaaaaaaaa…, uploaded bbbbbbbbbbbb…'],
    ],
  ])('signed %j, measured %j: %j', (signed, measured, expected) => {
    expect(uploadMismatches(signed, measured)).toEqual(expected);
  });
});

describe('the release fields from a .sig file', () => {
  const typed = { kind: 'agent', version: '9.9', target: 'x', signature: 'typed' };
  it.each([
    [
      'a build manifest replaces what was typed',
      { sha256: SHA, size: 1, signature: SIG, kind: 'firmware', version: '2.0', target: 'AC22' },
      { kind: 'firmware', version: '2.0', target: 'AC22', signature: SIG },
    ],
    [
      'a build manifest without target: any',
      { sha256: SHA, size: 1, signature: SIG, kind: 'agent', version: '2.0' },
      { kind: 'agent', version: '2.0', target: '', signature: SIG },
    ],
    [
      'artifacts sign --json: only the signature changes',
      { sha256: SHA, size: 1, signature: SIG },
      { ...typed, signature: SIG },
    ],
  ] as const)('%s', (_name, signed, expected) => {
    expect(releaseFromSig(signed, typed)).toEqual(expected);
  });
});

describe('display', () => {
  it.each([
    [0, '0 B'],
    [1023, '1023 B'],
    [1536, '1.5 KiB'],
    [3 * 1024 * 1024, '3.0 MiB'],
    [200 * 1024 * 1024, '200 MiB'],
    [5 * 1024 ** 3, '5.0 GiB'],
  ])('%d bytes: %s', (n, expected) => {
    expect(bytes(n)).toBe(expected);
  });

  it.each([
    [SHA, 'aaaaaaaaaaaa…'],
    ['abc', 'abc'],
  ])('sha %s', (sha, expected) => {
    expect(shortSha(sha)).toBe(expected);
  });

  it.each([
    [{}, []],
    [
      { failed: 1, pending: 2, succeeded: 0, queued: 1 },
      [
        ['pending', 2],
        ['queued', 1],
        ['failed', 1],
      ],
    ],
    [
      { novel: 1, cancelled: 1, skipped: 3 },
      [
        ['skipped', 3],
        ['cancelled', 1],
        ['novel', 1],
      ],
    ],
  ])('progress %j', (progress, expected) => {
    expect(progressEntries(progress)).toEqual(expected);
  });
});

describe('update status', () => {
  it.each([
    ['running', { pause: true, resume: false, cancel: true }],
    ['paused', { pause: false, resume: true, cancel: true }],
    ['completed', { pause: false, resume: false, cancel: false }],
    ['cancelled', { pause: false, resume: false, cancel: false }],
  ] as const)('%s: %j', (status, actions) => {
    expect(updateActions(status)).toEqual(actions);
  });

  it.each([
    ['running', {}, true],
    ['paused', { failed: 1 }, true],
    ['completed', { succeeded: 3 }, false],
    ['cancelled', { cancelled: 2, failed: 1 }, false],
    ['cancelled', { cancelled: 2, queued: 0 }, false],
    ['cancelled', { cancelled: 2, queued: 1 }, true],
    ['cancelled', { installing: 1 }, true],
    ['cancelled', { installed: 1 }, true],
  ] as const)('%s with %j: polled %s', (status, progress, live) => {
    expect(isUpdateLive(status, progress)).toBe(live);
  });
});

describe('the update form', () => {
  const blank: UpdateFormFields = {
    artifact_id: 'art_1',
    target: 'site',
    site_ids: ['site_1'],
    install: 'when_idle',
    window_start: '',
    window_end: '',
    batch_size: '',
    max_failure_percent: '',
    health_seconds: '',
  };
  it.each([
    [
      'defaults left to the API',
      {},
      { artifact_id: 'art_1', target_type: 'site', target_ids: ['site_1'], install: 'when_idle' },
    ],
    [
      'all chargers: no ids',
      { target: 'all', site_ids: ['site_1'] },
      { artifact_id: 'art_1', target_type: 'all', install: 'when_idle' },
    ],
    [
      'no site chosen: sent empty so that the API names target_ids',
      { site_ids: [] },
      { artifact_id: 'art_1', target_type: 'site', target_ids: [], install: 'when_idle' },
    ],
    [
      'window and rollout',
      {
        window_start: '22:00',
        window_end: '05:00',
        batch_size: '1',
        max_failure_percent: '0',
        health_seconds: '60',
      },
      {
        artifact_id: 'art_1',
        target_type: 'site',
        target_ids: ['site_1'],
        install: 'when_idle',
        window: { start: '22:00', end: '05:00' },
        rollout: { batch_size: 1, max_failure_percent: 0, health_seconds: 60 },
      },
    ],
    [
      'half a window and text in a number go as typed',
      { window_end: '05:00', batch_size: 'ten' },
      {
        artifact_id: 'art_1',
        target_type: 'site',
        target_ids: ['site_1'],
        install: 'when_idle',
        window: { start: '', end: '05:00' },
        rollout: { batch_size: 'ten' },
      },
    ],
  ])('%s', (_name, fields, expected) => {
    expect(updateRequestBody({ ...blank, ...fields })).toEqual(expected);
  });

  it.each([
    [undefined, undefined],
    [{}, undefined],
    [{ field: 'rollout.batch_size' }, 'batch_size'],
    [{ field: 'rollout.health_seconds' }, 'health_seconds'],
    [{ field: 'rollout.max_site_percent' }, undefined],
    [{ field: 'rollout' }, undefined],
    [{ field: 'window.end' }, 'window_end'],
    [{ field: 'window.start' }, 'window_start'],
    [{ field: 'window' }, 'window_start'],
    [{ field: 'target_ids.0' }, 'target'],
    [{ field: 'target_ids' }, 'target'],
    [{ field: 'artifact_id' }, 'artifact_id'],
    [{ field: 'body' }, undefined],
  ])('details %j → field %s', (details, expected) => {
    expect(updateFormFieldOf(details)).toBe(expected);
  });
});
