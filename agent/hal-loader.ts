/**
 * Finds the HAL the agent runs on: `--hal simulated` or `--hal MODULE_PATH`.
 *
 * `agent/` must not import `simulators/` (DESIGN.md §1: the agent ships to chargers on its own, and the
 * simulator imports the agent, not the reverse). So the simulated HAL is reached by a dynamic import of a
 * path resolved at run time, next to this file's own location: in a build, `dist/simulators/simulated-hal.js`
 * beside `dist/agent/`; from source (tests), the `.ts` file. An agent packaged without `simulators/` still
 * loads and runs; only `--hal simulated` then fails, with a clear message.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Hal, HalFactory, HalOptions } from './hal.js';

export const SIMULATED_HAL_SPEC = 'simulated';

/**
 * Loads the HAL named by `spec` and builds it with `options`. A module path is resolved against the
 * working directory (or `baseDir`); a bare name is imported as a package. The module must export a
 * `HalFactory` as its default export or as `createHal`.
 */
export async function loadHal(spec: string, options: HalOptions = {}, baseDir = process.cwd()): Promise<Hal> {
  const specifier = spec === SIMULATED_HAL_SPEC ? simulatedHalModuleUrl() : moduleSpecifierOf(spec, baseDir);
  let module: unknown;
  try {
    module = await import(specifier);
  } catch (error) {
    throw new Error(`cannot load HAL module ${spec}: ${(error as Error).message}`, { cause: error });
  }
  const factory = factoryOf(module);
  if (!factory) {
    throw new Error(`HAL module ${spec} exports no factory: export a function as default or as createHal`);
  }
  const hal = await factory(options);
  assertIsHal(hal, spec);
  return hal;
}

function simulatedHalModuleUrl(): string {
  for (const file of ['../simulators/simulated-hal.js', '../simulators/simulated-hal.ts']) {
    const url = new URL(file, import.meta.url);
    if (existsSync(fileURLToPath(url))) return url.href;
  }
  throw new Error('the simulated HAL is not part of this installation (simulators/ is missing)');
}

function moduleSpecifierOf(spec: string, baseDir: string): string {
  const looksLikePath =
    spec.startsWith('.') || spec.startsWith('/') || path.isAbsolute(spec) || /\.[cm]?[jt]s$/.test(spec);
  return looksLikePath ? pathToFileURL(path.resolve(baseDir, spec)).href : spec;
}

function factoryOf(module: unknown): HalFactory | undefined {
  if (typeof module !== 'object' || module === null) return undefined;
  const exports = module as { default?: unknown; createHal?: unknown };
  if (typeof exports.default === 'function') return exports.default as HalFactory;
  if (typeof exports.createHal === 'function') return exports.createHal as HalFactory;
  return undefined;
}

const REQUIRED_METHODS = [
  'getDeviceInfo',
  'readConnector',
  'readConnectors',
  'setPowerLimit',
  'startCharging',
  'stopCharging',
  'startDischarging',
  'subscribe',
] as const;

function assertIsHal(candidate: unknown, spec: string): asserts candidate is Hal {
  const missing = REQUIRED_METHODS.filter(
    (name) =>
      typeof candidate !== 'object' ||
      candidate === null ||
      typeof (candidate as Record<string, unknown>)[name] !== 'function',
  );
  if (missing.length > 0) {
    throw new Error(`HAL from ${spec} lacks ${missing.join(', ')}`);
  }
  const hal = candidate as unknown as Record<string, unknown>;
  const install = typeof hal.installFirmware === 'function';
  if (install !== (typeof hal.firmwareVersion === 'function')) {
    const [has, lacks] = install
      ? ['installFirmware', 'firmwareVersion']
      : ['firmwareVersion', 'installFirmware'];
    throw new Error(`HAL from ${spec} has ${has} but not ${lacks}: firmware updates need both (or neither)`);
  }
}
