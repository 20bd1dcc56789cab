import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createAgentLogger } from '../../../agent/logger.js';
import {
  chargerLogForwarder,
  createFleetLogger,
  type LogCounts,
} from '../../../simulators/fleet/fleet-logger.js';
import type { FleetLogLevel } from '../../../simulators/fleet/fleet-options.js';

/** A fleet logger writing into an array, and what it counted. */
function fleet(level: FleetLogLevel) {
  const lines: Array<Record<string, unknown>> = [];
  const counts: LogCounts = { warn: 0, error: 0, fatal: 0 };
  const errors: string[] = [];
  const logger = createFleetLogger(
    level,
    { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) },
    counts,
    (message) => errors.push(message),
  );
  return { logger, lines, counts, errors };
}

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

describe('a charger with its own log file (--agent-logs)', () => {
  it.each([
    { level: 'silent' as const, written: [] as string[], warn: 1, error: 1 },
    { level: 'warn' as const, written: ['slow answer', 'store failed'], warn: 1, error: 1 },
    { level: 'info' as const, written: ['started', 'slow answer', 'store failed'], warn: 1, error: 1 },
  ])(
    'fleet at $level: the file has every line at the agent level; the fleet writes $written and counts',
    async ({ level, written, warn, error }) => {
      const dir = await mkdtemp(join(tmpdir(), 'cp-fleet-logger-'));
      dirs.push(dir);
      const f = fleet(level);
      const agent = await createAgentLogger({ dataDir: dir, stderr: chargerLogForwarder(f.logger, 'SIM-1') });
      agent.logger.debug('not at the agent level');
      agent.logger.info({ connector_id: 1 }, 'started');
      agent.logger.warn('slow answer');
      agent.logger.error({ err: { message: 'disk full' } }, 'store failed');
      agent.close();

      const file = (await readFile(join(dir, 'logs', 'agent.log'), 'utf8'))
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { msg: string; name: string });
      expect(file.map((l) => l.msg)).toEqual(['started', 'slow answer', 'store failed']);
      expect(file.every((l) => l.name === 'charger-agent')).toBe(true);

      expect(f.lines.map((l) => l.msg)).toEqual(written);
      for (const line of f.lines) expect(line).toMatchObject({ name: 'charger-sim', sn: 'SIM-1' });
      if (written.includes('started')) expect(f.lines[0]).toMatchObject({ connector_id: 1 });
      expect(f.counts).toEqual({ warn, error, fatal: 0 });
      expect(f.errors).toEqual(['store failed']);
    },
  );

  it('a line that is not JSON is left out of the fleet, not thrown', () => {
    const f = fleet('info');
    const forward = chargerLogForwarder(f.logger, 'SIM-1');
    expect(() => forward.write('{"level":40,"msg":"cut')).not.toThrow();
    expect(() => forward.write('plain text\n')).not.toThrow();
    expect(f.lines).toEqual([]);
  });
});
