import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTenant,
  expectError,
  type HttpResult,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';

/**
 * Free text (`reason`, `message`, `description`) refuses control characters with 400/1001 naming the field
 * (DESIGN.md §18): C0 with tab and newline, DEL and C1. Real HTTPS, each request schema that has one.
 */
let tp: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let device: Awaited<ReturnType<typeof registerDevice>>;
beforeAll(async () => {
  tp = await startTestPlatform();
  tenant = await createTenant(tp, 'Free Text Co');
  device = await registerDevice(tp, 'FREE-TEXT-1', tenant.siteId);
});
afterAll(async () => {
  await tp.stop();
});

const now = () => new Date().toISOString();
const BAD = [
  ['ESC (a terminal escape)', 'ok\u001b[2J'],
  ['newline', 'two\nlines'],
  ['tab', 'a\tb'],
  ['NUL', 'a\u0000b'],
  ['DEL', 'a\u007fb'],
  ['C1 CSI', 'a\u009b31mb'],
] as const;

function refused(res: HttpResult, field: string): void {
  const body = expectError(res, 400, 1001);
  expect(body.details.field).toBe(field);
  expect(body.message).toContain('control characters');
}

describe.each(BAD)('free text with %s', (_what, text) => {
  it('is refused in a webhook description, on create and on change', async () => {
    refused(
      await tp.http.post('/v1/operator/webhooks', {
        token: tenant.token,
        json: { url: 'https://hooks.example.com/x', events: ['*'], description: text },
      }),
      'description',
    );
  });

  it('is refused in a flexibility reason', async () => {
    refused(
      await tp.http.post('/v1/operator/control/flexibility', {
        token: tenant.token,
        json: {
          target_type: 'site',
          target_ids: [tenant.siteId],
          command: 'pause_charging',
          params: { duration: 600, reason: text },
        },
      }),
      'params.reason',
    );
  });

  it('is refused in a stop reason', async () => {
    refused(
      await tp.http.post(`/v1/operator/devices/${device.deviceId}/connectors/1/stop`, {
        token: tenant.token,
        json: { reason: text },
      }),
      'reason',
    );
  });

  it("is refused in a charger's command status reason, event message and firmware message", async () => {
    refused(
      await tp.http.post('/v1/device/commands/cmd_nothing/status', {
        token: device.token,
        json: { status: 'failed', reason: text },
      }),
      'reason',
    );
    refused(
      await tp.http.post('/v1/device/events', {
        token: device.token,
        json: { events: [{ event_id: 'ev-free-1', kind: 'boot', timestamp: now(), message: text }] },
      }),
      'events.0.message',
    );
    refused(
      await tp.http.post('/v1/device/firmware/status', {
        token: device.token,
        json: { status: 'failed', message: text, timestamp: now() },
      }),
      'message',
    );
  });
});

describe('free text without control characters', () => {
  it('is taken, non-ASCII included', async () => {
    const hook = await tp.http.post('/v1/operator/webhooks', {
      token: tenant.token,
      json: { url: 'https://hooks.example.com/x', events: ['*'], description: 'Depot Süd — “peak” ⚡' },
    });
    expect(hook.status, hook.text).toBe(200);
    expect(hook.body.data.description).toBe('Depot Süd — “peak” ⚡');
    const id = hook.body.data.webhook_id;
    refused(
      await tp.http.patch(`/v1/operator/webhooks/${id}`, {
        token: tenant.token,
        json: { description: 'x\r\ny' },
      }),
      'description',
    );
    await tp.http.delete(`/v1/operator/webhooks/${id}`, { token: tenant.token });
    const stop = await tp.http.post(`/v1/operator/devices/${device.deviceId}/connectors/1/stop`, {
      token: tenant.token,
      json: { reason: 'grid peak ½' },
    });
    expect(stop.status, stop.text).toBe(200);
  });
});

// Event data and a VIN are kept as the charger sent them (a newline included), but never with NUL: PostgreSQL's
// `text` and `jsonb` cannot hold it, so it is refused alike on both backends rather than failing on one (a 500).
describe('text a charger stores as it sent it', () => {
  const event = (data: Record<string, string>) => ({
    events: [
      {
        event_id: `ev-${Object.keys(data).length}-${Math.random()}`,
        kind: 'fault_raised',
        timestamp: now(),
        data,
      },
    ],
  });
  const record = (vin: string) => ({
    records: [
      {
        record_id: `rec-${Math.random()}`,
        connector_id: 1,
        start_time: new Date(Date.now() - 60_000).toISOString(),
        end_time: now(),
        energy: 1,
        vehicle_info: { vin },
      },
    ],
  });

  it('refuses NUL in an event data value or key, and in a VIN (400/1001 naming the field)', async () => {
    const value = expectError(
      await tp.http.post('/v1/device/events', {
        token: device.token,
        json: event({ fault_code: 'E\u000042' }),
      }),
      400,
      1001,
    );
    expect(value.details.field).toBe('events.0.data.fault_code');
    expect(value.message).toContain('NUL');
    const key = expectError(
      await tp.http.post('/v1/device/events', { token: device.token, json: event({ 'a\u0000b': 'x' }) }),
      400,
      1001,
    );
    expect(key.details.field).toMatch(/^events\.0\.data/);
    const vin = expectError(
      await tp.http.post('/v1/device/charging-records', {
        token: device.token,
        json: record('WVW\u0000ZZZ'),
      }),
      400,
      1001,
    );
    expect(vin.details.field).toBe('records.0.vehicle_info.vin');
  });

  it('takes and returns other control characters there as sent', async () => {
    const data = { fault_code: 'E42', trace: 'line one\nline two\ttabbed' };
    const sent = event(data);
    const up = await tp.http.post('/v1/device/events', { token: device.token, json: sent });
    expect(up.status, up.text).toBe(200);
    const events = await tp.http.get(`/v1/operator/devices/${device.deviceId}/events`, {
      token: tenant.token,
    });
    expect(events.status, events.text).toBe(200);
    const stored = events.body.data.items.find(
      (e: { event_id: string }) => e.event_id === sent.events[0]!.event_id,
    );
    expect(stored?.data).toEqual(data);
    const rec = await tp.http.post('/v1/device/charging-records', {
      token: device.token,
      json: record('WVW\tZZZ'),
    });
    expect(rec.status, rec.text).toBe(200);
    expect(rec.body.data.accepted).toBe(1);
  });
});
