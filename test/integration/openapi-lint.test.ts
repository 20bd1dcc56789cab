import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/cli.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * The served document through Spectral's CLI (`@stoplight/spectral-cli`) with the repository's ruleset, which is
 * `spectral:oas` with one documented exception (.spectral.yaml): no error, no warning, no hint.
 */
const SPECTRAL = join(REPO_ROOT, 'node_modules', '@stoplight', 'spectral-cli', 'dist', 'index.js');

interface Problem {
  code: string;
  message: string;
  path: string[];
  severity: number;
}

let tp: TestPlatform;
beforeAll(async () => {
  tp = await startTestPlatform();
});
afterAll(async () => {
  await tp.stop();
});

async function lint(document: unknown): Promise<Problem[]> {
  const file = join(tp.dataDir, 'openapi.json');
  await writeFile(file, JSON.stringify(document));
  const run = promisify(execFile)(
    process.execPath,
    [SPECTRAL, 'lint', file, '--ruleset', join(REPO_ROOT, '.spectral.yaml'), '--format', 'json', '--quiet'],
    { cwd: REPO_ROOT, maxBuffer: 64 * 1024 * 1024 },
  );
  // Spectral exits 1 when it found an error; its findings are on stdout either way.
  const { stdout } = await run.catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }));
  return JSON.parse(stdout) as Problem[];
}

const summary = (problems: Problem[]) =>
  problems.map((p) => `${p.code} at ${p.path.join('.')}: ${p.message}`);

describe('spectral lint of the served document (spectral:oas)', () => {
  it('reports nothing', async () => {
    const document = (await tp.http.get('/v1/openapi.json')).body;
    expect(summary(await lint(document))).toEqual([]);
  });

  it('would report an operation without an operationId or a description (the lint can fail)', async () => {
    const document = (await tp.http.get('/v1/openapi.json')).body;
    const heartbeat = document.paths['/v1/device/heartbeat'].post;
    delete heartbeat.operationId;
    delete heartbeat.description;
    expect(summary(await lint(document))).toEqual([
      expect.stringMatching(/^operation-description at paths\.\/v1\/device\/heartbeat\.post/),
      expect.stringMatching(/^operation-operationId at paths\.\/v1\/device\/heartbeat\.post/),
    ]);
  });
});
