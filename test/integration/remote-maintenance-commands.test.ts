import { describe, expect, it } from 'vitest';
import { COMMAND_EXPIRY_SECONDS } from '../../shared/index.js';
import { lifecycleCalls, type Pending } from '../helpers/command-lifecycle.js';
import { expectError, type HttpResult, type RegisteredDevice, registerDevice } from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';

/**
 * The remote-maintenance commands of the operator API (DESIGN.md §20) over real HTTPS: each endpoint queues its
 * command with the params and expiry it should, the charger gets it on its heartbeat or long poll, bad bodies
 * answer 400/1001 naming the field, and a charger's `result` shows on the command. One platform for the file;
 * every test has its own tenant and charger.
 */

const tp = platformPerFile();

const { sn, tenant, heartbeat, poll, report, reportOk, command } = lifecycleCalls(() => tp);
type Tenant = Awaited<ReturnType<typeof tenant>>;

const devicePath = (d: RegisteredDevice, tail: string) => `/v1/operator/devices/${d.deviceId}/${tail}`;
const reset = (t: Tenant, d: RegisteredDevice, body?: unknown) =>
  tp.http.post(devicePath(d, 'reset'), { token: t.token, ...(body === undefined ? {} : { json: body }) });
const availability = (t: Tenant, d: RegisteredDevice, connector: number, body: unknown) =>
  tp.http.call('PUT', devicePath(d, `connectors/${connector}/availability`), { token: t.token, json: body });
const unlock = (t: Tenant, d: RegisteredDevice, connector: number) =>
  tp.http.post(devicePath(d, `connectors/${connector}/unlock`), { token: t.token });
const configure = (t: Tenant, d: RegisteredDevice, body: unknown) =>
  tp.http.patch(devicePath(d, 'configuration'), { token: t.token, json: body });

/** A tenant with one charger in its site. */
async function charger(): Promise<{ t: Tenant; d: RegisteredDevice }> {
  const t = await tenant();
  return { t, d: await registerDevice(tp, sn(), t.siteId) };
}

/** The command a queueing answer names: checks the answer, then what the operator sees of the command. */
async function queued(t: Tenant, res: HttpResult, kind: keyof typeof COMMAND_EXPIRY_SECONDS) {
  expect(res.status, res.text).toBe(200);
  expect(res.body).toEqual({
    code: 0,
    message: 'success',
    data: { command_id: expect.stringMatching(/^cmd_/), status: 'queued' },
  });
  const view = await command(t, res.body.data.command_id);
  expect(view.command).toBe(kind);
  expect(view.status).toBe('queued');
  expect(Date.parse(view.expiry) - Date.parse(view.created_at)).toBe(COMMAND_EXPIRY_SECONDS[kind] * 1000);
  return view;
}

const find = (pending: Pending[], commandId: string) => pending.find((c) => c.command_id === commandId);

describe('each endpoint queues its command for the charger', () => {
  it('reset: defaults when_idle and agent without a body; both given; delivered on the heartbeat', async () => {
    const { t, d } = await charger();
    const bare = await queued(t, await reset(t, d), 'reset');
    expect(bare.params).toEqual({ mode: 'when_idle', target: 'agent' });
    const empty = await queued(t, await reset(t, d, {}), 'reset');
    expect(empty.params).toEqual({ mode: 'when_idle', target: 'agent' });
    const given = await queued(t, await reset(t, d, { mode: 'immediate', target: 'charger' }), 'reset');
    expect(given.params).toEqual({ mode: 'immediate', target: 'charger' });
    const pending = await heartbeat(d);
    expect(find(pending, given.command_id)).toEqual({
      command_id: given.command_id,
      command: 'reset',
      params: { mode: 'immediate', target: 'charger' },
      expiry: given.expiry,
    });
    expect(find(pending, bare.command_id)?.params).toEqual({ mode: 'when_idle', target: 'agent' });
  });

  it('availability: set_availability with the connector and the flag, delivered on the long poll', async () => {
    const { t, d } = await charger();
    const off = await queued(t, await availability(t, d, 2, { available: false }), 'set_availability');
    expect(off.params).toEqual({ connector_id: 2, available: false });
    const on = await queued(t, await availability(t, d, 1, { available: true }), 'set_availability');
    expect(on.params).toEqual({ connector_id: 1, available: true });
    const pending = await poll(d);
    expect(find(pending, off.command_id)).toMatchObject({
      command: 'set_availability',
      params: { connector_id: 2, available: false },
    });
    expect(find(pending, on.command_id)?.params).toEqual({ connector_id: 1, available: true });
  });

  it('unlock: unlock_connector with the connector, no body', async () => {
    const { t, d } = await charger();
    const view = await queued(t, await unlock(t, d, 2), 'unlock_connector');
    expect(view.params).toEqual({ connector_id: 2 });
    expect(find(await heartbeat(d), view.command_id)?.params).toEqual({ connector_id: 2 });
  });

  it('configuration: set_configuration with exactly the keys given', async () => {
    const { t, d } = await charger();
    const values = { telemetry_interval_seconds: 10, log_level: 'debug', secret_rotation_days: 0 };
    const view = await queued(t, await configure(t, d, { values }), 'set_configuration');
    expect(view.params).toEqual({ values });
    expect(find(await poll(d), view.command_id)).toMatchObject({
      command: 'set_configuration',
      params: { values },
    });
  });

  it('a connector or charger that does not exist answers 404/3001 and queues nothing', async () => {
    const { t, d } = await charger();
    expectError(await availability(t, d, 9, { available: false }), 404, 3001);
    expectError(await unlock(t, d, 9), 404, 3001);
    const ghost = { ...d, deviceId: 'dev_00000000000000000000' };
    expectError(await reset(t, ghost), 404, 3001);
    expectError(await configure(t, ghost, { values: { log_level: 'warn' } }), 404, 3001);
    expectError(await tp.http.get(devicePath(ghost, 'configuration'), { token: t.token }), 404, 3001);
    expect(await heartbeat(d)).toEqual([]);
  });
});

describe('bad bodies answer 400/1001 naming the field', () => {
  it.each([
    [
      'an unknown configuration key',
      { values: { telemetry_interval_seconds: 5, colour: 'red' } },
      'values.colour',
      'red',
    ],
    [
      'a value under its bounds',
      { values: { telemetry_interval_seconds: 0 } },
      'values.telemetry_interval_seconds',
      0,
    ],
    [
      'a value over its bounds',
      { values: { heartbeat_interval_seconds: 301 } },
      'values.heartbeat_interval_seconds',
      301,
    ],
    [
      'a fraction',
      { values: { idle_telemetry_interval_seconds: 12.5 } },
      'values.idle_telemetry_interval_seconds',
      12.5,
    ],
    [
      'a number as text',
      { values: { command_poll_wait_seconds: '30' } },
      'values.command_poll_wait_seconds',
      '30',
    ],
    // A field named like a secret has its value redacted, whatever it holds (shared/validation.ts).
    [
      'a negative rotation',
      { values: { secret_rotation_days: -1 } },
      'values.secret_rotation_days',
      '[redacted]',
    ],
    ['a log level not in the table', { values: { log_level: 'verbose' } }, 'values.log_level', 'verbose'],
    ['no key at all', { values: {} }, 'values', '[object]'],
    ['no values', {}, 'values', null],
    ['a key beside values', { values: { log_level: 'info' }, reboot: true }, 'reboot', true],
  ])('PATCH configuration with %s', async (_label, body, field, value) => {
    const { t, d } = await charger();
    const err = expectError(await configure(t, d, body), 400, 1001);
    expect(err.details).toEqual({ field, value });
  });

  it.each([
    ['available as text', { available: 'false' }, 'available', 'false'],
    ['available as a number', { available: 0 }, 'available', 0],
    ['no available', {}, 'available', null],
    ['a key beside available', { available: true, reason: 'x' }, 'reason', 'x'],
  ])('PUT availability with %s', async (_label, body, field, value) => {
    const { t, d } = await charger();
    const err = expectError(await availability(t, d, 1, body), 400, 1001);
    expect(err.details).toEqual({ field, value });
  });

  it.each([
    ['a mode not known', { mode: 'later' }, 'mode', 'later'],
    ['a target not known', { target: 'firmware' }, 'target', 'firmware'],
    ['a key beside them', { mode: 'immediate', force: true }, 'force', true],
  ])('POST reset with %s', async (_label, body, field, value) => {
    const { t, d } = await charger();
    const err = expectError(await reset(t, d, body), 400, 1001);
    expect(err.details).toEqual({ field, value });
  });

  it('and queue nothing', async () => {
    const { t, d } = await charger();
    expectError(await configure(t, d, { values: { log_level: 'loud' } }), 400, 1001);
    expectError(await availability(t, d, 1, { available: 'yes' }), 400, 1001);
    expectError(await reset(t, d, { mode: 'now' }), 400, 1001);
    expect(await heartbeat(d)).toEqual([]);
  });
});

describe('a status report’s result', () => {
  it('shows on the command once a report that moved it carried one, and stays when later ones carry none', async () => {
    const { t, d } = await charger();
    const res = await configure(t, d, { values: { heartbeat_interval_seconds: 60 } });
    const id = res.body.data.command_id as string;
    await heartbeat(d);
    expect((await command(t, id)).result).toBeUndefined();
    await reportOk(d, id, { status: 'accepted' }, { status: 'accepted', changed: true });
    expect((await command(t, id)).result).toBeUndefined();
    const result = { applied: { heartbeat_interval_seconds: 60 }, nested: [1, 'two', { three: null }] };
    await reportOk(d, id, { status: 'succeeded', result }, { status: 'succeeded', changed: true });
    const view = await command(t, id);
    expect(view).toMatchObject({ status: 'succeeded', result });
    // A repeat does not move the command: its result is not taken.
    await reportOk(
      d,
      id,
      { status: 'succeeded', result: { other: true } },
      { status: 'succeeded', changed: false },
    );
    expect((await command(t, id)).result).toEqual(result);
    // The device's list of commands shows it too.
    const list = await tp.http.get(devicePath(d, 'commands'), { token: t.token });
    expect(list.body.data.items.find((c: { command_id: string }) => c.command_id === id)?.result).toEqual(
      result,
    );
  });

  it('from an accepted report is kept by a final report without one', async () => {
    const { t, d } = await charger();
    const id = (await unlock(t, d, 1)).body.data.command_id as string;
    await heartbeat(d);
    await reportOk(
      d,
      id,
      { status: 'accepted', result: { lock: 'releasing' } },
      { status: 'accepted', changed: true },
    );
    await reportOk(d, id, { status: 'failed', reason: 'lock stuck' }, { status: 'failed', changed: true });
    expect(await command(t, id)).toMatchObject({
      status: 'failed',
      reason: 'lock stuck',
      result: { lock: 'releasing' },
    });
  });

  it.each([
    ['not an object', ['a'], '[array of 1]'],
    ['nested too deep', JSON.parse(`${'{"a":'.repeat(40)}1${'}'.repeat(40)}`), '[object]'],
    ['holding a NUL character', { text: 'a\u0000b' }, '[object]'],
    ['with a NUL character in a key', { 'a\u0000b': 1 }, '[object]'],
  ])('refuses a result %s: 400/1001 on result, the command unchanged', async (_label, result, value) => {
    const { t, d } = await charger();
    const id = (await unlock(t, d, 1)).body.data.command_id as string;
    await heartbeat(d);
    const err = expectError(await report(d, id, { status: 'succeeded', result }), 400, 1001);
    expect(err.details).toEqual({ field: 'result', value });
    expect(await command(t, id)).toMatchObject({ status: 'delivered' });
  });
});
