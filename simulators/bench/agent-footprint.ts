#!/usr/bin/env node
import '../supported-node.js';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { benchArgsOrExit } from './bench-args.js';
import { startBenchPlatform } from './bench-platform.js';
import { type ProcessSample, sampleProcess, summarizeSamples } from './process-sampler.js';

/**
 * Agent footprint: one real `charger-agent run` process with the simulated HAL, both connectors charging (so
 * telemetry every 5 s and heartbeats every 30 s), beside a bare `node -e "setInterval(()=>{},1000)"`, for
 * `--minutes` (default 10) after a 30 s warm-up. RSS and CPU from /proc.
 * Usage: node dist/simulators/bench/agent-footprint.js [--minutes 10]
 */
const AGENT_CLI = fileURLToPath(new URL('../../agent/cli.js', import.meta.url));

export async function measureAgentFootprint(
  minutes = 10,
  agentCli = AGENT_CLI,
  nodeArgs: readonly string[] = [],
  agentEnv: Record<string, string> = {},
) {
  const platform = await startBenchPlatform();
  const dir = await mkdtemp(join(tmpdir(), 'cp-agent-foot-'));
  let agent: ChildProcess | undefined;
  let bare: ChildProcess | undefined;
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
    agent = spawn(
      process.execPath,
      [
        ...nodeArgs,
        agentCli,
        'run',
        '--data-dir',
        join(dir, 'agent'),
        '--platform-url',
        platform.url,
        '--ca',
        join(dir, 'ca.pem'),
        '--sn',
        'FOOTPRINT-1',
        '--hal',
        'simulated',
        '--connectors',
        '2',
        '--config',
        config,
      ],
      { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, ...agentEnv } },
    );
    bare = spawn(process.execPath, ['-e', 'setInterval(()=>{},1000)'], { stdio: 'ignore' });
    await sleep(30_000);
    const agentSamples: ProcessSample[] = [];
    const bareSamples: ProcessSample[] = [];
    const end = Date.now() + minutes * 60_000;
    while (Date.now() < end) {
      agentSamples.push(sampleProcess(agent.pid!));
      bareSamples.push(sampleProcess(bare.pid!));
      await sleep(5_000);
    }
    agentSamples.push(sampleProcess(agent.pid!));
    bareSamples.push(sampleProcess(bare.pid!));

    const exited = new Promise((r) => agent!.once('exit', r));
    agent.kill('SIGTERM');
    await exited;
    const db = new Database(join(platform.dataDir, 'platform.sqlite'), { readonly: true });
    const telemetry = (db.prepare('SELECT COUNT(*) AS n FROM telemetry').get() as { n: number }).n;
    db.close();
    return {
      minutes,
      agent: summarizeSamples(agentSamples),
      bare_node: summarizeSamples(bareSamples),
      telemetry_records_stored: telemetry,
    };
  } finally {
    bare?.kill('SIGKILL');
    if (agent && agent.exitCode === null) agent.kill('SIGKILL');
    await platform.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = benchArgsOrExit({
    usage: `Usage: node dist/simulators/bench/agent-footprint.js [--minutes 10]
  RSS and CPU of one charger-agent at cadence beside a bare Node process`,
    options: { minutes: { default: 10, help: 'minutes measured after a 30 s warm-up' } },
  });
  const agent = process.env.FOOTPRINT_AGENT || AGENT_CLI;
  const nodeArgs = (process.env.FOOTPRINT_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const agentEnv = Object.fromEntries(
    (process.env.FOOTPRINT_AGENT_ENV ?? '')
      .split(' ')
      .filter(Boolean)
      .map((kv) => kv.split('=', 2) as [string, string]),
  );
  process.stdout.write(
    `${JSON.stringify(await measureAgentFootprint(values.minutes, agent, nodeArgs, agentEnv), null, 2)}\n`,
  );
}
