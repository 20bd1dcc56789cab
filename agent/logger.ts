/**
 * The agent's logs: pino JSON to a size-capped file in the data directory (`DIR/logs/agent.log`, see
 * rotating-file.ts) and to stderr. On a terminal, stderr is made readable with pino-pretty when it is installed
 * (a devDependency: a charger's production install usually lacks it, and then stderr gets the same JSON).
 *
 * Secrets never reach a log: the agent never passes them to the logger, and pino's redaction censors the
 * usual fields anyway should one slip into an object.
 */
import path from 'node:path';
import pino, { type DestinationStream, type Level, type Logger } from 'pino';
import { createRotatingFile, type RotatingFile } from './rotating-file.js';

export const LOG_DIR = 'logs';
export const LOG_FILE = 'agent.log';

export const REDACT_PATHS = [
  'secret',
  'device_secret',
  'access_token',
  'accessToken',
  'token',
  'authorization',
  '*.secret',
  '*.device_secret',
  '*.access_token',
  '*.accessToken',
  '*.token',
  '*.authorization',
  'headers.authorization',
];

export interface AgentLoggerOptions {
  /** Where the log file goes; no file when absent. */
  dataDir?: string;
  level?: Level | 'silent';
  maxFileBytes?: number;
  keepFiles?: number;
  /** Defaults to stderr (fd 2). */
  stderr?: DestinationStream;
  /** Force or forbid pretty output; default: when stderr is a TTY and NO_COLOR is unset. */
  pretty?: boolean;
}

export interface AgentLogger {
  logger: Logger;
  file?: RotatingFile;
  close(): void;
}

async function prettyStream(): Promise<DestinationStream | undefined> {
  try {
    const module = (await import('pino-pretty')) as unknown as {
      default: (options: Record<string, unknown>) => DestinationStream;
    };
    return module.default({ destination: 2, colorize: true, translateTime: 'SYS:HH:MM:ss.l', sync: true });
  } catch {
    return undefined;
  }
}

export async function createAgentLogger(options: AgentLoggerOptions = {}): Promise<AgentLogger> {
  const level = options.level ?? 'info';
  const streams: pino.StreamEntry[] = [];
  let file: RotatingFile | undefined;
  if (options.dataDir) {
    const rotating = createRotatingFile(path.join(options.dataDir, LOG_DIR, LOG_FILE), {
      ...(options.maxFileBytes !== undefined ? { maxBytes: options.maxFileBytes } : {}),
      ...(options.keepFiles !== undefined ? { keep: options.keepFiles } : {}),
    });
    file = rotating;
    // The streams take every level: the logger's own level filters, so that setting it (remote
    // configuration, DESIGN.md §20) takes effect at once on both.
    streams.push({ level: 'trace', stream: { write: (chunk: string) => rotating.write(chunk) } });
  }
  let stderr = options.stderr;
  if (!stderr) {
    const wantPretty = options.pretty ?? (process.stderr.isTTY === true && !process.env.NO_COLOR);
    stderr = (wantPretty ? await prettyStream() : undefined) ?? pino.destination({ fd: 2, sync: true });
  }
  streams.push({ level: 'trace', stream: stderr });
  const logger = pino(
    {
      level,
      base: { name: 'charger-agent' },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    pino.multistream(streams),
  );
  return {
    logger,
    ...(file ? { file } : {}),
    close() {
      file?.close();
    },
  };
}
