import { expect } from 'vitest';
import { createTenant, type HttpResult, type RegisteredDevice, type TestPlatform } from './platform.js';

/**
 * The calls of the command-lifecycle tests (command-lifecycle, command-reports-and-cancel, command-controls):
 * a charger's heartbeat and poll, its status reports, an operator's stop and command view, on the platform that
 * `platform()` returns (each file starts its own in beforeAll). The fake clock only moves forward.
 */

export interface Pending {
  command_id: string;
  command: string;
  params: Record<string, unknown>;
  expiry: string;
}
export interface HistoryEntry {
  status: string;
  at: string;
  reason?: string;
}
export type Tenant = Awaited<ReturnType<typeof createTenant>>;

export const ids = (cs: Pending[]) => cs.map((c) => c.command_id);

export function expectWithin(at: string, w: { before: number; after: number }): void {
  expect(new Date(at).toISOString()).toBe(at);
  const ms = Date.parse(at);
  expect(ms).toBeGreaterThanOrEqual(w.before);
  expect(ms).toBeLessThanOrEqual(w.after);
}
export function statuses(history: HistoryEntry[]): string[] {
  return history.map((h) => h.status);
}

export function lifecycleCalls(platform: () => TestPlatform) {
  const advance = (ms: number): void => platform().advance(ms);
  const platformNow = (): number => platform().now();
  const isoNow = () => new Date(platformNow()).toISOString();

  let counter = 0;
  function sn(): string {
    counter += 1;
    return `LC-${process.pid}-${counter}-${Math.random().toString(36).slice(2, 8)}`;
  }
  async function tenant(): Promise<Tenant> {
    counter += 1;
    return createTenant(platform(), `lifecycle-${counter}`);
  }

  async function heartbeat(d: RegisteredDevice): Promise<Pending[]> {
    const res = await platform().http.post('/v1/device/heartbeat', {
      token: d.token,
      json: { timestamp: isoNow(), status: 'online', fault_code: 0 },
    });
    expect(res.status).toBe(200);
    return res.body.data.commands as Pending[];
  }
  async function poll(d: RegisteredDevice): Promise<Pending[]> {
    const res = await platform().http.get('/v1/device/commands?wait=0', { token: d.token });
    expect(res.status).toBe(200);
    return res.body.data.commands as Pending[];
  }

  function report(d: RegisteredDevice, commandId: string, body: unknown): Promise<HttpResult> {
    return platform().http.post(`/v1/device/commands/${commandId}/status`, { token: d.token, json: body });
  }
  async function reportOk(
    d: RegisteredDevice,
    commandId: string,
    body: Record<string, unknown>,
    expected: { status: string; changed: boolean },
  ): Promise<void> {
    const res = await report(d, commandId, body);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ code: 0, message: 'success', data: { command_id: commandId, ...expected } });
  }

  async function stop(t: Tenant, d: RegisteredDevice, connector = 1): Promise<string> {
    const res = await platform().http.post(
      `/v1/operator/devices/${d.deviceId}/connectors/${connector}/stop`,
      {
        token: t.token,
        json: {},
      },
    );
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe('queued');
    return res.body.data.command_id as string;
  }
  // biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
  async function command(t: Tenant, commandId: string): Promise<any> {
    const res = await platform().http.get(`/v1/operator/commands/${commandId}`, { token: t.token });
    expect(res.status).toBe(200);
    expect(res.body.code).toBe(0);
    return res.body.data;
  }
  /** Runs `fn` and returns the platform-clock window [before, after] it ran in. */
  async function during<T>(fn: () => Promise<T>): Promise<{ result: T; before: number; after: number }> {
    const before = platformNow();
    const result = await fn();
    return { result, before, after: platformNow() };
  }

  return {
    advance,
    platformNow,
    isoNow,
    sn,
    tenant,
    heartbeat,
    poll,
    report,
    reportOk,
    stop,
    command,
    during,
  };
}
