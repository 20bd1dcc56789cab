#!/usr/bin/env node
import '../supported-node.js';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { benchArgsOrExit } from './bench-args.js';
import { type BenchPlatform, benchTenant, call, startBenchPlatform } from './bench-platform.js';
import { type ProcessSample, sampleProcess, summarizeSamples } from './process-sampler.js';
import { unitLaunch } from './unit-launch.js';

/**
 * Agent footprint (DESIGN.md §17: RSS at cadence ≤ a bare Node process + 25 MiB). In one run, side by side:
 * a bare `node -e "setInterval(()=>{},1000)"` (the baseline), the agent bundle (`npm run build:agent`, what
 * chargers run) started as plain `node charger-agent.mjs run`, and the same bundle started as its systemd unit
 * starts it (the unit's Node options and environment, read from the bundle's charger-agent.service). Each agent
 * has the simulated HAL with both connectors charging (telemetry every 5 s, heartbeats every 30 s) against one
 * bench platform, for `--minutes` (default 10) after a 30 s warm-up. RSS and CPU from /proc. A fourth agent,
 * started as the unit starts it, also runs a daily charging schedule in Europe/Berlin on connector 1 (set through
 * the operator API before the warm-up ends): what a charger with a schedule holds (its time-zone rules read
 * from the system's tz database).
 * Usage: node dist/simulators/bench/agent-footprint.js [--minutes 10] [--bundle DIR]
 */
const DEFAULT_BUNDLE = fileURLToPath(new URL('../../../dist-agent/', import.meta.url));
export const FOOTPRINT_GOAL_OVER_BARE_MIB = 25;

/** Starts a bundled agent on the simulated HAL against the platform, under `dir/<name>`; keeps it in `children`. */
function agentStarter(o: {
  launcher: string;
  dir: string;
  platformUrl: string;
  config: string;
  children: ChildProcess[];
}) {
  return (name: string, nodeArgs: readonly string[], env: Record<string, string>) => {
    const child = spawn(
      process.execPath,
      [
        ...nodeArgs,
        o.launcher,
        'run',
        '--data-dir',
        join(o.dir, name),
        '--platform-url',
        o.platformUrl,
        '--ca',
        join(o.dir, 'ca.pem'),
        '--sn',
        `FOOTPRINT-${name}`,
        '--hal',
        'simulated',
        '--connectors',
        '2',
        '--config',
        o.config,
      ],
      { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, ...env } },
    );
    o.children.push(child);
    return child;
  };
}

/** Samples every process each 5 s for `minutes`; one that exits fails the measurement. */
async function sampleFor(watched: readonly ChildProcess[], minutes: number): Promise<ProcessSample[][]> {
  const samples: ProcessSample[][] = watched.map(() => []);
  const end = Date.now() + minutes * 60_000;
  for (;;) {
    watched.forEach((child, i) => {
      if (child.exitCode !== null) throw new Error(`a measured process exited (${child.exitCode})`);
      samples[i]!.push(sampleProcess(child.pid!));
    });
    if (Date.now() >= end) break;
    await sleep(5_000);
  }
  return samples;
}

export async function measureAgentFootprint(minutes = 10, bundle = DEFAULT_BUNDLE) {
  const launcher = join(bundle, 'charger-agent.mjs');
  const unitFile = join(bundle, 'charger-agent.service');
  if (!existsSync(launcher) || !existsSync(unitFile))
    throw new Error(`no agent bundle in ${bundle}: run npm run build:agent first`);
  const unit = unitLaunch(await readFile(unitFile, 'utf8'));
  const platform = await startBenchPlatform();
  const dir = await mkdtemp(join(tmpdir(), 'cp-agent-foot-'));
  const children: ChildProcess[] = [];
  try {
    const config = join(dir, 'agent.json');
    await writeFile(
      config,
      JSON.stringify({
        'hal-options': { initialOccupancy: 1, dwellMs: [86_400_000, 86_400_000], faults: false },
        'log-level': 'warn',
      }),
    );
    await writeFile(join(dir, 'ca.pem'), platform.ca);
    const startAgent = agentStarter({ launcher, dir, platformUrl: platform.url, config, children });
    const plain = startAgent('plain', [], {});
    const asUnit = startAgent('unit', unit.nodeArgs, unit.env);
    const withSchedule = startAgent('schedule', unit.nodeArgs, unit.env);
    const bare = spawn(process.execPath, ['-e', 'setInterval(()=>{},1000)'], { stdio: 'ignore' });
    children.push(bare);
    const warmUp = sleep(30_000);
    const scheduleId = await setDailySchedule(platform, 'FOOTPRINT-schedule');
    await warmUp;
    const watched = [bare, plain, asUnit, withSchedule];
    const samples = await sampleFor(watched, minutes);
    assertScheduleOnCharger(join(dir, 'schedule'), scheduleId);
    for (const agent of [plain, asUnit, withSchedule]) {
      const exited = new Promise((r) => agent.once('exit', r));
      agent.kill('SIGTERM');
      await exited;
    }
    const db = new Database(join(platform.dataDir, 'platform.sqlite'), { readonly: true });
    const telemetry = (db.prepare('SELECT COUNT(*) AS n FROM telemetry').get() as { n: number }).n;
    db.close();
    const [bareNode, nodeDefaults, unitStarted, unitScheduled] = samples.map(summarizeSamples) as [
      ReturnType<typeof summarizeSamples>,
      ReturnType<typeof summarizeSamples>,
      ReturnType<typeof summarizeSamples>,
      ReturnType<typeof summarizeSamples>,
    ];
    const over = (s: typeof bareNode) => Math.round((s.rss_mean_mib - bareNode.rss_mean_mib) * 10) / 10;
    return {
      minutes,
      node: process.version,
      unit: { node_args: unit.nodeArgs, env: unit.env },
      bare_node: bareNode,
      agent_node_defaults: nodeDefaults,
      agent_as_unit: unitStarted,
      agent_as_unit_with_schedule: unitScheduled,
      over_bare_mib: {
        node_defaults: over(nodeDefaults),
        as_unit: over(unitStarted),
        as_unit_with_schedule: over(unitScheduled),
      },
      goal_over_bare_mib: FOOTPRINT_GOAL_OVER_BARE_MIB,
      // A charger with a schedule is a charger at cadence too.
      goal_met: Math.max(over(unitStarted), over(unitScheduled)) <= FOOTPRINT_GOAL_OVER_BARE_MIB,
      telemetry_records_stored: telemetry,
    };
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await platform.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Waits for the charger `sn` to register, assigns it to a new tenant's site and stores a daily schedule on its
 * connector 1 through the operator API (the charger receives it with its next heartbeat); returns its id.
 */
async function setDailySchedule(platform: BenchPlatform, sn: string): Promise<string> {
  const db = new Database(join(platform.dataDir, 'platform.sqlite'), { readonly: true, fileMustExist: true });
  let deviceId: string | undefined;
  try {
    const bySn = db.prepare('SELECT device_id FROM devices WHERE sn = ?');
    for (let i = 0; i < 100 && deviceId === undefined; i++) {
      deviceId = (bySn.get(sn) as { device_id: string } | undefined)?.device_id;
      if (deviceId === undefined) await sleep(200);
    }
  } finally {
    db.close();
  }
  if (deviceId === undefined) throw new Error(`${sn} did not register within 20 s`);
  const tenant = await benchTenant(platform, 'footprint');
  await platform.assign(deviceId, tenant.site_id);
  const token = await tenant.client();
  const schedule = {
    schedule_id: 'footprint-daily',
    type: 'daily',
    timezone: 'Europe/Berlin',
    time_slots: [{ start: '00:00', end: '00:00', power_limit: 7, action: 'charge' }],
  };
  const res = await call(platform, 'POST', `/v1/operator/devices/${deviceId}/connectors/1/schedule`, {
    token,
    json: schedule,
  });
  if (res.status !== 200) throw new Error(`schedule: ${res.status} ${JSON.stringify(res.body)}`);
  return schedule.schedule_id;
}

/**
 * Fails the run unless the agent's own store holds the schedule (it received and stored the command): without
 * it, the figure "with a schedule" would measure an agent without one.
 */
function assertScheduleOnCharger(dataDir: string, scheduleId: string): void {
  const db = new Database(join(dataDir, 'agent.sqlite'), { readonly: true, fileMustExist: true });
  try {
    const row = db.prepare('SELECT COUNT(*) AS n FROM schedules WHERE schedule_id = ?').get(scheduleId) as {
      n: number;
    };
    if (row.n === 0)
      throw new Error(`the agent never stored schedule ${scheduleId}: no figure with a schedule`);
  } finally {
    db.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values, texts } = benchArgsOrExit({
    usage: `Usage: node dist/simulators/bench/agent-footprint.js [--minutes 10] [--bundle DIR]
  RSS and CPU of the agent bundle at cadence, started plainly and as its systemd unit starts it, beside a bare
  Node process (build the bundle first: npm run build:agent)`,
    options: { minutes: { default: 10, help: 'minutes measured after a 30 s warm-up' } },
    texts: { bundle: { value: 'DIR', help: 'the agent bundle (default dist-agent/)' } },
  });
  process.stdout.write(
    `${JSON.stringify(await measureAgentFootprint(values.minutes, texts.bundle ?? DEFAULT_BUNDLE), null, 2)}\n`,
  );
}
