/**
 * The checks of the charger's file system: free space on the data partition, and the agent's logs (their
 * size and the errors of the last 24 hours).
 */
import { readdirSync, statSync } from 'node:fs';
import { open, statfs } from 'node:fs/promises';
import path from 'node:path';
import { LOG_DIR, LOG_FILE } from '../../logger.js';
import { bytes, clip } from '../format.js';
import type { DiagContext } from './context.js';
import { errorText, fail, type Outcome, pass, warn } from './outcome.js';

/** Below this much free space the outbox (16 MiB cap) and logs (20 MiB) may no longer fit. */
const DISK_WARN_BYTES = 50 * 1024 * 1024;

const DISK_FAIL_BYTES = 10 * 1024 * 1024;

/** Logs are capped at 4 files of 5 MiB; more means something else writes there. */
const LOGS_WARN_BYTES = 25 * 1024 * 1024;

const LOG_TAIL_BYTES = 256 * 1024;

const DAY_MS = 86_400_000;

export async function diskCheck(ctx: DiagContext): Promise<Outcome> {
  let stats: Awaited<ReturnType<typeof statfs>>;
  try {
    stats = await statfs(ctx.dataDir);
  } catch (error) {
    return fail(`cannot stat the file system of ${ctx.dataDir}: ${errorText(error)}`, 'check --data-dir');
  }
  const free = stats.bavail * stats.bsize;
  const total = stats.blocks * stats.bsize;
  const detail = `${bytes(free)} free of ${bytes(total)} (${ctx.dataDir})`;
  const data = { free_bytes: free, total_bytes: total };
  const hint =
    'free space on the data partition: remove old files (not agent.sqlite*), check what else writes there; the agent needs room for its outbox (≤ 16 MiB) and logs (≤ 20 MiB)';
  if (free < DISK_FAIL_BYTES) return fail(detail, hint, data);
  if (free < DISK_WARN_BYTES) return warn(`${detail}: less than ${bytes(DISK_WARN_BYTES)}`, hint, data);
  return pass(detail, data);
}

async function recentErrors(
  file: string,
): Promise<{ count: number; latest?: { time: string; msg: string } }> {
  let handle: Awaited<ReturnType<typeof open>> | undefined;
  try {
    handle = await open(file, 'r');
    const { size } = await handle.stat();
    const length = Math.min(size, LOG_TAIL_BYTES);
    const buffer = Buffer.alloc(length);
    await handle.read(buffer, 0, length, size - length);
    const since = Date.now() - DAY_MS;
    let count = 0;
    let latest: { time: string; msg: string } | undefined;
    for (const line of buffer.toString('utf8').split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        const entry = JSON.parse(line) as { level?: number; time?: string; msg?: string };
        if ((entry.level ?? 0) >= 50 && entry.time && Date.parse(entry.time) >= since) {
          count += 1;
          latest = { time: entry.time, msg: entry.msg ?? '' };
        }
      } catch {
        // a line cut by the tail window
      }
    }
    return latest ? { count, latest } : { count };
  } catch {
    return { count: 0 };
  } finally {
    await handle?.close();
  }
}

export async function logsCheck(ctx: DiagContext): Promise<Outcome> {
  const dir = path.join(ctx.dataDir, LOG_DIR);
  let files: string[];
  try {
    files = readdirSync(dir);
  } catch {
    return warn(
      `no log directory at ${dir}`,
      'the agent has not logged here yet: is it running with this --data-dir?',
    );
  }
  let total = 0;
  for (const f of files) {
    try {
      total += statSync(path.join(dir, f)).size;
    } catch {
      // rotated away meanwhile
    }
  }
  const errors = await recentErrors(path.join(dir, LOG_FILE));
  const data = { dir, files: files.length, bytes: total, errors_last_24h: errors.count };
  const detail = `${files.length} file(s), ${bytes(total)} of 20 MiB cap (${dir})`;
  if (total > LOGS_WARN_BYTES) {
    return warn(
      `${detail}: larger than the agent writes`,
      `something else writes into ${dir}: remove foreign files`,
      data,
    );
  }
  if (errors.latest) {
    return warn(
      `${detail}, ${errors.count} error(s) in 24 h, latest ${errors.latest.time}: ${clip(errors.latest.msg, 120)}`,
      `read them: grep '"level":[56]0' ${path.join(dir, LOG_FILE)}`,
      data,
    );
  }
  return pass(`${detail}, no errors in 24 h`, data);
}
