/**
 * The checks of what lies on the charger itself: the store (integrity, schema, file mode), the stored
 * configuration, and whether the agent process runs.
 */
import { statSync } from 'node:fs';
import { AGENT_SCHEMA_VERSION, agentStoreFile } from '../../store/agent-store.js';
import { bytes, clip } from '../format.js';
import { agentProcessState, type StoreAccess } from '../read-store.js';
import type { DiagContext } from './context.js';
import { fail, type Outcome, pass, skip, warn } from './outcome.js';

export function storeCheck(access: StoreAccess, ctx: DiagContext): Outcome {
  if (!access.ok) return fail(access.message, access.hint);
  const store = access.store;
  const rows = store.db.pragma('integrity_check') as Array<{ integrity_check: string }>;
  const problems = rows.map((r) => r.integrity_check).filter((m) => m !== 'ok');
  const file = agentStoreFile(ctx.dataDir);
  let size = 0;
  for (const f of [file, `${file}-wal`]) {
    try {
      size += statSync(f).size;
    } catch {
      // no WAL file: the agent is stopped and checkpointed
    }
  }
  const mode = statSync(file).mode & 0o777;
  const data = { schema_version: access.schemaVersion, bytes: size, mode: mode.toString(8) };
  if (problems.length > 0) {
    return fail(
      `SQLite integrity_check: ${clip(problems.slice(0, 3).join('; '), 200)}`,
      'stop the agent, copy the data directory for analysis, then restore a backup or start from an empty data directory (the charger re-registers after an operator resets it)',
      { ...data, problems },
    );
  }
  const detail = `integrity ok, schema v${access.schemaVersion}, ${bytes(size)}`;
  if ((mode & 0o077) !== 0) {
    return warn(
      `${detail}; file mode ${mode.toString(8)}: others can read the device secret`,
      `chmod 600 ${file}`,
      data,
    );
  }
  if (access.schemaVersion < AGENT_SCHEMA_VERSION) {
    return warn(
      `${detail}; older schema`,
      'the agent migrates the store itself at its next start (keep the data directory)',
      data,
    );
  }
  return pass(detail, data);
}

export function configurationCheck(ctx: DiagContext): Outcome {
  const rc = ctx.runConfig;
  const notes: string[] = [];
  const warnings: Array<[string, string]> = [];
  const url = ctx.platformUrl;
  if (!url) {
    return fail(
      'no platform URL stored: the agent has not started with this data directory',
      'start the agent once with --platform-url (or "platform-url" in --config)',
    );
  }
  const target = ctx.target;
  if (!target) return fail(`platform URL ${url} is not a URL`, 'fix --platform-url (https://HOST:PORT)');
  if (target.url.protocol !== 'https:') {
    return fail(
      `platform URL ${url} is not https://`,
      'the platform serves HTTPS only: use https://HOST:PORT',
    );
  }
  notes.push(url);
  if (!rc) {
    warnings.push([
      'no run configuration stored',
      'start the agent with this version once; it records its configuration for diag',
    ]);
  }
  const sn = typeof rc?.sn === 'string' ? rc.sn : undefined;
  if (ctx.identity && sn && sn !== ctx.identity.sn) {
    return fail(
      `configured serial number ${sn} differs from the registered one (${ctx.identity.sn})`,
      `the agent refuses to start so: run it with --sn ${ctx.identity.sn}, or give ${sn} its own empty --data-dir`,
    );
  }
  if (
    ctx.identity &&
    rc &&
    typeof rc.platformUrl === 'string' &&
    rc.platformUrl !== ctx.identity.platformUrl
  ) {
    warnings.push([
      `registered at ${ctx.identity.platformUrl} but now configured for ${rc.platformUrl}`,
      'a charger keeps its identity only on the platform it registered with: check --platform-url',
    ]);
  }
  if (ctx.caFile) {
    if (ctx.caProblem) {
      return fail(
        `CA file ${ctx.caFile}: ${ctx.caProblem}`,
        'fix --ca (a PEM certificate file readable by the agent)',
      );
    }
    notes.push(`CA ${ctx.caFile}`);
  } else notes.push('system CAs');
  if (rc?.hal === 'simulated') {
    warnings.push(['simulated HAL', 'on a real charger run with --hal /path/to/the-oem-hal.js']);
  } else if (typeof rc?.hal === 'string') notes.push(`HAL ${rc.hal}`);
  if (rc?.logLevel === 'debug' || rc?.logLevel === 'trace') {
    warnings.push([
      `log level ${rc.logLevel}`,
      'verbose logs wear the flash: use "log-level": "info" in production',
    ]);
  }
  try {
    const mode = statSync(ctx.dataDir).mode & 0o777;
    if ((mode & 0o077) !== 0) {
      warnings.push([`data directory mode ${mode.toString(8)}`, `chmod 700 ${ctx.dataDir}`]);
    }
  } catch {
    // reported by the store check
  }
  // What an operator set remotely (DESIGN.md §20) wins over the file: say so, it explains a cadence or a level.
  const remote = ctx.store?.getState('configuration');
  if (remote && Object.keys(remote).length > 0) {
    notes.push(
      `set remotely: ${Object.entries(remote)
        .map(([key, value]) => `${key}=${value}`)
        .join(', ')}`,
    );
  }
  const data = { ...(rc ?? {}), platformUrl: url, ...(remote ? { remoteConfiguration: remote } : {}) };
  if (warnings.length > 0) {
    return warn(
      [...notes, ...warnings.map(([w]) => w)].join('; '),
      warnings.map(([, h]) => h).join('; '),
      data,
    );
  }
  return pass(notes.join('; '), data);
}

export function processCheck(ctx: DiagContext, isAlive: (pid: number) => boolean): Outcome {
  if (!ctx.store) return skip('needs the store');
  const proc = agentProcessState(ctx.store, isAlive);
  const data = { running: proc.running, pid: proc.pid ?? null, version: proc.version ?? null };
  if (proc.running) {
    return pass(`running (pid ${proc.pid}, v${proc.version ?? '?'})`, data);
  }
  return warn(
    `the agent is not running: ${proc.note}`,
    'start it (systemctl start charger-agent) and read why it stopped: journalctl -u charger-agent, DIR/logs/agent.log',
    data,
  );
}
