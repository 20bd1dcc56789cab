import { randomUUID } from 'node:crypto';
import type { HttpResult, RegisteredDevice, TestPlatform } from './platform.js';

/**
 * A charger played by the test over the real device API: heartbeats, command reports and firmware reports as an
 * agent sends them, for platform tests that need a charger's side of an update without running an agent.
 */
export function scriptedCharger(tp: TestPlatform, device: RegisteredDevice) {
  const post = async (path: string, json: unknown): Promise<HttpResult> => {
    const res = await tp.http.post(path, { token: device.token, json });
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${res.text}`);
    return res;
  };
  const at = () => new Date(tp.now()).toISOString();
  return {
    deviceId: device.deviceId,
    /** A heartbeat; answers the commands waiting for the charger. */
    async heartbeat(
      status: 'online' | 'fault' = 'online',
    ): Promise<Array<{ command_id: string; command: string; params: Record<string, unknown> }>> {
      const res = await post('/v1/device/heartbeat', {
        timestamp: at(),
        status,
        fault_code: status === 'fault' ? 7 : 0,
      });
      return res.body.data.commands;
    },
    async command(
      commandId: string,
      status: 'accepted' | 'rejected' | 'succeeded' | 'failed',
      reason?: string,
    ) {
      await post(`/v1/device/commands/${commandId}/status`, { status, ...(reason ? { reason } : {}) });
    },
    async firmware(updateId: string, status: string, extra: { version?: string; message?: string } = {}) {
      await post('/v1/device/firmware/status', {
        status,
        update_id: updateId,
        report_id: `rep_${randomUUID()}`,
        timestamp: at(),
        ...extra,
      });
    },
    async errorEvent() {
      await post('/v1/device/events', {
        events: [
          { event_id: `ev_${randomUUID()}`, kind: 'fault_raised', severity: 'error', timestamp: at() },
        ],
      });
    },
  };
}
export type ScriptedCharger = ReturnType<typeof scriptedCharger>;
