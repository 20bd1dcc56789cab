import { afterAll, beforeAll } from 'vitest';
import { startTestPlatform, type TestPlatform } from './platform.js';

/**
 * One real platform for a test file: started before its tests, stopped after them. The answer stands for that
 * platform (a proxy to it), so a file writes `const tp = platformPerFile()` and uses `tp` as the platform itself;
 * touching it outside a test or a hook, before the start, throws.
 */
export function platformPerFile(options?: Parameters<typeof startTestPlatform>[0]): TestPlatform {
  let started: TestPlatform | undefined;
  beforeAll(async () => {
    started = await startTestPlatform(options);
  });
  afterAll(async () => {
    await started?.stop();
  });
  return new Proxy({} as TestPlatform, {
    get(_target, key) {
      if (!started) throw new Error(`the test platform is not started yet (reading ${String(key)})`);
      const value: unknown = Reflect.get(started, key);
      return typeof value === 'function' ? value.bind(started) : value;
    },
  });
}
