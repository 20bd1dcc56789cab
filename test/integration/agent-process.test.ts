import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openAgentStore } from '../../agent/store/agent-store.js';
import { type AgentRunProcess, sleep, spawnAgentRun, tempDir, waitFor } from '../helpers/agent.js';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * The BUILT agent (`node dist/agent/cli.js run ...`, DESIGN.md §11) as its own process against a real
 * platform: it registers and reports, runs commands, is killed with SIGKILL in the middle of its work and
 * restarted without losing or doubling a charging record or a command status, and stops cleanly on SIGTERM.
 * Run `npm run build` first.
 */

type AgentProcess = AgentRunProcess;
const spawnAgent = (args: string[]): AgentProcess => spawnAgentRun(args);

async function deviceIdOf(agent: AgentProcess): Promise<string> {
  const line = await waitFor(
    () => agent.lines().find((l) => l.msg === 'platform identity ready'),
    (l) => l !== undefined,
    15_000,
  );
  if (!line) throw new Error(`the agent did not register:\n${agent.stderr()}`);
  return line.device_id as string;
}

let tp: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let tmp: ReturnType<typeof tempDir>;
let args: string[];
const SN = `PROC-${process.pid}`;
const running: AgentProcess[] = [];

beforeAll(async () => {
  tp = await startTestPlatform();
  tenant = await createTenant(tp, 'agent-process');
  tmp = tempDir('agent-process-');
  const ca = path.join(tmp.dir, 'ca.pem');
  writeFileSync(ca, tp.ca);
  const config = path.join(tmp.dir, 'agent.json');
  // Vehicles come and go every few seconds, so sessions end (and charging records are owed) during the test.
  writeFileSync(
    config,
    JSON.stringify({
      connectors: 2,
      'hal-options': {
        seed: 7,
        initialOccupancy: 1,
        dwellMs: [1200, 2500],
        meanVacancyMs: 300,
        faults: false,
      },
    }),
  );
  args = [
    '--data-dir',
    path.join(tmp.dir, 'data'),
    '--platform-url',
    tp.url,
    '--ca',
    ca,
    '--sn',
    SN,
    '--config',
    config,
  ];
});

afterAll(async () => {
  for (const p of running) p.child.kill('SIGKILL');
  await tp?.stop();
  tmp?.remove();
});

describe('charger-agent run (built, as a process)', () => {
  it('survives SIGKILL mid-run without losing or doubling records and command statuses, and stops on SIGTERM', async () => {
    const first = spawnAgent(args);
    running.push(first);
    const deviceId = await deviceIdOf(first);
    await tp.store.assignDevice(deviceId, tenant.siteId);
    await waitFor(
      () => tp.store.getDevice(deviceId),
      (d) => d?.last_heartbeat_ms !== null && d?.last_heartbeat_ms !== undefined,
    );

    const queue = async (path: string, json: unknown) => {
      const res = await tp.http.post(path, { token: tenant.token, json });
      expect(res.status, res.text).toBe(200);
      return res.body.data.command_id as string;
    };
    const commands = [
      await queue(`/v1/operator/devices/${deviceId}/connectors/1/schedule`, {
        schedule_id: 'all-day',
        type: 'daily',
        time_slots: [{ start: '00:00', end: '00:00', power_limit: 7 }],
        timezone: 'UTC',
      }),
    ];
    await waitFor(
      () => tp.store.getCommand(commands[0]!),
      (c) => c?.command.status === 'succeeded',
    );
    await sleep(2_500); // sessions start and end; records flow

    // Commands in flight, then the power cut.
    commands.push(
      await queue(`/v1/operator/devices/${deviceId}/connectors/2/stop`, { reason: 'user_request' }),
    );
    commands.push(
      await queue(`/v1/operator/devices/${deviceId}/connectors/1/schedule`, {
        schedule_id: 'evening',
        type: 'daily',
        time_slots: [{ start: '18:00', end: '23:00' }],
        timezone: 'UTC',
      }),
    );
    await sleep(30);
    first.child.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');

    const second = spawnAgent(args);
    running.push(second);
    expect(await deviceIdOf(second)).toBe(deviceId);
    for (const id of commands) {
      const c = await waitFor(
        () => tp.store.getCommand(id),
        (v) => v?.command.status === 'succeeded',
        10_000,
      );
      expect(c?.command.status, `${id}: ${JSON.stringify(c)}`).toBe('succeeded');
    }
    await sleep(2_500);

    second.child.kill('SIGTERM');
    const exit = await second.exited;
    expect(exit.code, second.stderr()).toBe(0);
    const view = await tp.http.get(`/v1/operator/devices/${deviceId}`, { token: tenant.token });
    expect(view.body.data.status).toBe('offline');

    const store = openAgentStore(path.join(tmp.dir, 'data'), { readonly: true });
    try {
      expect(store.outbox.size().items).toBe(0);
      // Every command ran once and is journaled as succeeded.
      for (const id of commands) expect(store.journalGet(id)?.status).toBe('succeeded');
      const closed = store
        .listSessions(1_000)
        .filter((s) => s.endedAt !== undefined)
        .map((s) => s.recordId)
        .sort();
      expect(closed.length).toBeGreaterThan(1);
      const records = await tp.store.listChargingRecords([tenant.operatorId], {
        device_id: deviceId,
        page: 1,
        size: 100,
      });
      // Exactly the sessions the agent closed: none lost, none twice.
      expect(records.items.map((r) => r.record_id).sort()).toEqual(closed);
      expect(records.total).toBe(closed.length);
      for (const connectorId of [1, 2]) {
        const mine = records.items
          .filter((r) => r.connector_id === connectorId)
          .sort((a, b) => Date.parse(a.start_time) - Date.parse(b.start_time));
        for (let i = 1; i < mine.length; i++) {
          // A session is never recorded twice under another id: records of one connector never overlap.
          expect(Date.parse(mine[i]!.start_time)).toBeGreaterThanOrEqual(Date.parse(mine[i - 1]!.end_time));
        }
      }
    } finally {
      store.close();
    }
  });

  it('refuses to take over a registered serial number: exit 3 with a hint to reset the device', async () => {
    const other = spawnAgent([
      '--data-dir',
      path.join(tmp.dir, 'other'),
      '--platform-url',
      tp.url,
      '--ca',
      path.join(tmp.dir, 'ca.pem'),
      '--sn',
      SN,
      '--connectors',
      '1',
    ]);
    running.push(other);
    const exit = await other.exited;
    expect(exit.code).toBe(3);
    const fatal = other.lines().find((l) => l.level === 60);
    expect(fatal?.msg).toMatch(/already has a charger registered with serial number/);
    expect(fatal?.hint).toMatch(/reset this charger/);
  });

  it('explains a bad command line: exit 2', async () => {
    const bad = spawnAgent([
      '--data-dir',
      path.join(tmp.dir, 'x'),
      '--platform-url',
      'http://insecure',
      '--sn',
      'S',
    ]);
    const exit = await bad.exited;
    expect(exit.code).toBe(2);
    expect(bad.stderr()).toMatch(/must be https/);
  });
});
