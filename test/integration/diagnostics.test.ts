import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  COMMAND_EXPIRY_SECONDS,
  DIAGNOSTICS_MAX_BYTES,
  DiagnosticsView,
  webhookEventBody,
} from '../../shared/index.js';
import { lifecycleCalls } from '../helpers/command-lifecycle.js';
import { archiveOf, CHUNK, diagnosticsCalls, sha256 } from '../helpers/diagnostics-calls.js';
import {
  createTenant,
  expectError,
  operatorToken,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';
import { openStoredData } from '../helpers/stored-data.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * Diagnostics (DESIGN.md §20) over real HTTPS: an operator's request queues `upload_diagnostics` with its window;
 * the charger uploads its archive resumably (a cut keeps every full chunk, the rest follows from `received`);
 * the operator downloads it byte for byte, and a webhook says it is there; refusals (409 with the state, 413,
 * 404 for another charger's) and failures (a corrupt archive, the command failing or expiring).
 */

let tp: TestPlatform;
let receiver: WebhookReceiver;
beforeAll(async () => {
  receiver = await startWebhookReceiver();
  tp = await startTestPlatform({ webhooks: { allowPrivate: true, ca: receiver.ca } });
});
afterAll(async () => {
  await tp?.stop();
  await receiver?.close();
});

const { sn, tenant, poll, report, command } = lifecycleCalls(() => tp);
const { request, requested, view, state, put, putCut, content } = diagnosticsCalls(() => tp);
type Tenant = Awaited<ReturnType<typeof tenant>>;

async function charger(): Promise<{ t: Tenant; d: RegisteredDevice }> {
  const t = await tenant();
  return { t, d: await registerDevice(tp, sn(), t.siteId) };
}
async function viewOf(t: Tenant, id: string) {
  const res = await view(t.token, id);
  expect(res.status, res.text).toBe(200);
  expect(DiagnosticsView.safeParse(res.body.data).success).toBe(true);
  return res.body.data;
}

describe('the request', () => {
  it('queues upload_diagnostics with the last 24 hours by default, delivered to the charger', async () => {
    const { t, d } = await charger();
    const before = tp.now();
    const { diagnostics_id: id, command_id } = await requested(t.token, d);
    const after = tp.now();
    const cmd = await command(t, command_id);
    expect(cmd.command).toBe('upload_diagnostics');
    expect(Date.parse(cmd.expiry) - Date.parse(cmd.created_at)).toBe(
      COMMAND_EXPIRY_SECONDS.upload_diagnostics * 1000,
    );
    const end = Date.parse(cmd.params.end_time);
    expect(end).toBeGreaterThanOrEqual(before);
    expect(end).toBeLessThanOrEqual(after);
    expect(cmd.params).toEqual({
      diagnostics_id: id,
      start_time: new Date(end - 24 * 3_600_000).toISOString(),
      end_time: new Date(end).toISOString(),
      max_bytes: DIAGNOSTICS_MAX_BYTES,
    });
    const pending = (await poll(d)).find((c) => c.command_id === command_id);
    expect(pending).toMatchObject({ command: 'upload_diagnostics', params: cmd.params });

    const v = await viewOf(t, id);
    expect(v).toEqual({
      diagnostics_id: id,
      device_id: d.deviceId,
      command_id,
      status: 'requested',
      start_time: cmd.params.start_time,
      end_time: cmd.params.end_time,
      size: 0,
      sha256: null,
      created_at: v.created_at,
      updated_at: v.created_at,
      expires_at: new Date(Date.parse(v.created_at) + 30 * 86_400_000).toISOString(),
    });
    expect((await state(d, id)).body).toEqual({
      code: 0,
      message: 'success',
      data: { diagnostics_id: id, status: 'requested', received: 0, size: null },
    });
  });

  it('takes the window given; the device lists its requests newest first', async () => {
    const { t, d } = await charger();
    const end = tp.now() - 3_600_000;
    const window = {
      start_time: new Date(end - 7 * 86_400_000).toISOString(),
      end_time: new Date(end).toISOString(),
    };
    const first = await requested(t.token, d, window);
    expect((await command(t, first.command_id)).params).toMatchObject(window);
    // Only an end: the 24 hours before it.
    const second = await requested(t.token, d, { end_time: window.end_time });
    expect((await viewOf(t, second.diagnostics_id)).start_time).toBe(
      new Date(end - 86_400_000).toISOString(),
    );
    const listed = await tp.http.get(`/v1/operator/devices/${d.deviceId}/diagnostics?size=1`, {
      token: t.token,
    });
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.data).toMatchObject({ total: 2, page: 1, size: 1 });
    expect(listed.body.data.items.map((i: { diagnostics_id: string }) => i.diagnostics_id)).toEqual([
      second.diagnostics_id,
    ]);
    const page2 = await tp.http.get(`/v1/operator/devices/${d.deviceId}/diagnostics?size=1&page=2`, {
      token: t.token,
    });
    expect(page2.body.data.items[0].diagnostics_id).toBe(first.diagnostics_id);
  });

  it.each([
    [
      'a window over 31 days',
      { start_time: '2026-01-01T00:00:00Z', end_time: '2026-02-01T00:00:01Z' },
      'start_time',
    ],
    ['an end in the future', { end_time: new Date(Date.now() + 3_600_000).toISOString() }, 'end_time'],
    [
      'a start after the end',
      { start_time: '2026-01-02T00:00:00Z', end_time: '2026-01-01T00:00:00Z' },
      'end_time',
    ],
    [
      'a start after now (end defaults to now)',
      { start_time: new Date(Date.now() + 60_000).toISOString() },
      'start_time',
    ],
    ['an unknown field', { colour: 'red' }, 'colour'],
  ])('refuses %s with 400/1001 naming %s, queueing nothing', async (_label, body, field) => {
    const { t, d } = await charger();
    const res = await request(t.token, d, body);
    expectError(res, 400, 1001);
    expect(res.body.details.field).toBe(field);
    expect(await poll(d)).toEqual([]);
  });

  it('answers 404 for a charger that does not exist, and for unknown diagnostics', async () => {
    const { t, d } = await charger();
    expectError(await request(t.token, { ...d, deviceId: 'dev_00000000000000000000' }), 404, 3001);
    expectError(await view(t.token, 'diag_00000000000000000000'), 404, 3001);
    expectError(await state(d, 'diag_00000000000000000000'), 404, 3001);
  });
});

describe('the upload', () => {
  it('resumes after a cut from the last full chunk; the operator downloads the same bytes; a webhook once', async () => {
    const { t, d } = await charger();
    const hook = await tp.http.post('/v1/operator/webhooks', {
      token: t.token,
      json: { url: receiver.url, events: ['diagnostics.available'] },
    });
    expect(hook.status, hook.text).toBe(200);
    receiver.trust(hook.body.data.secret);
    const received = receiver.received.length;
    const { diagnostics_id: id } = await requested(t.token, d);
    const archive = archiveOf(2 * CHUNK + CHUNK / 2);

    // Cut with one chunk stored and half of the next on its way.
    await putCut(d, id, archive, 0, CHUNK);
    await new Promise((r) => setTimeout(r, 200));
    const cut = await state(d, id);
    expect(cut.body.data).toEqual({
      diagnostics_id: id,
      status: 'uploading',
      received: CHUNK,
      size: archive.length,
    });
    expect(await viewOf(t, id)).toMatchObject({ status: 'uploading', size: CHUNK, sha256: null });
    expectError(await tp.http.get(`/v1/operator/diagnostics/${id}/content`, { token: t.token }), 409, 4001);

    // The rest, from where the platform's copy ends.
    const rest = await put(d, id, archive, { first: cut.body.data.received });
    expect(rest.status, rest.text).toBe(200);
    expect(rest.body.data).toEqual({
      diagnostics_id: id,
      status: 'available',
      received: archive.length,
      size: archive.length,
    });
    const v = await viewOf(t, id);
    expect(v).toMatchObject({ status: 'available', size: archive.length, sha256: sha256(archive) });

    const whole = await content(t.token, id);
    expect(whole.status).toBe(200);
    expect(whole.body.equals(archive)).toBe(true);
    expect(whole.headers).toMatchObject({
      'content-type': 'application/gzip',
      'content-length': String(archive.length),
      etag: `"${sha256(archive)}"`,
      'accept-ranges': 'bytes',
      'content-disposition': `attachment; filename="${id}.tar.gz"`,
    });
    const part = await content(t.token, id, { range: `bytes=${CHUNK - 10}-`, 'if-range': `"${v.sha256}"` });
    expect(part.status).toBe(206);
    expect(part.headers['content-range']).toBe(`bytes ${CHUNK - 10}-${archive.length - 1}/${archive.length}`);
    expect(part.body.equals(archive.subarray(CHUNK - 10))).toBe(true);

    // Once: a state asked again, and a PUT again (409 with the state), send nothing more.
    expect((await state(d, id)).body.data.status).toBe('available');
    const again = await put(d, id, archive);
    expectError(again, 409, 4001);
    expect(again.body.details).toEqual({
      diagnostics_id: id,
      status: 'available',
      received: archive.length,
      size: archive.length,
    });
    await tp.platform.webhooks.deliverDue();
    const got = receiver.received.slice(received).filter((r) => r.event?.type === 'diagnostics.available');
    expect(got).toHaveLength(1);
    expect(got[0]!.verifiedWith).toHaveLength(1);
    expect(webhookEventBody('diagnostics.available').safeParse(got[0]!.event).success).toBe(true);
    expect(got[0]!.event.data).toEqual({
      diagnostics_id: id,
      device_id: d.deviceId,
      size: archive.length,
      sha256: sha256(archive),
    });
  });

  it('takes the archive in pieces smaller than a chunk (each piece’s end kept), and in one piece', async () => {
    const { t, d } = await charger();
    const { diagnostics_id: id } = await requested(t.token, d);
    const archive = archiveOf(CHUNK + 1000);
    const cuts = [0, 1000, CHUNK - 1, CHUNK + 5, archive.length];
    for (let i = 0; i + 1 < cuts.length; i++) {
      const res = await put(d, id, archive, { first: cuts[i], last: cuts[i + 1]! - 1 });
      expect(res.status, res.text).toBe(200);
      expect(res.body.data.received).toBe(cuts[i + 1]);
    }
    expect((await state(d, id)).body.data.status).toBe('available');
    expect((await content(t.token, id)).body.equals(archive)).toBe(true);

    const { diagnostics_id: once } = await requested(t.token, d);
    const small = archiveOf(100);
    expect((await put(d, once, small)).body.data).toMatchObject({ status: 'available', size: small.length });
    expect((await content(t.token, once)).body.equals(small)).toBe(true);
  });

  it('refuses a FIRST other than what it holds (409 with the state), another size, and over 20 MiB (413)', async () => {
    const { t, d } = await charger();
    const { diagnostics_id: id } = await requested(t.token, d);
    const archive = archiveOf(3 * CHUNK);
    expect((await put(d, id, archive, { last: CHUNK - 1 })).body.data.received).toBe(CHUNK);
    for (const first of [0, CHUNK + 1, CHUNK - 1]) {
      const res = await put(d, id, archive, { first });
      expectError(res, 409, 4001);
      expect(res.body.details).toEqual({
        diagnostics_id: id,
        status: 'uploading',
        received: CHUNK,
        size: archive.length,
      });
    }
    const otherSize = await put(d, id, archive, { first: CHUNK, size: archive.length + 1 });
    expectError(otherSize, 409, 4001);
    expect(otherSize.body.details.size).toBe(archive.length);

    const { diagnostics_id: big } = await requested(t.token, d);
    const over = await put(d, big, Buffer.alloc(10), { range: `bytes 0-9/${DIAGNOSTICS_MAX_BYTES + 1}` });
    expectError(over, 413, 1002);
    expect((await state(d, big)).body.data).toMatchObject({ status: 'requested', received: 0 });

    for (const range of ['bytes 0-9', 'bytes 5-4/10', 'bytes 0-10/10', 'items 0-9/10']) {
      const bad = await put(d, big, Buffer.alloc(10), { range });
      expectError(bad, 400, 1001);
      expect(bad.body.details.field).toBe('content-range');
    }
    const longer = await put(d, big, archive, { last: 9, size: 100, body: Buffer.alloc(20) });
    expectError(longer, 400, 1001);
    const json = await tp.http.call('PUT', `/v1/device/diagnostics/${big}`, { token: d.token, json: {} });
    expectError(json, 400, 1001);
  });

  it('another charger’s diagnostics answer 404 to GET and PUT, as missing ones do', async () => {
    const { t, d } = await charger();
    const other = await registerDevice(tp, sn(), t.siteId);
    const { diagnostics_id: id } = await requested(t.token, d);
    const archive = archiveOf(10);
    const foreign = [await state(other, id), await put(other, id, archive)];
    const missing = [
      await state(other, 'diag_00000000000000000000'),
      await put(other, 'diag_00000000000000000000', archive),
    ];
    for (const [i, res] of foreign.entries()) {
      expectError(res, 404, 3001);
      expect(res.text).toBe(missing[i]!.text);
    }
    expect((await state(d, id)).body.data).toMatchObject({ status: 'requested', received: 0 });
  });
});

describe('failures', () => {
  it('an archive that is not valid gzip fails the request, with why', async () => {
    const { t, d } = await charger();
    const { diagnostics_id: id } = await requested(t.token, d);
    const archive = archiveOf(CHUNK);
    // Its CRC no longer matches.
    archive.writeUInt8(archive.readUInt8(archive.length - 6) ^ 0xff, archive.length - 6);
    const res = await put(d, id, archive);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ status: 'failed', received: archive.length });
    const v = await viewOf(t, id);
    expect(v).toMatchObject({ status: 'failed', sha256: null });
    expect(v.reason).toMatch(/not valid gzip/);
    expectError(await tp.http.get(`/v1/operator/diagnostics/${id}/content`, { token: t.token }), 409, 4001);
    expectError(await put(d, id, archive), 409, 4001);
  });

  it('the command failing, rejected or expiring fails the request with its reason; not once available', async () => {
    const { t, d } = await charger();
    const failed = await requested(t.token, d);
    const rejected = await requested(t.token, d);
    const done = await requested(t.token, d);
    await poll(d);
    const small = archiveOf(100);
    expect((await put(d, done.diagnostics_id, small)).body.data.status).toBe('available');
    await report(d, failed.command_id, { status: 'failed', reason: 'diagnostics: disk full' });
    await report(d, rejected.command_id, { status: 'rejected', reason: 'busy' });
    await report(d, done.command_id, { status: 'failed', reason: 'too late' });
    expect(await viewOf(t, failed.diagnostics_id)).toMatchObject({
      status: 'failed',
      reason: 'diagnostics: disk full',
    });
    expect(await viewOf(t, rejected.diagnostics_id)).toMatchObject({ status: 'failed', reason: 'busy' });
    expect(await viewOf(t, done.diagnostics_id)).toMatchObject({ status: 'available' });
    expect((await state(d, failed.diagnostics_id)).body.data.status).toBe('failed');
    // The charger reporting the same again changes nothing.
    await report(d, failed.command_id, { status: 'failed', reason: 'diagnostics: disk full' });

    // Last in this file: the clock moves a day on (the tokens issued before expire with it).
    const late = await requested(t.token, d);
    tp.advance(COMMAND_EXPIRY_SECONDS.upload_diagnostics * 1000 + 1000);
    await tp.platform.sweep();
    const token = await operatorToken(tp.http, t.clientId, t.clientSecret);
    expect(await viewOf({ ...t, token }, late.diagnostics_id)).toMatchObject({
      status: 'failed',
      reason: 'no report before expiry',
    });
  });
});

describe('retention', () => {
  it('deletes a request and its archive 30 days after it was made, and keeps a newer one', async () => {
    const own = await startTestPlatform({ tokenTtlSeconds: 90 * 86_400 });
    const calls = diagnosticsCalls(() => own);
    const stored = await openStoredData(own.dataDir);
    try {
      const t = await createTenant(own, 'diagnostics-retention');
      const d = await registerDevice(own, sn(), t.siteId);
      const archive = archiveOf(2 * CHUNK);
      const old = await calls.requested(t.token, d);
      expect((await calls.put(d, old.diagnostics_id, archive)).body.data.status).toBe('available');
      own.advance(10 * 86_400_000);
      const newer = await calls.requested(t.token, d);
      expect((await calls.put(d, newer.diagnostics_id, archive)).body.data.status).toBe('available');
      const chunks = (id: string) =>
        stored.value('SELECT COUNT(*) AS n FROM diagnostics_chunks WHERE diagnostics_id = ?', [id]);
      expect(await chunks(old.diagnostics_id)).toBe(3);

      own.advance(21 * 86_400_000);
      await own.store.runMaintenance();
      expectError(await calls.view(t.token, old.diagnostics_id), 404, 3001);
      expect(await chunks(old.diagnostics_id)).toBe(0);
      expect(
        await stored.value('SELECT COUNT(*) AS n FROM diagnostics WHERE diagnostics_id = ?', [
          old.diagnostics_id,
        ]),
      ).toBe(0);
      expect((await calls.view(t.token, newer.diagnostics_id)).body.data.status).toBe('available');
      expect(await chunks(newer.diagnostics_id)).toBe(3);
      expect(own.store.maintenanceStats().pruned.diagnostics).toBe(1);
    } finally {
      await stored.close();
      await own.stop();
    }
  });
});
