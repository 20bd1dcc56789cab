import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { artifactSigningText } from '../../shared/artifact-manifest.js';
import { launchChromium } from '../helpers/browser.js';
import { type ServeProcess, spawnServe, tempDirs } from '../helpers/cli.js';
import { openDashboard, screenshot, signIn } from '../helpers/dashboard.js';
import { type HttpClient, httpClient } from '../helpers/platform.js';

/**
 * The dashboard's Firmware and update pages (DESIGN.md §19) in real Chromium against a real sandbox `serve` with
 * its simulated fleet of three real agents: the fleet's versions, an upload with a `.sig` file made here, an
 * update to a site in batches of one that the chargers refuse (they do not trust this test's key, or take no
 * updates at all), the update pausing itself over its failures, resumed and cancelled from the page, and the
 * artifact deleted once no update uses it.
 */
const dirs = tempDirs('cp-firmware-');
let serve: ServeProcess;
let browser: Browser;
let http: HttpClient;
let apiToken: string;
let files: { firmware: string; sig: string; size: number; sha256: string };
const SIM_CHARGERS = 3;
/**
 * The seeded chargers (offline for good) already report firmware 1.4.2, so an update to it skips them and its
 * batches hold only the live simulated chargers.
 */
const VERSION = '1.4.2';
/** Large enough that the upload's progress shows for a moment. */
const FIRMWARE_BYTES = 3 * 1024 * 1024;

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
  apiToken = tok.body.access_token;
  files = signedFirmware(await dirs.make());
  browser = await launchChromium();
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await http?.close();
  await serve?.stop();
  await dirs.removeAll();
});

/** A firmware image and its `.sig` manifest, as `charger-platform artifacts sign --json` would make them. */
function signedFirmware(dir: string) {
  const { privateKey } = generateKeyPairSync('ed25519');
  const data = randomBytes(FIRMWARE_BYTES);
  const manifest = {
    kind: 'firmware' as const,
    version: VERSION,
    target: '',
    sha256: createHash('sha256').update(data).digest('hex'),
    size: data.length,
  };
  const signature = sign(null, Buffer.from(artifactSigningText(manifest)), privateKey).toString('base64');
  const firmware = join(dir, 'charger-fw-1.4.2.img');
  writeFileSync(firmware, data);
  writeFileSync(`${firmware}.sig`, JSON.stringify({ ...manifest, signature }));
  return { firmware, sig: `${firmware}.sig`, size: manifest.size, sha256: manifest.sha256 };
}

async function apiDevices(): Promise<
  Array<{ device_id: string; sn: string; site_id?: string; firmware_version?: string }>
> {
  const r = await http.get('/v1/operator/devices?size=100', { token: apiToken });
  return r.body.data.items;
}

const stateOf = (page: Page, batch: number) =>
  page.locator(`table.update-devices tr[data-batch="${batch}"]`).first().getAttribute('data-state');
const updateStatus = (page: Page) =>
  page.locator('h1 [data-update-status]').getAttribute('data-update-status');

describe('the Firmware page', () => {
  let page: Page;
  let w: Awaited<ReturnType<typeof openDashboard>>;
  let updateUrl: string;
  /** Sandbox Depot's chargers, and those of them already on VERSION (the seeded ones). */
  let depot: { devices: number; skipped: number };

  it('shows the versions across the fleet, each count listing its chargers', async () => {
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
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Firmware' }).click();
    const devices = await apiDevices();
    const onVersion = devices.filter((d) => d.firmware_version === VERSION).length;
    expect(devices.length - onVersion).toBe(SIM_CHARGERS);
    const firmware = page.locator('table[data-versions=firmware_version]');
    const count = firmware.locator(`tr[data-version="${VERSION}"] a[data-count]`);
    await expect.poll(() => count.getAttribute('data-count')).toBe(String(onVersion));
    // Every charger is counted once per table.
    for (const field of ['agent_version', 'firmware_version']) {
      const counts = await page
        .locator(`table[data-versions=${field}] a[data-count]`)
        .evaluateAll((as) => as.map((a) => Number(a.getAttribute('data-count'))));
      expect(counts.reduce((s, n) => s + n, 0)).toBe(devices.length);
    }
    await count.click();
    expect(page.url()).toContain(`#/firmware?firmware_version=${VERSION}`);
    await expect.poll(() => page.locator('.version-chargers table.devices tbody tr').count()).toBe(onVersion);
    await screenshot(page, 'firmware-versions');
  });

  it('uploads a firmware file with its .sig, shows progress, and shows the API’s refusal of a second copy', async () => {
    const form = page.getByRole('form', { name: 'Upload an artifact' });
    await form.getByLabel('File', { exact: true }).setInputFiles(files.firmware);
    await form.getByLabel('Signature file (.sig, optional)').setInputFiles(files.sig);
    // The release and its signature are filled from the .sig file.
    await expect.poll(() => form.getByLabel('Version').inputValue()).toBe(VERSION);
    expect(await form.getByLabel('Kind').inputValue()).toBe('firmware');
    expect((await form.getByLabel('Signature (base64)').inputValue()).length).toBe(88);
    expect(await form.locator('[data-sig-note]').textContent()).toBe('Signed for 3.0 MiB.');
    // The bar lives only while the bytes go (a moment on loopback): a MutationObserver sees it come.
    await page.evaluate(`new MutationObserver(() => {
      const bar = document.querySelector('form progress');
      if (bar) window.progressMax = bar.max;
    }).observe(document.body, { subtree: true, childList: true })`);
    await form.getByRole('button', { name: 'Upload' }).click();
    const uploaded = form.locator('[data-uploaded]');
    await expect
      .poll(() => uploaded.textContent(), { timeout: 20_000 })
      .toContain('matches the signature file');
    expect(await page.evaluate('window.progressMax')).toBe(FIRMWARE_BYTES);
    const row = page.locator('table.artifacts tbody tr', { hasText: VERSION });
    await row.waitFor();
    expect(await row.locator('code[title]').getAttribute('title')).toBe(files.sha256);
    expect(await row.textContent()).toContain('any');
    expect(await row.textContent()).toContain('3.0 MiB');

    // The same release again: the API's 409, in its words.
    await form.getByLabel('File', { exact: true }).setInputFiles(files.firmware);
    await form.getByLabel('Signature file (.sig, optional)').setInputFiles(files.sig);
    await form.getByRole('button', { name: 'Upload' }).click();
    await expect
      .poll(() => form.getByRole('alert').textContent(), { timeout: 20_000 })
      .toBe(`This operator already has firmware ${VERSION} [4001]`);

    // A signature typed by hand that is not one: the API names its header.
    await form.getByLabel('File', { exact: true }).setInputFiles(files.firmware);
    await form.getByLabel('Version').fill('1.4.3');
    await form.getByLabel('Signature (base64)').fill('not-a-signature');
    await form.getByRole('button', { name: 'Upload' }).click();
    await expect
      .poll(() => form.getByRole('alert').textContent(), { timeout: 20_000 })
      .toContain('x-artifact-signature');
    expect(await page.locator('table.artifacts tbody tr').count()).toBe(1);
  });

  it('shows the API’s validation message by its field, then starts an update to a site in batches of one', async () => {
    const sites = await http.get('/v1/operator/sites', { token: apiToken });
    const site = (sites.body.data.items as Array<{ site_id: string; name: string }>).find(
      (s) => s.name === 'Sandbox Depot',
    )!;
    const atSite = (await apiDevices()).filter((d) => d.site_id === site.site_id);
    const skipped = atSite.filter((d) => d.firmware_version === VERSION).length;
    expect(atSite.length - skipped).toBe(SIM_CHARGERS);
    depot = { devices: atSite.length, skipped };
    const form = page.getByRole('form', { name: 'Start an update' });
    await form.getByLabel('Sandbox Depot').check();
    await form.getByLabel(/^Install/).selectOption('immediate');
    await form.getByLabel(/^Batch size/).fill('0');
    await form.getByRole('button', { name: 'Start update' }).click();
    const batchError = form
      .locator('label', { has: page.locator('input[name=batch_size]') })
      .getByRole('alert');
    await expect.poll(() => batchError.textContent()).toContain('rollout.batch_size');

    await form.getByLabel(/^Batch size/).fill('1');
    await form.getByRole('button', { name: 'Start update' }).click();
    const started = form.getByRole('status');
    await expect.poll(() => started.textContent()).toContain(`Started for ${depot.devices} chargers`);
    expect(await batchError.count()).toBe(0);
    const updates = page.locator('table.updates tbody tr');
    await expect.poll(() => updates.count()).toBe(1);
    expect(await updates.first().textContent()).toContain(`firmware ${VERSION}`);
    await screenshot(page, 'firmware');
    await started.getByRole('link', { name: 'follow the update' }).click();
    await page.locator('table.update-devices').waitFor();
    updateUrl = page.url();
    expect(updateUrl).toMatch(/#\/updates\/[A-Za-z0-9_-]+$/);
  });

  it('follows the first batch failing and the update pausing itself over the threshold', async () => {
    expect(await page.locator('table.batches tbody tr').count()).toBe(SIM_CHARGERS);
    expect(await page.locator('table.update-devices tbody tr').count()).toBe(depot.devices);
    expect(await page.locator('table.update-devices tr[data-state=skipped]').count()).toBe(depot.skipped);
    // The page reads the update again every 2 s: every state it passes through shows without a reload.
    const seen = new Set<string>();
    await expect
      .poll(
        async () => {
          seen.add((await stateOf(page, 1)) ?? '');
          return updateStatus(page);
        },
        { timeout: 60_000, interval: 250 },
      )
      .toBe('paused');
    expect(await stateOf(page, 1)).toBe('failed');
    expect(seen.has('failed')).toBe(true);
    expect(await stateOf(page, 2)).toBe('pending');
    expect(await page.locator('[data-update-reason]').getAttribute('data-update-reason')).toMatch(
      /^batch 1 of 3: 1 of 1 chargers failed/,
    );
    expect(await page.locator('table.batches tr[data-batch="1"]').getAttribute('data-status')).toBe('failed');
    expect(await page.locator('[data-progress] [data-state=failed]').getAttribute('data-count')).toBe('1');
    expect(await page.getByRole('button', { name: 'Pause' }).count()).toBe(0);
    await screenshot(page, 'update-paused');
  });

  it('refuses to delete the artifact while the paused update uses it, with the API’s message', async () => {
    await page.goto(`${serve.url}/dashboard#/firmware`);
    const row = page.locator('table.artifacts tbody tr', { hasText: VERSION });
    await row.getByRole('button', { name: `Delete firmware ${VERSION}` }).click();
    await row.getByRole('button', { name: 'Yes, delete' }).click();
    await expect
      .poll(() => row.getByRole('alert').textContent())
      .toBe('A running or paused update uses this artifact: cancel it first [4001]');
    expect(await page.locator('table.updates [data-update-status]').getAttribute('data-update-status')).toBe(
      'paused',
    );
  });

  it('resumes the update (the next batch starts), then cancels it', async () => {
    await page.goto(updateUrl);
    await page.getByRole('button', { name: 'Resume' }).click();
    await expect.poll(() => updateStatus(page)).not.toBe('paused');
    // The next batch's charger moves, and its failure pauses the update again.
    await expect.poll(() => stateOf(page, 2), { timeout: 60_000 }).not.toBe('pending');
    await page.getByRole('button', { name: 'Cancel update' }).click();
    await expect.poll(() => updateStatus(page)).toBe('cancelled');
    expect(await stateOf(page, 3)).toBe('cancelled');
    expect(await page.locator('.action-buttons button').count()).toBe(0);
    // A charger that had already taken the update goes on reporting; the page keeps following it.
    await expect.poll(() => stateOf(page, 2), { timeout: 30_000 }).toMatch(/^(failed|cancelled)$/);
    await screenshot(page, 'update-cancelled');
  });

  it('works at phone width with an artifact and updates, the update page reached with the keyboard', async () => {
    const phone = await openDashboard(browser, serve.url, { width: 390, height: 844 });
    const p = phone.page;
    await signIn(p, serve.clientId!, serve.clientSecret!);
    await p.goto(`${serve.url}/dashboard#/firmware`);
    await p.locator('table.updates tbody tr').first().waitFor();
    expect(await p.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await screenshot(p, 'firmware-phone');
    const target = await p.locator('table.updates tbody th a').first().getAttribute('href');
    for (let i = 0; i < 80; i++) {
      await p.keyboard.press('Tab');
      if ((await p.evaluate("document.activeElement?.getAttribute('href')")) === target) break;
    }
    await p.keyboard.press('Enter');
    await p.locator('table.update-devices').waitFor();
    expect(p.url()).toContain(target!);
    expect(await p.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    expect(phone.problems).toEqual([]);
    await phone.close();
  });

  it('deletes the artifact once no update uses it', async () => {
    await page
      .getByRole('navigation', { name: 'Breadcrumb' })
      .getByRole('link', { name: 'Firmware' })
      .click();
    const row = page.locator('table.artifacts tbody tr', { hasText: VERSION });
    await row.getByRole('button', { name: `Delete firmware ${VERSION}` }).click();
    // The question takes the focus (its safe answer), so the keyboard is not left on a button that went away.
    await expect.poll(() => page.evaluate('document.activeElement?.textContent')).toBe('Keep');
    await page.keyboard.press('Enter');
    expect(await row.count()).toBe(1);
    await row.getByRole('button', { name: `Delete firmware ${VERSION}` }).click();
    await row.getByRole('button', { name: 'Yes, delete' }).click();
    await expect.poll(() => row.count()).toBe(0);
    const listed = await http.get('/v1/operator/artifacts', { token: apiToken });
    expect(listed.body.data.total).toBe(0);
    // The browser logs each refused request (409, 400) as a failed resource; nothing else went wrong.
    expect(w.problems.filter((p) => !/status of (400|409)/.test(p))).toEqual([]);
    expect([...w.origins]).toEqual([serve.url]);
    await w.close();
  });
});
