import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'vitest';
import { agentStoreFile, openAgentStore } from '../../agent/store/agent-store.js';
import { sleep } from './agent.js';
import type { createTenant, TestPlatform } from './platform.js';

/**
 * The operator and the between-kills check of agent-kill-loop.test.ts: an operator sending one charger stop,
 * start, schedule, schedule deletion and flexibility commands, drawn from the test's seeded `random` (so one
 * seed replays one run); and, with the agent down, the check that its store is whole and holds everything the
 * platform acknowledged from it.
 */

export const FINAL_STATUSES = ['succeeded', 'failed', 'rejected'];
const RANK: Record<string, number> = { received: 0, accepted: 1, succeeded: 2, failed: 2, rejected: 2 };

export interface IssuedCommand {
  id: string;
  what: string;
  queuedAt: number;
  whileDown: boolean;
}

interface LoadTarget {
  tp: TestPlatform;
  tenant: Awaited<ReturnType<typeof createTenant>>;
  deviceId: string;
  random: () => number;
}

export interface OperatorLoad {
  /** Every command issued, in order (a flexibility request adds the charger's command of it). */
  commands: IssuedCommand[];
  /** The agent is down now: commands issued meanwhile are marked `whileDown`. */
  down: boolean;
  /** One command, drawn at random. */
  issue(): Promise<void>;
  /** Ends the background loop `operatorLoad` started, after its current command. */
  stop(): Promise<void>;
}

/** Starts the operator, concurrently: one command every 0.4–1.2 s, whatever the agent is doing. */
export function operatorLoad(target: LoadTarget): OperatorLoad {
  const { random } = target;
  const between = (lo: number, hi: number) => lo + random() * (hi - lo);
  const schedules = new Map<number, Set<string>>([
    [1, new Set()],
    [2, new Set()],
  ]);
  let operating = true;
  const load: OperatorLoad = {
    commands: [],
    down: false,
    issue: () => issue(target, load, schedules, between),
    async stop() {
      operating = false;
      await operator;
    },
  };
  const operator = (async () => {
    while (operating) {
      await load.issue();
      await sleep(between(400, 1_200));
    }
  })();
  return load;
}

async function issue(
  { tp, tenant, deviceId, random }: LoadTarget,
  load: OperatorLoad,
  schedules: Map<number, Set<string>>,
  between: (lo: number, hi: number) => number,
): Promise<void> {
  const { commands } = load;
  const base = `/v1/operator/devices/${deviceId}/connectors`;
  const c = random() < 0.5 ? 1 : 2;
  const roll = random();
  let res: Awaited<ReturnType<TestPlatform['http']['post']>>;
  let what: string;
  if (roll < 0.25) {
    what = `stop ${c}`;
    res = await tp.http.post(`${base}/${c}/stop`, {
      token: tenant.token,
      json: { reason: 'user_request' },
    });
  } else if (roll < 0.5) {
    const kw = Math.round(between(3, 22));
    what = `start ${c} ${kw} kW`;
    res = await tp.http.post(`${base}/${c}/start`, { token: tenant.token, json: { power_limit: kw } });
  } else if (roll < 0.7) {
    const sid = `s${1 + Math.floor(random() * 3)}`;
    what = `schedule ${c} ${sid}`;
    res = await tp.http.post(`${base}/${c}/schedule`, {
      token: tenant.token,
      json: {
        schedule_id: sid,
        type: 'daily',
        time_slots: [{ start: '00:00', end: '00:00', power_limit: Math.round(between(4, 22)) }],
        timezone: 'UTC',
      },
    });
    schedules.get(c)!.add(sid);
  } else if (roll < 0.8 && schedules.get(c)!.size > 0) {
    const sid = [...schedules.get(c)!][0]!;
    schedules.get(c)!.delete(sid);
    what = `delete schedule ${c} ${sid}`;
    res = await tp.http.delete(`${base}/${c}/schedules/${sid}`, { token: tenant.token });
  } else {
    // Flexibility: a site-wide power cap; its window outlasts the test, so it never expires undelivered.
    const percent = 40 + Math.floor(random() * 61);
    what = `flexibility ${percent} %`;
    const control = await tp.http.post('/v1/operator/control/flexibility', {
      token: tenant.token,
      json: {
        target_type: 'site',
        target_ids: [tenant.siteId],
        command: 'set_power_limit',
        params: { power_limit_percent: percent, duration: 900 },
      },
    });
    expect(control.status, control.text).toBe(200);
    const fanned = await tp.store.getControl(control.body.data.control_id);
    for (const cmd of fanned?.commands ?? [])
      commands.push({ id: cmd.command_id, what, queuedAt: Date.now(), whileDown: load.down });
    return;
  }
  expect(res.status, `${what}: ${res.text}`).toBe(200);
  commands.push({ id: res.body.data.command_id, what, queuedAt: Date.now(), whileDown: load.down });
}

/**
 * With the agent down: the store is whole and holds everything the platform acknowledged from it. Returns
 * how many sessions the agent has closed so far.
 */
export async function checkWhileDown(
  { tp, tenant, deviceId }: Omit<LoadTarget, 'random'>,
  dataDir: string,
  commands: readonly IssuedCommand[],
  kill: number,
): Promise<number> {
  const db = new Database(agentStoreFile(dataDir), { readonly: true, fileMustExist: true });
  try {
    expect(db.pragma('integrity_check', { simple: true }), `integrity after kill ${kill}`).toBe('ok');
  } finally {
    db.close();
  }
  const store = openAgentStore(dataDir, { readonly: true });
  try {
    for (const { id } of commands) {
      const platform = (await tp.store.getCommand(id))?.command.status ?? 'missing';
      if (!(platform in RANK)) continue; // queued, delivered, expired
      const journal = store.journalGet(id)?.status;
      expect(journal, `kill ${kill}: ${id} is ${platform} on the platform`).toBeDefined();
      if (FINAL_STATUSES.includes(platform)) expect(journal, `kill ${kill}: ${id}`).toBe(platform);
      else expect(RANK[journal!]!, `kill ${kill}: ${id} ${platform}/${journal}`).toBeGreaterThanOrEqual(1);
    }
    const closed = new Set(
      store
        .listSessions(100_000)
        .filter((s) => s.endedAt !== undefined)
        .map((s) => s.recordId),
    );
    const records = await tp.store.listChargingRecords([tenant.operatorId], {
      device_id: deviceId,
      page: 1,
      size: 100_000,
    });
    for (const r of records.items)
      expect(closed.has(r.record_id), `kill ${kill}: record ${r.record_id}`).toBe(true);
    return closed.size;
  } finally {
    store.close();
  }
}

/** The agent's JSON log lines, every run (one rotating file; a line cut by SIGKILL is skipped). */
export function logLines(dataDir: string): Array<Record<string, unknown>> {
  const lines: Array<Record<string, unknown>> = [];
  for (const file of ['agent.log.3', 'agent.log.2', 'agent.log.1', 'agent.log']) {
    const full = path.join(dataDir, 'logs', file);
    if (!existsSync(full)) continue;
    for (const line of readFileSync(full, 'utf8').split('\n')) {
      try {
        if (line.startsWith('{')) lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // the last line of a killed run may be cut short
      }
    }
  }
  return lines;
}
