import { expect } from 'vitest';
import type { OutboxKind } from '../../agent/core/outbox-policy.js';
import { openAgentStore } from '../../agent/store/agent-store.js';
import type { createTenant, TestPlatform } from './platform.js';

/**
 * What agent-fuzz.test.ts reads of its agent (closed sessions, journal, outbox) and of the real platform
 * (charging records, command states), and the commands it queues there: on the platform, tenant, charger and
 * data directory that `target()` returns.
 */

interface FuzzedAgent {
  tp: TestPlatform;
  tenant: Awaited<ReturnType<typeof createTenant>>;
  deviceId: string;
  dataDir: string;
  /** Every command queued so far. */
  commandIds: string[];
}

export function fuzzedAgentViews(target: () => FuzzedAgent) {
  async function platformRecordIds(): Promise<string[]> {
    const { tp, tenant, deviceId } = target();
    const page = await tp.store.listChargingRecords([tenant.operatorId], {
      device_id: deviceId,
      page: 1,
      size: 100_000,
    });
    return page.items.map((r) => r.record_id);
  }

  /** The agent's closed sessions, journal and outbox (read-only, also while it runs). */
  function agentView() {
    const { dataDir, commandIds } = target();
    const store = openAgentStore(dataDir, { readonly: true });
    try {
      const sessions = store.listSessions(100_000);
      const outbox = store.outbox.peek(1_000_000);
      const byKind = (kind: OutboxKind) => outbox.filter((i) => i.kind === kind);
      return {
        closed: sessions.filter((s) => s.endedAt !== undefined).map((s) => s.recordId),
        all: sessions.map((s) => s.recordId),
        journal: new Map(commandIds.map((id) => [id, store.journalGet(id)?.status])),
        queuedRecords: byKind('charging_record').map((i) => (i.payload as { record_id: string }).record_id),
        queuedStatuses: byKind('command_status').map(
          (i) => i.payload as { command_id: string; status: string },
        ),
      };
    } finally {
      store.close();
    }
  }

  /** The platform holds exactly the agent's closed sessions and the agent's command outcomes. */
  async function converged(): Promise<string | undefined> {
    const { tp, commandIds } = target();
    const onPlatform = await platformRecordIds();
    const view = agentView();
    if (new Set(onPlatform).size !== onPlatform.length) return 'a record twice on the platform';
    const platform = new Set(onPlatform);
    const missing = view.closed.filter((id) => !platform.has(id));
    if (missing.length > 0) return `${missing.length} closed sessions not on the platform`;
    const all = new Set(view.all);
    const unknown = onPlatform.filter((id) => !all.has(id));
    if (unknown.length > 0) return `records the agent never had: ${unknown.join(', ')}`;
    for (const id of commandIds) {
      const status = (await tp.store.getCommand(id))?.command.status;
      const journal = view.journal.get(id);
      if (!['rejected', 'succeeded', 'failed'].includes(journal ?? '') || status !== journal)
        return `command ${id}: platform ${status}, journal ${journal}`;
    }
    if (view.queuedStatuses.length > 0) return `${view.queuedStatuses.length} statuses still queued`;
    return undefined;
  }

  async function queueCommands(run: number): Promise<string[]> {
    const { tp, tenant, deviceId } = target();
    const post = async (path: string, json: unknown) => {
      const res = await tp.http.post(path, { token: tenant.token, json });
      expect(res.status, res.text).toBe(200);
      return res.body.data.command_id as string;
    };
    const base = `/v1/operator/devices/${deviceId}/connectors`;
    return [
      await post(`${base}/${1 + (run % 2)}/stop`, { reason: 'user_request' }),
      await post(`${base}/2/schedule`, {
        schedule_id: `fuzz-${run}`,
        type: 'daily',
        time_slots: [{ start: '00:00', end: '00:00', power_limit: 5 + run }],
        timezone: 'UTC',
      }),
      await post(`${base}/${2 - (run % 2)}/start`, { power_limit: 7 }),
    ];
  }

  return { platformRecordIds, agentView, converged, queueCommands };
}
