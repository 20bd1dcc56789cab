import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import { nodeSupport } from './shared/node-support.js';

// The suite runs on the project's Node (node_modules/.bin/node, pinned in package.json; CI also runs parts on 22):
// on an older one better-sqlite3 13 would crash the workers, so say it here, once, instead.
const support = nodeSupport(process.versions.node, 'vitest');
if (!support.ok) throw new Error(support.message);

/**
 * Tests of SQLite's own machinery (its migrations, read worker, write locks and data-directory faults): not run
 * on PostgreSQL (`TEST_DATABASE=postgres`, `npm run test:postgres`).
 */
const SQLITE_ONLY = [
  'test/integration/storage-migrations.test.ts',
  'test/integration/sqlite-reader.test.ts',
  'test/integration/store-write-locks.test.ts',
  'test/integration/platform-faults.test.ts',
  'test/integration/storage-faults.test.ts',
];
/**
 * Tests of PostgreSQL's own machinery and faults, and of several instances sharing PostgreSQL and Redis: only
 * where those servers run (`npm run test:postgres`, which CI runs), never in the README's `npm test`.
 */
const POSTGRES_ONLY = [
  'test/integration/postgres-faults.test.ts',
  'test/integration/postgres-statistics.test.ts',
  'test/integration/postgres-exclusive-jobs.test.ts',
  'test/integration/redis-coordination.test.ts',
  'test/integration/client-lifecycle-instances.test.ts',
  'test/integration/trust-across-instances.test.ts',
  'test/integration/updates-across-instances.test.ts',
  'test/integration/diagnostics-across-instances.test.ts',
  'test/integration/several-instances.test.ts',
  'test/integration/several-instances-limits-and-credentials.test.ts',
  'test/integration/stream-across-instances.test.ts',
  'test/integration/stream-registry.test.ts',
  // Needs HAProxy, which CI installs before `npm run test:postgres`.
  'test/integration/proxy-protocol-haproxy.test.ts',
];
/**
 * Integration tests of the agent alone (its A/B releases and launcher, its command executor under fuzzing): no
 * platform, no store, so nothing a PostgreSQL run would test again.
 */
const PLATFORM_FREE = [
  'test/integration/agent-releases-kill.test.ts',
  'test/integration/agent-releases-launcher.test.ts',
  'test/integration/agent-fuzz-commands.test.ts',
];
const onPostgres = process.env.TEST_DATABASE === 'postgres';

/** Runs a fleet of hundreds of agents in its process: alone, after everything else, so it neither slows nor is slowed. */
const ALONE = ['test/integration/fleet-restart.test.ts'];
/** The same, needing PostgreSQL, Redis and HAProxy: only in `npm run test:postgres`. */
const ALONE_ON_SERVERS = ['test/integration/several-instances-fleet.test.ts'];

/** Real Chromium (Debian's `chromium`, DESIGN.md §16): `npm run test:browser`, which CI runs after installing it. */
const BROWSER = ['test/browser/**'];

/**
 * Test files at once. Vitest's default (one less than the cores) is a single worker on these 2-core machines,
 * and most integration files spend their time waiting (timeouts, spawned processes, the network): two at once
 * took `npm test` from 664 s to 405 s here, with every test passing. Never fewer than two.
 */
const MAX_WORKERS = Math.max(2, availableParallelism() - 1);

export default defineConfig({
  test: {
    pool: 'forks',
    maxWorkers: MAX_WORKERS,
    projects: [
      {
        test: {
          name: 'main',
          include: ['test/**/*.test.ts'],
          exclude: [
            ...ALONE,
            ...ALONE_ON_SERVERS,
            ...BROWSER,
            ...(onPostgres ? [...SQLITE_ONLY, ...PLATFORM_FREE] : POSTGRES_ONLY),
          ],
          testTimeout: 30_000,
          hookTimeout: 60_000,
          globalSetup: ['test/global-setup.ts'],
          pool: 'forks',
        },
      },
      {
        test: {
          name: 'fleet-alone',
          include: onPostgres ? [...ALONE, ...ALONE_ON_SERVERS] : ALONE,
          testTimeout: 30_000,
          hookTimeout: 60_000,
          globalSetup: ['test/global-setup.ts'],
          pool: 'forks',
          // One file at a time, after everything else: each is a fleet of hundreds of agents.
          poolOptions: { forks: { singleFork: true } },
          sequence: { groupOrder: 1 },
        },
      },
      {
        test: {
          name: 'browser',
          include: ['test/browser/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
          globalSetup: ['test/global-setup.ts'],
          pool: 'forks',
        },
      },
    ],
  },
});
