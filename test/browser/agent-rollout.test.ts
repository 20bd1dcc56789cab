import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAgent } from '../helpers/agent-bundle.js';
import { launchChromium } from '../helpers/browser.js';
import { runCli, type ServeProcess, spawnServe, tempDirs } from '../helpers/cli.js';
import { openDashboard, screenshot, signIn } from '../helpers/dashboard.js';
import { type HttpClient, httpClient } from '../helpers/platform.js';
import { rebuildArchive } from '../helpers/releases.js';

/**
 * Issue 35's newcomer, in real Chromium against a real sandbox `serve` and its simulated fleet: an agent bundle
 * built with `npm run build:agent` and signed with the sandbox's own key is uploaded on the Firmware page with its
 * `.sig`, started to Sandbox Depot in batches of one, and followed on the update page until every live charger
 * runs it (the seeded chargers, which run no agent, are skipped); then a bundle that exits at start, signed with
 * `charger-platform artifacts sign`, rolls back by itself on the first charger and the update pauses.
 */
const dirs = tempDirs('cp-agent-rollout-');
let serve: ServeProcess;
let browser: Browser;
let http: HttpClient;
let token: string;
let page: Page;
let w: Awaited<ReturnType<typeof openDashboard>>;
const SIM_CHARGERS = 3;
const files = { good: '', broken: '' };

beforeAll(async () => {
  const dataDir = await dirs.make();
  serve = await spawnServe(
    ['--env', 'sandbox', '--data-dir', dataDir, '--sim-chargers', String(SIM_CHARGERS)],
    { timeoutMs: 60_000 },
  );
  http = httpClient(serve.url, readFileSync(serve.certPath, 'utf8'));
  const tok = await http.post('/v1/operator/oauth/token', {
    json: { client_id: serve.clientId, client_secret: serve.clientSecret, grant_type: 'client_credentials' },
  });
  token = tok.body.access_token;
  // As the README says: the sandbox's key signs the bundle, and its fleet trusts it.
  const key = join(dataDir, 'keys', 'update-ed25519.pem');
  const out = await dirs.make();
  files.good = join(out, 'charger-agent-0.2.0.tar.gz');
  const built = await buildAgent([
    '--out',
    join(out, 'bundle'),
    '--version',
    '0.2.0',
    '--archive',
    files.good,
    '--sign-key',
    key,
    '--quiet',
  ]);
  if (built.code !== 0) throw new Error(`build:agent failed:\n${built.output}`);
  // The deliberately broken one (docs/oem-guide.md): the same bundle whose entry exits at start, signed by hand.
  files.broken = join(out, 'charger-agent-0.3.0.tar.gz');
  await rebuildArchive({
    from: join(out, 'bundle'),
    into: join(out, 'broken'),
    archive: files.broken,
    version: '0.3.0',
    entry: 'process.exit(1);\n',
  });
  const signed = await runCli([
    'artifacts',
    'sign',
    '--file',
    files.broken,
    '--kind',
    'agent',
    '--version',
    '0.3.0',
    '--target',
    'linux-x64',
    '--key',
    key,
    '--json',
  ]);
  expect(signed.code, signed.stderr).toBe(0);
  writeFileSync(`${files.broken}.sig`, signed.stdout);
  browser = await launchChromium();
}, 120_000);

afterAll(async () => {
  await w?.close();
  await browser?.close();
  await http?.close();
  await serve?.stop();
  await dirs.removeAll();
});

const updateStatus = () => page.locator('h1 [data-update-status]').getAttribute('data-update-status');
const simAgentVersions = async () => {
  const r = await http.get('/v1/operator/devices?size=100', { token });
  return (r.body.data.items as Array<{ sn: string; agent_version?: string }>)
    .filter((d) => d.sn.startsWith('SIM-'))
    .map((d) => d.agent_version);
};

/** Uploads `file` with its `.sig` on the Firmware page; kind and version typed where the .sig has none. */
async function upload(file: string, typed?: { kind: string; version: string }): Promise<void> {
  const form = page.getByRole('form', { name: 'Upload an artifact' });
  await form.getByLabel('File', { exact: true }).setInputFiles(file);
  await form.getByLabel('Signature file (.sig, optional)').setInputFiles(`${file}.sig`);
  if (typed) {
    await form.locator('select[name=kind]').selectOption(typed.kind);
    await form.getByRole('textbox', { name: 'Version', exact: true }).fill(typed.version);
    await form.getByRole('textbox', { name: 'Target (optional)', exact: true }).fill('linux-x64');
  }
  await expect.poll(() => form.locator('select[name=kind]').inputValue()).toBe('agent');
  await form.getByRole('button', { name: 'Upload' }).click();
  await expect
    .poll(() => form.locator('[data-uploaded]').textContent(), { timeout: 20_000 })
    .toContain('matches the signature file');
}

/** Starts the newest artifact's update to Sandbox Depot, immediately, in batches of one; opens its page. */
async function startToDepot(version: string): Promise<void> {
  const form = page.getByRole('form', { name: 'Start an update' });
  await form.getByLabel('Artifact').selectOption({ label: `agent ${version} (linux-x64)` });
  await form.getByLabel('Sandbox Depot').check();
  await form.getByLabel(/^Install/).selectOption('immediate');
  await form.getByLabel(/^Batch size/).fill('1');
  await form.getByLabel(/^Health check/).fill('5');
  await form.getByRole('button', { name: 'Start update' }).click();
  const started = form.getByRole('status');
  await expect.poll(() => started.textContent()).toContain('Started for');
  await started.getByRole('link', { name: 'follow the update' }).click();
  await page.locator('table.update-devices').waitFor();
}

describe('an agent release from the Firmware page, on the sandbox fleet', () => {
  it('rolls a bundle built and signed with the sandbox key out to every live charger of a site', async () => {
    w = await openDashboard(browser, serve.url);
    page = w.page;
    await signIn(page, serve.clientId!, serve.clientSecret!);
    await expect
      .poll(
        () => page.locator('tr[data-activity]:not([data-activity=offline])', { hasText: 'SIM-' }).count(),
        {
          timeout: 30_000,
        },
      )
      .toBe(SIM_CHARGERS);
    expect(await simAgentVersions()).toEqual(Array(SIM_CHARGERS).fill('0.1.0'));
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Firmware' }).click();
    await upload(files.good);
    await startToDepot('0.2.0');
    await expect.poll(updateStatus, { timeout: 120_000, interval: 500 }).toBe('completed');
    const rows = page.locator('table.update-devices tbody tr');
    const states = await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-state')));
    expect(states.filter((s) => s === 'succeeded')).toHaveLength(SIM_CHARGERS);
    // The seeded chargers run no agent: skipped, in no batch, instead of holding one for a day.
    expect(states.filter((s) => s !== 'succeeded').every((s) => s === 'skipped')).toBe(true);
    expect(await simAgentVersions()).toEqual(Array(SIM_CHARGERS).fill('0.2.0'));
    await screenshot(page, 'agent-update-completed');
  });

  it('rolls a bundle that exits at start back by itself on its first charger, and pauses', async () => {
    await page
      .getByRole('navigation', { name: 'Breadcrumb' })
      .getByRole('link', { name: 'Firmware' })
      .click();
    await upload(files.broken, { kind: 'agent', version: '0.3.0' });
    await startToDepot('0.3.0');
    await expect.poll(updateStatus, { timeout: 60_000, interval: 500 }).toBe('paused');
    const first = page.locator('table.update-devices tr[data-batch="1"]').first();
    expect(await first.getAttribute('data-state')).toBe('rolled_back');
    expect(await first.textContent()).toContain('exited 3 times');
    expect(
      await page.locator('table.update-devices tr[data-batch="2"]').first().getAttribute('data-state'),
    ).toBe('pending');
    expect(await page.locator('[data-update-reason]').getAttribute('data-update-reason')).toMatch(
      /^batch 1 of 3: 1 of 1 chargers failed/,
    );
    // Every charger still runs 0.2.0, the rolled-back one included.
    expect(await simAgentVersions()).toEqual(Array(SIM_CHARGERS).fill('0.2.0'));
    await screenshot(page, 'agent-update-rolled-back');
    expect(w.problems).toEqual([]);
  });
});
