/**
 * `charger-agent run` configuration: command-line flags (DESIGN.md §11) over an optional `--config FILE`.
 *
 * The file is JSON with the same keys as the flags, spelled either way (`"platform-url"` or `"platformUrl"`),
 * plus a few keys that have no flag: `hal-options` (an object handed to the HAL module as its `config`),
 * `log-level`, `secret-rotation-days` and `sign-requests`; the repeatable `--update-key FILE` is `update-keys`, an
 * array of files. Unknown keys are refused, so a typo does not pass silently.
 * Relative paths in the file (`data-dir`, `ca`, `client-cert`, `client-key`, `update-keys`, a `hal` module path)
 * are relative to the file; on the command line, to the working directory. Flags win over the file (any
 * `--update-key` replaces the file's whole list).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import * as z from 'zod/mini';
import { CONNECTORS_PER_DEVICE_MAX } from '../shared/limits.js';
import { Text } from '../shared/primitives.js';
import { DEFAULT_SECRET_ROTATION_DAYS } from './core/secret-rotation-policy.js';
import { SIMULATED_HAL_SPEC } from './hal-loader.js';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const ConfigFile = z.strictObject({
  dataDir: z.optional(z.string().check(z.minLength(1))),
  platformUrl: z.optional(z.string().check(z.minLength(1))),
  ca: z.optional(z.string().check(z.minLength(1))),
  clientCert: z.optional(z.string().check(z.minLength(1))),
  clientKey: z.optional(z.string().check(z.minLength(1))),
  sn: z.optional(z.string()),
  model: z.optional(z.string()),
  manufacturer: z.optional(z.string()),
  firmware: z.optional(z.string()),
  hal: z.optional(z.string().check(z.minLength(1))),
  connectors: z.optional(z.int().check(z.minimum(1), z.maximum(CONNECTORS_PER_DEVICE_MAX))),
  v2g: z.optional(z.boolean()),
  halOptions: z.optional(z.record(z.string(), z.unknown())),
  logLevel: z.optional(z.enum(LOG_LEVELS)),
  secretRotationDays: z.optional(z.number().check(z.minimum(0), z.maximum(3650))),
  signRequests: z.optional(z.boolean()),
  updateKeys: z.optional(z.array(z.string().check(z.minLength(1)))),
});
export type ConfigFile = z.infer<typeof ConfigFile>;
/** As registration takes it (RegisterRequest.sn). */
const SerialNumber = Text.check(z.maxLength(64));

/** What commander hands over for `run` (every flag optional: the file may supply it). */
export interface RunFlags {
  dataDir?: string;
  platformUrl?: string;
  ca?: string;
  clientCert?: string;
  clientKey?: string;
  sn?: string;
  model?: string;
  manufacturer?: string;
  firmware?: string;
  hal?: string;
  connectors?: string;
  v2g?: boolean;
  /** `--update-key`, once per file. */
  updateKey?: string[];
  config?: string;
}

export interface RunConfig {
  dataDir: string;
  platformUrl: string;
  /** Absolute path of the CA file. */
  ca?: string;
  /** Absolute paths of the charger's TLS client certificate and key (attested registration, DESIGN.md §18). */
  clientCert?: string;
  clientKey?: string;
  sn: string;
  model?: string;
  manufacturer?: string;
  firmware?: string;
  /** `simulated` or an absolute module path (or a package name). */
  hal: string;
  connectors?: number;
  v2g?: boolean;
  halOptions?: Record<string, unknown>;
  logLevel: LogLevel;
  secretRotationDays: number;
  signRequests: boolean;
  /** Absolute paths of the trusted update keys (Ed25519, PEM); empty: every update is refused. */
  updateKeys: string[];
  configFile?: string;
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

const camel = (key: string) => key.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

export function parseConfigFile(text: string, file: string): ConfigFile {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`${file} is not valid JSON: ${(error as Error).message}`);
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new ConfigError(`${file} must hold a JSON object`);
  }
  const normalized: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(raw)) normalized[camel(key)] = value;
  const parsed = ConfigFile.safeParse(normalized);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.code === 'unrecognized_keys' ? issue.keys.join(', ') : issue.path.join('.');
    throw new ConfigError(
      `${file}: ${field}: ${issue.code === 'unrecognized_keys' ? 'unknown key' : issue.message}`,
    );
  }
  return parsed.data;
}

function resolvePath(value: string | undefined, base: string): string | undefined {
  return value === undefined ? undefined : path.resolve(base, value);
}

function resolveHal(value: string | undefined, base: string): string {
  if (value === undefined || value === SIMULATED_HAL_SPEC) return SIMULATED_HAL_SPEC;
  const looksLikePath = value.startsWith('.') || value.startsWith('/') || /\.[cm]?[jt]s$/.test(value);
  return looksLikePath ? path.resolve(base, value) : value;
}

/** Merges flags over the config file and checks what `run` needs. Throws `ConfigError` with a clear message. */
export function resolveRunConfig(flags: RunFlags, cwd = process.cwd()): RunConfig {
  let file: ConfigFile = {};
  let fileDir = cwd;
  let configFile: string | undefined;
  if (flags.config !== undefined) {
    configFile = path.resolve(cwd, flags.config);
    let text: string;
    try {
      text = readFileSync(configFile, 'utf8');
    } catch (error) {
      throw new ConfigError(
        `cannot read --config ${configFile}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
      );
    }
    file = parseConfigFile(text, configFile);
    fileDir = path.dirname(configFile);
  }

  const dataDir = resolvePath(flags.dataDir, cwd) ?? resolvePath(file.dataDir, fileDir);
  if (!dataDir) throw new ConfigError('--data-dir is required (or "data-dir" in --config)');
  const platformUrl = flags.platformUrl ?? file.platformUrl;
  if (!platformUrl) throw new ConfigError('--platform-url is required (or "platform-url" in --config)');
  let url: URL;
  try {
    url = new URL(platformUrl);
  } catch {
    throw new ConfigError(`--platform-url ${platformUrl} is not a URL`);
  }
  if (url.protocol !== 'https:')
    throw new ConfigError('--platform-url must be https:// (the platform serves HTTPS only)');
  const sn = flags.sn ?? file.sn;
  if (!sn) throw new ConfigError('--sn is required (or "sn" in --config)');
  if (!SerialNumber.safeParse(sn).success) throw new ConfigError('--sn must be 1-64 printable characters');

  let connectors = file.connectors;
  if (flags.connectors !== undefined) {
    if (!/^\d+$/.test(flags.connectors)) throw new ConfigError('--connectors must be a whole number');
    connectors = Number(flags.connectors);
  }
  if (connectors !== undefined && (connectors < 1 || connectors > CONNECTORS_PER_DEVICE_MAX)) {
    throw new ConfigError(`--connectors must be 1-${CONNECTORS_PER_DEVICE_MAX}`);
  }

  const config: RunConfig = {
    dataDir,
    platformUrl: platformUrl.replace(/\/+$/, ''),
    sn,
    hal: flags.hal !== undefined ? resolveHal(flags.hal, cwd) : resolveHal(file.hal, fileDir),
    logLevel: file.logLevel ?? 'info',
    secretRotationDays: file.secretRotationDays ?? DEFAULT_SECRET_ROTATION_DAYS,
    signRequests: file.signRequests ?? false,
    updateKeys: flags.updateKey?.length
      ? flags.updateKey.map((key) => path.resolve(cwd, key))
      : (file.updateKeys ?? []).map((key) => path.resolve(fileDir, key)),
  };
  const ca = resolvePath(flags.ca, cwd) ?? resolvePath(file.ca, fileDir);
  if (ca) config.ca = ca;
  const clientCert = resolvePath(flags.clientCert, cwd) ?? resolvePath(file.clientCert, fileDir);
  const clientKey = resolvePath(flags.clientKey, cwd) ?? resolvePath(file.clientKey, fileDir);
  if (Boolean(clientCert) !== Boolean(clientKey))
    throw new ConfigError(
      '--client-cert and --client-key go together (or "client-cert" and "client-key" in --config)',
    );
  if (clientCert && clientKey) Object.assign(config, { clientCert, clientKey });
  const model = flags.model ?? file.model;
  if (model) config.model = model;
  const manufacturer = flags.manufacturer ?? file.manufacturer;
  if (manufacturer) config.manufacturer = manufacturer;
  const firmware = flags.firmware ?? file.firmware;
  if (firmware) config.firmware = firmware;
  if (connectors !== undefined) config.connectors = connectors;
  const v2g = flags.v2g ?? file.v2g;
  if (v2g !== undefined) config.v2g = v2g;
  if (file.halOptions) config.halOptions = file.halOptions;
  if (configFile) config.configFile = configFile;
  for (const [flag, value] of [
    ['--model', config.model],
    ['--manufacturer', config.manufacturer],
    ['--firmware', config.firmware],
  ] as const) {
    if (value !== undefined && !Text.safeParse(value).success) {
      throw new ConfigError(`${flag} must be 1-128 printable characters`);
    }
  }
  return config;
}

/** The configuration as stored for the technician's `diag`: everything but secrets (there are none here). */
export function describeRunConfig(config: RunConfig): Record<string, unknown> {
  return { ...config };
}
