import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/**
 * The sandbox's simulated fleet (DESIGN.md §16): `charger-sim fleet` — the real agent on the simulated HAL — as a
 * child process against this platform, so that the sandbox moves. A child rather than in this process so that a
 * crash of the fleet (or of an agent in it) can never take the platform down, the two do not share an event loop,
 * and the platform imports nothing of the simulators (only names the sibling program of the same build).
 *
 * The child runs in a process group of its own, so a Ctrl-C on the terminal reaches the platform alone, which
 * then stops the fleet once and gracefully before it closes; it has an IPC channel, over which it reports its
 * start and through which it notices when the platform is gone, however that happened (simulators/fleet/
 * parent-link.ts), so it never outlives the platform.
 */

export const DEFAULT_SIM_CHARGERS = 6;

/**
 * Serials `SIM-1815-<n>` at every start: with their stores kept in the data directory, a restart resumes the same
 * chargers instead of registering new ones. Chosen so that the default fleet starts with cars charging on most
 * chargers, its V2G charger among them.
 */
export const SANDBOX_FLEET_SEED = 1815;

/** `DIR/sim-chargers/<sn>/agent.sqlite`: each simulated charger's store, as on a real charger. */
export const SIM_CHARGERS_DIR = 'sim-chargers';

/** The child writes `charger-sim` JSON log lines from this level: warnings and errors only. */
const FLEET_LOG_LEVEL = 'warn';

const START_TIMEOUT_MS = 20_000;
const STOP_GRACE_MS = 15_000;

export interface SandboxFleetOptions {
  count: number;
  /** How the chargers reach the platform: https://HOST:PORT. */
  platformUrl: string;
  /** PEM of the platform's certificate (the sandbox's self-signed one). */
  caPath: string;
  dataDir: string;
  /** The sandbox's update key (public PEM) the chargers trust (sandbox-update-key.ts). */
  updateKey?: string;
  /** Each line the fleet writes to stderr (agent warnings, its own messages). */
  onOutput(line: string): void;
  /** The fleet ended without being asked to, after it had reported its start (before: `started` says why). */
  onUnexpectedExit(description: string): void;
}

export type SandboxFleetStart =
  | { ok: true; count: number; v2gChargers: number }
  | { ok: false; reason: string };

export interface SandboxFleet {
  /** Settles once the fleet reported its start, or could not start; never rejects. */
  readonly started: Promise<SandboxFleetStart>;
  /** Stops the chargers gracefully (SIGTERM; SIGKILL after a grace period); never rejects. */
  stop(): Promise<void>;
}

/** The simulator program of this build: dist/simulators/cli.js beside dist/platform/. */
export function simulatorCliPath(): string {
  return fileURLToPath(new URL('../../simulators/cli.js', import.meta.url));
}

export function startSandboxFleet(opts: SandboxFleetOptions): SandboxFleet {
  const cli = simulatorCliPath();
  if (!existsSync(cli)) {
    const reason = `the simulator program ${cli} is missing (npm run build)`;
    return { started: Promise.resolve({ ok: false, reason }), stop: async () => undefined };
  }
  const child = spawn(
    process.execPath,
    [
      cli,
      'fleet',
      '--platform-url',
      opts.platformUrl,
      '--ca',
      opts.caPath,
      '--count',
      String(opts.count),
      '--seed',
      String(SANDBOX_FLEET_SEED),
      '--data-dir',
      join(opts.dataDir, SIM_CHARGERS_DIR),
      '--pace',
      'sandbox',
      '--outage-share',
      '0',
      '--log-level',
      FLEET_LOG_LEVEL,
      ...(opts.updateKey ? ['--update-key', opts.updateKey] : []),
      // Each charger keeps an A/B layout under its data directory: agent updates reach the sandbox's fleet.
      '--agent-releases',
      // Each charger writes its own log files there too, as on hardware: its diagnostics archive holds them.
      '--agent-logs',
    ],
    // stdout (the run's summary at the end) is of no use here; stderr carries warnings, forwarded line by line.
    { detached: true, stdio: ['ignore', 'ignore', 'pipe', 'ipc'], env: { ...process.env, NO_COLOR: '1' } },
  );
  createInterface({ input: child.stderr! }).on('line', (line) => opts.onOutput(line));

  let stopping = false;
  let running = false;
  const exited = new Promise<string>((resolve) => {
    child.once('exit', (code, signal) => resolve(signal ? `ended by ${signal}` : `exited with code ${code}`));
    // `on`, not `once`: a later 'error' (a signal that could not be sent) without a listener would throw.
    child.on('error', (error) => resolve(`could not start: ${error.message}`));
  });
  const started = new Promise<SandboxFleetStart>((resolve) => {
    const timer = setTimeout(() => {
      resolve({ ok: false, reason: `no start reported within ${START_TIMEOUT_MS / 1000} s` });
      void stop();
    }, START_TIMEOUT_MS);
    child.on('message', (message: unknown) => {
      const report = fleetStarted(message);
      if (!report) return;
      clearTimeout(timer);
      running = true;
      resolve({ ok: true, ...report });
    });
    void exited.then((how) => {
      clearTimeout(timer);
      resolve({ ok: false, reason: how });
    });
  });
  void exited.then((how) => {
    if (running && !stopping) opts.onUnexpectedExit(how);
  });

  let stopped: Promise<void> | undefined;
  function stop(): Promise<void> {
    stopping = true;
    stopped ??= (async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      signal(child, 'SIGTERM');
      const killer = setTimeout(() => signal(child, 'SIGKILL'), STOP_GRACE_MS);
      await exited;
      clearTimeout(killer);
    })();
    return stopped;
  }
  return { started, stop };
}

function signal(child: ChildProcess, name: NodeJS.Signals): void {
  try {
    child.kill(name);
  } catch {
    // Already gone.
  }
}

/** The child's `fleet_started` report (simulators/fleet/parent-link.ts), checked: it is another program's. */
function fleetStarted(message: unknown): { count: number; v2gChargers: number } | undefined {
  if (typeof message !== 'object' || message === null) return undefined;
  const m = message as Record<string, unknown>;
  if (m.type !== 'fleet_started' || typeof m.count !== 'number' || typeof m.v2g_chargers !== 'number')
    return undefined;
  return { count: m.count, v2gChargers: m.v2g_chargers };
}
