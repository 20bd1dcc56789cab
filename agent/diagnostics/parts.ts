/**
 * The small parts of a diagnostics archive (DESIGN.md §20), as JSON values: what `status --json` and
 * `diag --json` print (the technician's own code, diag without its network steps), the recent command journal,
 * and the configuration with secrets removed.
 */

import type { AgentStore, JournalEntry } from '../store/agent-store.js';
import { runDiag } from '../technician/diag/run-diag.js';
import type { CommandsReport } from '../technician/listings.js';
import { collectReleases, releaseLayoutFor } from '../technician/release-status.js';
import { collectStatus, type StatusReport } from '../technician/status.js';
import { jsonForTerminal } from '../technician/terminal-text.js';
import { redactSecrets } from './redact.js';

/** The text the technician commands print for `--json` (cli.ts), so a part reads exactly as the command does. */
export const asJson = (value: unknown): string => `${jsonForTerminal(JSON.stringify(value, null, 2))}\n`;

/** `charger-agent status --json`: the same report, with the A/B releases when the launcher set a prefix. */
export function statusPart(
  store: AgentStore,
  options: { dataDir: string; now: number; isAlive?: (pid: number) => boolean },
): StatusReport {
  const report = collectStatus(store, options);
  const layout = releaseLayoutFor(undefined);
  if (layout !== undefined) report.releases = collectReleases(layout);
  return report;
}

/**
 * `charger-agent diag --json` offline: the checks of the charger itself (store, configuration, process, stored
 * clock skew, disk, logs, time zones); the network steps are listed as skipped. Diag opens the store read-only
 * on its own, as the command does. Its configuration check carries the whole stored run configuration, HAL
 * options included, which may hold an OEM's credentials: censored here as in configuration.json.
 */
export async function diagPart(options: {
  dataDir: string;
  isAlive?: (pid: number) => boolean;
}): Promise<unknown> {
  const { report } = await runDiag({ ...options, offline: true });
  return redactSecrets(report);
}

export const JOURNAL_DAYS = 7;
export const JOURNAL_MAX_ENTRIES = 500;
const DAY_MS = 86_400_000;

export interface JournalPart {
  since: string;
  max_entries: number;
  /** As `charger-agent commands --json` lists them. */
  commands: CommandsReport['commands'];
}

/** Journal entries (newest first) received in the last 7 days, at most 500; parameters with secrets censored. */
export function journalPart(entries: readonly JournalEntry[], now: number): JournalPart {
  const since = now - JOURNAL_DAYS * DAY_MS;
  return {
    since: new Date(since).toISOString(),
    max_entries: JOURNAL_MAX_ENTRIES,
    commands: entries
      .filter((e) => Date.parse(e.receivedAt) >= since)
      .slice(0, JOURNAL_MAX_ENTRIES)
      .map((e) => ({
        command_id: e.commandId,
        command: e.command,
        status: e.status,
        reason: e.reason ?? null,
        params: redactSecrets(e.params),
        expiry: e.expiry,
        received_at: e.receivedAt,
        updated_at: e.updatedAt,
      })),
  };
}

export function commandsPart(store: AgentStore, now: number): JournalPart {
  return journalPart(store.journalRecent(JOURNAL_MAX_ENTRIES), now);
}

/**
 * The remote configuration (DESIGN.md §20), when the store holds it under the `configuration` state key. Read
 * by SQL rather than `getState`: the key is not in every version of the store's typed keys.
 */
function remoteConfiguration(store: AgentStore): { value: unknown; updated_at: string } | undefined {
  const row = store.db
    .prepare("SELECT value, updated_at FROM agent_state WHERE key = 'configuration'")
    .get() as { value: string; updated_at: string } | undefined;
  if (!row) return undefined;
  try {
    return { value: JSON.parse(row.value) as unknown, updated_at: row.updated_at };
  } catch {
    return { value: '(not readable JSON)', updated_at: row.updated_at };
  }
}

/** The run configuration as stored for diag (or as given) and the remote values, secrets censored. */
export function configurationPart(
  store: AgentStore,
  runConfig: Record<string, unknown> | undefined,
): Record<string, unknown> {
  const run = runConfig ?? store.getState('run_config');
  const remote = remoteConfiguration(store);
  return {
    run: run === undefined ? null : redactSecrets(run),
    ...(remote ? { remote: { values: redactSecrets(remote.value), stored_at: remote.updated_at } } : {}),
  };
}
