import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  utimesSync,
} from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { buildDiagnosticsArchive } from '../../../agent/diagnostics/archive.js';
import { lineTimeMs, logFilesOldestFirst } from '../../../agent/diagnostics/log-window.js';
import { type Manifest, PARTS } from '../../../agent/diagnostics/manifest.js';
import { REDACTED } from '../../../agent/diagnostics/redact.js';
import { createAgentLogger } from '../../../agent/logger.js';
import { type AgentStore, openAgentStore } from '../../../agent/store/agent-store.js';
import { collectStatus } from '../../../agent/technician/status.js';
import { tempDir } from '../../helpers/agent.js';

const run = promisify(execFile);

const T0 = Date.parse('2026-03-27T12:00:00.000Z');
const MIN = 60_000;
const iso = (ms: number) => new Date(ms).toISOString();
const _pinoLine = (ms: number, msg: string) =>
  `{"level":30,"time":"${iso(ms)}","name":"charger-agent","msg":"${msg}"}`;

async function extract(file: string, into: string): Promise<{ root: string; files: Map<string, Buffer> }> {
  await run('gunzip', ['-t', file]);
  await run('tar', ['-xzf', file, '-C', into]);
  const tops = readdirSync(into);
  expect(tops).toHaveLength(1);
  const root = tops[0]!;
  const files = new Map<string, Buffer>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else files.set(path.relative(path.join(into, root), full), readFileSync(full));
    }
  };
  walk(path.join(into, root));
  return { root, files };
}

describe('diagnostics archive: built from a real store and real logs', () => {
  let tmp: ReturnType<typeof tempDir>;
  let dataDir: string;
  let store: AgentStore;
  const SECRET = `dsec_${randomBytes(24).toString('base64url')}`;
  const PENDING = `psec_${randomBytes(24).toString('base64url')}`;
  const ACCESS = `atok_${randomBytes(24).toString('base64url')}`;
  const HAL_PASSWORD = `halpw_${randomBytes(12).toString('hex')}`;
  const alive = () => true;

  beforeEach(() => {
    tmp = tempDir('diag-archive-');
    dataDir = path.join(tmp.dir, 'data');
    store = openAgentStore(dataDir, { now: () => T0 });
    store.saveConnectors([{ connectorId: 1, ratedPowerKw: 22, v2gCapable: false }]);
    store.saveIdentity({
      deviceId: 'dev_42',
      secret: SECRET,
      sn: 'SN/42 A',
      platformUrl: 'https://platform.example:8443',
      registeredAt: iso(T0 - 86_400_000),
    });
    store.savePendingSecret(PENDING, iso(T0 - MIN));
    store.saveToken({ accessToken: ACCESS, expiresAt: iso(T0 + 3_600_000), obtainedAt: iso(T0) });
    store.setState('agent_process', { pid: 4242, startedAt: iso(T0 - 3_600_000), version: '0.1.0' });
    store.setState('run_config', {
      dataDir,
      platformUrl: 'https://platform.example:8443',
      sn: 'SN/42 A',
      hal: '/opt/oem/hal.js',
      clientCert: '/etc/charger/client.pem',
      clientKey: '/etc/charger/client.key',
      updateKeys: ['/etc/charger/update-1.pem'],
      secretRotationDays: 90,
      signRequests: true,
      logLevel: 'info',
      halOptions: { modbusPassword: HAL_PASSWORD, port: '/dev/ttyS1' },
    });
    // The remote configuration, stored the way the agent's state table stores values.
    store.db
      .prepare("INSERT INTO agent_state (key, value, updated_at) VALUES ('configuration', ?, ?)")
      .run(JSON.stringify({ heartbeat_interval_seconds: 30, secret_rotation_days: 90 }), iso(T0));
    store.journalInsert(
      { commandId: 'cmd_new', command: 'stop', params: { connector_id: 1 }, expiry: iso(T0 + MIN) },
      iso(T0 - MIN),
    );
    store.recordCommandStatus('cmd_new', [{ status: 'rejected', reason: 'no session' }], iso(T0 - MIN));
    store.journalInsert(
      { commandId: 'cmd_old', command: 'stop', params: { connector_id: 1 }, expiry: iso(T0) },
      iso(T0 - 8 * 86_400_000),
    );
  });
  afterEach(() => {
    vi.useRealTimers();
    store.close();
    tmp.remove();
  });

  /** Logs through the agent's own logger (pino to rotating files) with the clock set to each line's time. */
  async function writeLogs(
    lines: Array<{ at: number; msg: string }>,
    maxFileBytes: number,
    keepFiles: number,
  ) {
    vi.useFakeTimers({ toFake: ['Date'] });
    const agentLogger = await createAgentLogger({
      dataDir,
      level: 'debug',
      maxFileBytes,
      keepFiles,
      stderr: { write: () => undefined },
    });
    for (const { at, msg } of lines) {
      vi.setSystemTime(at);
      agentLogger.logger.info(msg);
    }
    agentLogger.close();
    vi.useRealTimers();
  }

  const logDir = () => path.join(dataDir, 'logs');
  const logFiles = () => logFilesOldestFirst(readdirSync(logDir()));
  const timesOf = (name: string) =>
    readFileSync(path.join(logDir(), name), 'utf8')
      .split('\n')
      .map(lineTimeMs)
      .filter((t): t is number => t !== undefined);

  it('holds every part, the window’s log lines only, and not a byte of a secret', async () => {
    const lines = Array.from({ length: 40 }, (_, i) => ({
      at: T0 + i * MIN,
      msg: `line-${String(i).padStart(2, '0')}-${'x'.repeat(80)}`,
    }));
    lines.push({ at: T0 + 15 * MIN + 1, msg: `a careless message naming ${SECRET} and ${ACCESS}` });
    lines.sort((a, b) => a.at - b.at);
    await writeLogs(lines, 1500, 8);
    expect(logFiles().length).toBeGreaterThanOrEqual(3);
    // A line without a time in a file before the window and in one that overlaps it.
    const window = { startMs: T0 + 10 * MIN, endMs: T0 + 29 * MIN };
    const before = logFiles().find((f) => Math.max(...timesOf(f)) < window.startMs)!;
    const inside = logFiles().find((f) => timesOf(f).some((t) => t >= window.startMs && t <= window.endMs))!;
    expect(before).toBeDefined();
    expect(inside).toBeDefined();
    appendFileSync(path.join(logDir(), before), 'untimed-outside\n');
    appendFileSync(path.join(logDir(), inside), 'untimed-inside\n');

    const outFile = path.join(dataDir, 'diagnostics', 'diag-1.tar.gz');
    const result = await buildDiagnosticsArchive({
      dataDir,
      store,
      window,
      now: T0 + 30 * MIN,
      outFile,
      maxBytes: 20 * 1024 * 1024,
      isAlive: alive,
    });

    expect(result.file).toBe(outFile);
    expect(result.truncated).toBe(false);
    expect(result.size).toBe(statSync(outFile).size);
    expect(result.sha256).toBe(createHash('sha256').update(readFileSync(outFile)).digest('hex'));
    expect(statSync(outFile).mode & 0o777).toBe(0o600);
    // Nothing left behind: no staging directory, no temporary file.
    expect(readdirSync(dataDir).filter((n) => n.startsWith('.diagnostics'))).toEqual([]);
    expect(readdirSync(path.dirname(outFile))).toEqual(['diag-1.tar.gz']);

    const into = path.join(tmp.dir, 'x');
    await run('mkdir', ['-p', into]);
    const { root, files } = await extract(outFile, into);
    expect(root).toBe('diagnostics-SN_42_A-20260327T123000Z');
    expect(result.root).toBe(root);
    expect([...files.keys()].sort()).toEqual([...PARTS].sort());
    expect(result.parts).toEqual(PARTS);

    // Logs: lines 10..29 (both ends inclusive), the secret-naming line scrubbed, the untimed line of the
    // overlapping file only.
    const log = files.get('logs/agent.log')!.toString('utf8');
    const seqs = [...log.matchAll(/"msg":"line-(\d\d)-/g)].map((m) => Number(m[1]));
    expect(seqs).toEqual(Array.from({ length: 20 }, (_, i) => i + 10));
    expect(log).toContain('untimed-inside');
    expect(log).not.toContain('untimed-outside');
    expect(log).toContain(`a careless message naming ${REDACTED} and ${REDACTED}`);

    // status.json is the technician's status report; diag.json ran offline.
    const status = JSON.parse(files.get('status.json')!.toString('utf8'));
    expect(status).toEqual(
      JSON.parse(JSON.stringify(collectStatus(store, { dataDir, now: T0 + 30 * MIN, isAlive: alive }))),
    );
    expect(status.identity).toMatchObject({ sn: 'SN/42 A', device_id: 'dev_42' });
    const diag = JSON.parse(files.get('diag.json')!.toString('utf8'));
    const byName = new Map<string, { status: string; detail: string }>(
      diag.checks.map((c: { name: string }) => [c.name, c]),
    );
    for (const name of ['dns', 'tcp', 'tls', 'token', 'round_trip']) {
      expect(byName.get(name)).toMatchObject({ status: 'skip', detail: expect.stringContaining('offline') });
    }
    expect(byName.get('store')?.status).toBe('pass');
    expect(byName.get('logs')).toBeDefined();

    const commands = JSON.parse(files.get('commands.json')!.toString('utf8'));
    expect(commands.commands).toEqual([
      expect.objectContaining({
        command_id: 'cmd_new',
        status: 'rejected',
        reason: 'no session',
        params: { connector_id: 1 },
      }),
    ]);

    const configuration = JSON.parse(files.get('configuration.json')!.toString('utf8'));
    expect(configuration.run).toMatchObject({
      clientKey: '/etc/charger/client.key',
      updateKeys: ['/etc/charger/update-1.pem'],
      secretRotationDays: 90,
      halOptions: { modbusPassword: REDACTED, port: '/dev/ttyS1' },
    });
    expect(configuration.remote.values).toEqual({ heartbeat_interval_seconds: 30, secret_rotation_days: 90 });

    const manifest = JSON.parse(files.get('manifest.json')!.toString('utf8')) as Manifest;
    expect(manifest).toMatchObject({
      root,
      sn: 'SN/42 A',
      device_id: 'dev_42',
      window: { start: iso(window.startMs), end: iso(window.endMs) },
      truncated: false,
      logs: { lines: 22, dropped_lines: 0 },
    });
    expect(manifest.agent_version).toMatch(/^\d+\.\d+\.\d+/);
    expect(manifest.logs.sources.map((s) => s.name)).toEqual(logFiles());

    // Every byte: each extracted file, and the whole tar stream (headers included).
    const everything = [...files, ['(the whole tar stream)', gunzipSync(readFileSync(outFile))] as const];
    const secrets = { SECRET, PENDING, ACCESS, HAL_PASSWORD };
    const leaks = Object.entries(secrets).flatMap(([name, secret]) =>
      everything.filter(([, bytes]) => bytes.includes(secret)).map(([file]) => `${name} in ${file}`),
    );
    expect(leaks).toEqual([]);
  });

  it('drops the oldest log lines to stay under maxBytes, keeping the newest', async () => {
    // Random text compresses poorly, so the logs alone are far over the limit.
    const lines = Array.from({ length: 3000 }, (_, i) => ({
      at: T0 + i * 1000,
      msg: `n-${String(i).padStart(4, '0')}-${randomBytes(90).toString('hex')}`,
    }));
    await writeLogs(lines, 256 * 1024, 3);
    const maxBytes = 64 * 1024;
    const outFile = path.join(tmp.dir, 'out', 'diag.tar.gz');
    const result = await buildDiagnosticsArchive({
      dataDir,
      store,
      window: { startMs: T0, endMs: T0 + 3000 * 1000 },
      now: T0 + 3000 * 1000,
      outFile,
      maxBytes,
      isAlive: alive,
    });
    expect(result.truncated).toBe(true);
    expect(result.size).toBeLessThanOrEqual(maxBytes);
    expect(statSync(outFile).size).toBe(result.size);
    // Not cut far more than needed.
    expect(result.size).toBeGreaterThan(maxBytes / 2);

    const into = path.join(tmp.dir, 'x');
    await run('mkdir', ['-p', into]);
    const { files } = await extract(outFile, into);
    const log = files.get('logs/agent.log')!.toString('utf8');
    expect(log.endsWith('\n')).toBe(true);
    const seqs = [...log.matchAll(/"msg":"n-(\d{4})-/g)].map((m) => Number(m[1]));
    expect(seqs.length).toBeGreaterThan(50);
    // A run of whole lines ending with the very last one.
    expect(seqs.at(-1)).toBe(2999);
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => 3000 - seqs.length + i));
    expect(
      log
        .split('\n')
        .slice(0, -1)
        .every((l) => lineTimeMs(l) !== undefined),
    ).toBe(true);

    const manifest = JSON.parse(files.get('manifest.json')!.toString('utf8')) as Manifest;
    expect(manifest.truncated).toBe(true);
    expect(manifest.logs.lines).toBe(seqs.length);
    expect(manifest.logs.lines + manifest.logs.dropped_lines).toBe(3000);
    expect(manifest.notes.some((n) => n.includes('left out'))).toBe(true);
    expect(readdirSync(dataDir).filter((n) => n.startsWith('.diagnostics'))).toEqual([]);
  });

  it('refuses a limit the archive cannot meet even without logs, and leaves no file', async () => {
    await writeLogs([{ at: T0, msg: 'hello' }], 1024 * 1024, 1);
    const outFile = path.join(tmp.dir, 'out', 'diag.tar.gz');
    await expect(
      buildDiagnosticsArchive({
        dataDir,
        store,
        window: { startMs: T0 - MIN, endMs: T0 + MIN },
        now: T0,
        outFile,
        maxBytes: 300,
        isAlive: alive,
      }),
    ).rejects.toThrow(/without any log line/);
    expect(existsSync(outFile)).toBe(false);
    expect(readdirSync(path.dirname(outFile))).toEqual([]);
    expect(readdirSync(dataDir).filter((n) => n.startsWith('.diagnostics'))).toEqual([]);
  });

  it('reclaims a staging directory a dead build left an hour ago, not one under way', async () => {
    const stale = path.join(dataDir, '.diagnostics-staging-dead');
    const fresh = path.join(dataDir, '.diagnostics-staging-busy');
    mkdirSync(stale);
    mkdirSync(fresh);
    const twoHoursAgo = new Date(Date.now() - 2 * 3_600_000);
    utimesSync(stale, twoHoursAgo, twoHoursAgo);
    await buildDiagnosticsArchive({
      dataDir,
      store,
      window: { startMs: T0 - MIN, endMs: T0 },
      now: T0,
      outFile: path.join(tmp.dir, 'diag.tar.gz'),
      maxBytes: 1024 * 1024,
    });
    expect(existsSync(stale)).toBe(false);
    expect(existsSync(fresh)).toBe(true);
  });

  it('builds an archive with no logs at all and refuses a window that ends before it starts', async () => {
    const outFile = path.join(tmp.dir, 'diag.tar.gz');
    const result = await buildDiagnosticsArchive({
      dataDir,
      store,
      window: { startMs: T0 - MIN, endMs: T0 },
      now: T0,
      outFile,
      maxBytes: 1024 * 1024,
    });
    const into = path.join(tmp.dir, 'x');
    await run('mkdir', ['-p', into]);
    const { files } = await extract(result.file, into);
    expect(files.get('logs/agent.log')!.length).toBe(0);
    await expect(
      buildDiagnosticsArchive({
        dataDir,
        store,
        window: { startMs: T0, endMs: T0 - 1 },
        now: T0,
        outFile,
        maxBytes: 1,
      }),
    ).rejects.toThrow(RangeError);
  });
});
