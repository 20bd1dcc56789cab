/**
 * The time-zone check: where the zones of the stored schedules are read from. The agent reads them from the
 * system's tz database and falls back to Node's ICU data (correct, but about 7 MiB more memory), so a missing
 * or unreadable zone file is a warning, never a failure.
 */
import { readZoneFile, systemZoneDirectory, zoneDatabaseRelease } from '../../core/tz/zone-offsets.js';
import type { DiagContext } from './context.js';
import { errorText, type Outcome, pass, warn } from './outcome.js';

export function timeZonesCheck(ctx: DiagContext, directory = systemZoneDirectory()): Outcome {
  const zones = [
    ...new Set((ctx.store?.listSchedules() ?? []).map(({ schedule }) => schedule.timezone)),
  ].sort();
  const release = zoneDatabaseRelease(directory);
  const database = `${directory} (release ${release ?? 'unknown'}; Node's ICU: ${process.versions.tz ?? 'unknown'})`;
  const problems: { zone: string; problem: string }[] = [];
  for (const zone of zones) {
    try {
      readZoneFile(directory, zone);
    } catch (error) {
      problems.push({ zone, problem: errorText(error) });
    }
  }
  const data = {
    directory,
    release: release ?? null,
    icu_release: process.versions.tz ?? null,
    zones: zones.map((zone) => ({
      zone,
      source: problems.some((p) => p.zone === zone) ? 'icu' : 'tz_database',
    })),
  };
  const hint = `install the system's tz database (Debian: apt-get install tzdata) or set TZDIR in the agent's unit; the agent then needs about 7 MiB less`;
  if (problems.length > 0) {
    const list = problems.map((p) => `${p.zone} (${p.problem})`).join(', ');
    return warn(`read from Node's ICU data instead of ${database}: ${list}`, hint, data);
  }
  if (zones.length === 0) {
    if (!canRead(directory, 'UTC')) {
      return warn(`no schedules; no tz database at ${directory}`, hint, data);
    }
    return pass(`no schedules; tz database ${database}`, data);
  }
  return pass(`${zones.join(', ')} from ${database}`, data);
}

function canRead(directory: string, zone: string): boolean {
  try {
    readZoneFile(directory, zone);
    return true;
  } catch {
    return false;
  }
}
