import { defineConfig } from 'vitest/config';

/** Runs a fleet of hundreds of agents in its process: alone, after everything else, so it neither slows nor is slowed. */
const ALONE = ['test/integration/fleet-restart.test.ts'];

export default defineConfig({
  test: {
    pool: 'forks',
    projects: [
      {
        test: {
          name: 'main',
          include: ['test/**/*.test.ts'],
          exclude: ALONE,
          testTimeout: 30_000,
          hookTimeout: 60_000,
          pool: 'forks',
        },
      },
      {
        test: {
          name: 'fleet-alone',
          include: ALONE,
          testTimeout: 30_000,
          hookTimeout: 60_000,
          pool: 'forks',
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
