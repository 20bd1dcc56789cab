import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { openAgentStore } from '../../agent/store/agent-store.js';
import { type AgentRunProcess, spawnAgentRun, waitFor } from './agent.js';
import { type CliResult, REPO_ROOT, runCli } from './cli.js';
import type { createTenant, TestPlatform } from './platform.js';

/**
 * The technician commands of the BUILT agent (`node dist/agent/cli.js status|diag|schedules|commands`), and a
 * real agent process for them to read: registered with a platform, in a tenant's site, its first heartbeat
 * recorded. Run `npm run build` first.
 */

export const AGENT_CLI = path.join(REPO_ROOT, 'dist', 'agent', 'cli.js');

export const agentCli = (args: string[]): Promise<CliResult> =>
  runCli(args, { script: AGENT_CLI, timeoutMs: 30_000 });

// biome-ignore lint/suspicious/noExplicitAny: the JSON shapes are asserted field by field
export async function agentJson(args: string[]): Promise<{ code: number | null; json: any; stdout: string }> {
  const res = await agentCli([...args, '--json']);
  try {
    return { code: res.code, json: JSON.parse(res.stdout), stdout: res.stdout };
  } catch {
    throw new Error(`${args.join(' ')} printed no JSON (exit ${res.code}):\n${res.stdout}\n${res.stderr}`);
  }
}

/** The agent's secret and token, which no command may print. */
export function secretsOf(dir: string): string[] {
  const store = openAgentStore(dir, { readonly: true });
  try {
    return [store.getIdentity()?.secret, store.getToken()?.accessToken].filter(
      (s): s is string => typeof s === 'string' && s.length > 0,
    );
  } finally {
    store.close();
  }
}

/**
 * Starts `charger-agent run` with serial `sn` on `dir`/data (pushed onto `running` at once, for afterAll to
 * kill), waits until it has registered, assigns it to the tenant's site and waits for its first heartbeat.
 */
export async function startRegisteredAgent(opts: {
  tp: TestPlatform;
  tenant: Awaited<ReturnType<typeof createTenant>>;
  dir: string;
  sn: string;
  running: AgentRunProcess[];
}): Promise<{ dataDir: string; deviceId: string }> {
  const { tp, tenant, dir, sn } = opts;
  const dataDir = path.join(dir, 'data');
  const ca = path.join(dir, 'ca.pem');
  writeFileSync(ca, tp.ca);
  const config = path.join(dir, 'agent.json');
  // Vehicles on both connectors for the whole test, no random faults (a fault makes status degraded).
  writeFileSync(
    config,
    JSON.stringify({ connectors: 2, 'hal-options': { seed: 11, initialOccupancy: 1, faults: false } }),
  );
  const agent = spawnAgentRun([
    '--data-dir',
    dataDir,
    '--platform-url',
    tp.url,
    '--ca',
    ca,
    '--sn',
    sn,
    '--config',
    config,
  ]);
  opts.running.push(agent);
  // Registered, assigned to the tenant's site, and one heartbeat recorded.
  const status = await waitFor(
    () => agentJson(['status', '--data-dir', dataDir]).catch(() => undefined),
    (s) => s?.json?.identity?.device_id !== undefined,
    20_000,
    250,
  );
  if (!status?.json?.identity) throw new Error(`the agent did not register:\n${agent.stderr()}`);
  const deviceId: string = status.json.identity.device_id;
  await tp.store.assignDevice(deviceId, tenant.siteId);
  await waitFor(
    () => tp.store.getDevice(deviceId),
    (d) => d?.last_heartbeat_ms !== null && d?.last_heartbeat_ms !== undefined,
    10_000,
  );
  return { dataDir, deviceId };
}
