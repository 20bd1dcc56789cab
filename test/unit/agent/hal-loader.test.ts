import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { HalError, isHalError } from '../../../agent/hal.js';
import { loadHal } from '../../../agent/hal-loader.js';

const dir = mkdtempSync(path.join(tmpdir(), 'hal-loader-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const halMethods = `
  getDeviceInfo: async () => ({ connectorCount: options.connectors ?? 1, connectors: [] }),
  readConnector: async () => { throw new Error('unused'); },
  readConnectors: async () => [],
  setPowerLimit: async () => {},
  startCharging: async () => {},
  stopCharging: async () => {},
  startDischarging: async () => {},
  subscribe: () => () => {},
`;

describe('loadHal', () => {
  it('loads the simulated HAL without a static import of simulators/', async () => {
    const hal = await loadHal('simulated', {
      connectors: 2,
      v2g: true,
      config: { seed: 5, vehicles: 'manual' },
    });
    const info = await hal.getDeviceInfo();
    expect(info.connectorCount).toBe(2);
    expect(info.connectors.every((c) => c.v2gCapable && c.ratedPowerKw === 22)).toBe(true);
    expect((await hal.readConnector(1)).vehiclePresent).toBe(false);
  });

  it('loads a module whose default export is the factory, relative to a base directory', async () => {
    writeFileSync(path.join(dir, 'default-hal.mjs'), `export default (options) => ({${halMethods}});\n`);
    const hal = await loadHal('./default-hal.mjs', { connectors: 3 }, dir);
    expect((await hal.getDeviceInfo()).connectorCount).toBe(3);
  });

  it('loads a module exporting createHal, by absolute path, with an async factory', async () => {
    const file = path.join(dir, 'named-hal.mjs');
    writeFileSync(file, `export async function createHal(options) { return {${halMethods}}; }\n`);
    const hal = await loadHal(file, { connectors: 4 });
    expect((await hal.getDeviceInfo()).connectorCount).toBe(4);
  });

  it('refuses a module without a factory, a factory that returns no HAL, and a missing module', async () => {
    writeFileSync(path.join(dir, 'no-factory.mjs'), 'export const x = 1;\n');
    await expect(loadHal('./no-factory.mjs', {}, dir)).rejects.toThrow(/exports no factory/);
    writeFileSync(
      path.join(dir, 'half-hal.mjs'),
      'export default () => ({ getDeviceInfo: async () => ({}) });\n',
    );
    await expect(loadHal('./half-hal.mjs', {}, dir)).rejects.toThrow(/lacks readConnector, readConnectors/);
    await expect(loadHal('./missing.mjs', {}, dir)).rejects.toThrow(/cannot load HAL module/);
  });

  it.each([
    {
      name: 'both firmware members',
      extra: 'installFirmware: async () => {}, firmwareVersion: async () => "1"',
      error: undefined,
    },
    { name: 'neither firmware member', extra: '', error: undefined },
    {
      name: 'installFirmware alone',
      extra: 'installFirmware: async () => {}',
      error: /has installFirmware but not firmwareVersion: firmware updates need both \(or neither\)/,
    },
    {
      name: 'firmwareVersion alone',
      extra: 'firmwareVersion: async () => "1"',
      error: /has firmwareVersion but not installFirmware/,
    },
  ])(
    'takes a HAL with $name, refuses one with half the firmware capability',
    async ({ name, extra, error }) => {
      const file = `firmware-${name.replaceAll(' ', '-')}.mjs`;
      writeFileSync(path.join(dir, file), `export default (options) => ({${halMethods} ${extra}});\n`);
      const loading = loadHal(`./${file}`, {}, dir);
      if (error) await expect(loading).rejects.toThrow(error);
      else await expect(loading).resolves.toBeDefined();
    },
  );
});

describe('HalError', () => {
  it('is recognised by shape', () => {
    expect(isHalError(new HalError('no_vehicle', 'no vehicle'))).toBe(true);
    const foreign = Object.assign(new Error('x'), { name: 'HalError', code: 'fault' });
    expect(isHalError(foreign)).toBe(true);
    expect(isHalError(new Error('x'))).toBe(false);
  });
});
