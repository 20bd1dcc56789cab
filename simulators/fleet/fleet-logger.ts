/**
 * The fleet's one logger for every agent, and the count of warn, error and fatal lines they logged; a charger that
 * keeps its own log file hands its lines to it.
 */
import pino, { type DestinationStream, type Level, type Logger } from 'pino';
import type { FleetLogLevel } from './fleet-options.js';

export interface LogCounts {
  warn: number;
  error: number;
  fatal: number;
}

/**
 * One logger for every agent. It always listens at warn level so that error lines are counted (an agent
 * logging an error is an error of the run), and writes only what `level` asks for.
 */
export function createFleetLogger(
  level: FleetLogLevel,
  destination: DestinationStream | undefined,
  counts: LogCounts,
  onError: (message: string) => void,
): Logger {
  const values = pino.levels.values;
  const emitFrom = level === 'silent' ? Number.POSITIVE_INFINITY : values[level]!;
  const listen = level === 'silent' || values[level]! > values.warn! ? 'warn' : level;
  return pino(
    {
      level: listen,
      base: { name: 'charger-sim' },
      timestamp: pino.stdTimeFunctions.isoTime,
      hooks: {
        logMethod(args, method, levelValue) {
          if (levelValue === values.warn) counts.warn += 1;
          else if (levelValue === values.error) {
            counts.error += 1;
            const message = args.find((a) => typeof a === 'string');
            onError(typeof message === 'string' ? message : 'agent logged an error');
          } else if (levelValue === values.fatal) counts.fatal += 1;
          if (levelValue >= emitFrom) method.apply(this, args);
        },
      },
    },
    destination ?? pino.destination({ fd: 2, sync: true }),
  );
}

/**
 * Where a charger that keeps its own log file (`--agent-logs`) sends its stderr: each line the fleet's logger
 * would write (from its level up) is handed to it, with the charger's serial number, so that the fleet counts
 * warnings and errors as for any charger and its stderr reads the same.
 */
export function chargerLogForwarder(fleet: Logger, sn: string): DestinationStream {
  return {
    write(line: string) {
      const level = Number(/"level":(\d+)/.exec(line)?.[1]);
      const label = fleet.levels.labels[level];
      if (label === undefined || level < fleet.levelVal) return;
      let record: Record<string, unknown>;
      try {
        record = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      const { level: _level, time: _time, name: _name, msg, ...fields } = record;
      fleet[label as Level]({ ...fields, sn }, typeof msg === 'string' ? msg : '');
    },
  };
}
