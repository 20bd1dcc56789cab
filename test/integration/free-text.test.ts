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
