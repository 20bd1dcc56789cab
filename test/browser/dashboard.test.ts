import { readFileSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../helpers/browser.js';
import { type ServeProcess, spawnServe, tempDirs } from '../helpers/cli.js';
import { openDashboard, otherTenantCharger, screenshot, signIn } from '../helpers/dashboard.js';
import { type HttpClient, httpClient } from '../helpers/platform.js';
import { openStoredData } from '../helpers/stored-data.js';

/**
 * The operator dashboard in real Chromium (Debian's package through playwright-core) against a real sandbox
 * `serve` with its simulated fleet (three real agents on the simulated HAL): sign-in and its failure, the fleet
 * live, a device's power moving and a stop reaching `succeeded`, site flexibility, charging records filtered and
 * exported, phone width and keyboard, token expiry, and another tenant's live charger never shown.
 */
const dirs = tempDirs('cp-dashboard-');
let serve: ServeProcess;
let browser: Browser;
let http: HttpClient;
let apiToken: string;
let other: Awaited<ReturnType<typeof otherTenantCharger>>;
let otherSeeded: { device_id: string; sn: string };
const SIM_CHARGERS = 3;

beforeAll(async () => {
  const dataDir = await dirs.make();
  serve = await spawnServe(
    // Request logs (info) too: the stream's URL as logged is checked.
    [
      '--env',
      'sandbox',
      '--data-dir',
      dataDir,
      '--sim-chargers',
      String(SIM_CHARGERS),
      '--log-level',
      'info',
    ],
    {
      timeoutMs: 60_000,
    },
  );
  const ca = readFileSync(serve.certPath, 'utf8');
  http = httpClient(serve.url, ca);
  const stored = await openStoredData(dataDir);
  const [otherSite] = await stored.all<{ site_id: string }>(
    "SELECT site_id FROM sites WHERE name = 'Other Tenant Yard'",
  );
  const seededOfOther = await stored.all<{ device_id: string; sn: string }>(
    'SELECT device_id, sn FROM devices WHERE site_id = ?',
    [otherSite!.site_id],
  );
  otherSeeded = seededOfOther[0]!;
  await stored.close();
  other = await otherTenantCharger(serve, dataDir, otherSite!.site_id, ca);
  const tok = await http.post('/v1/operator/oauth/token', {
    json: { client_id: serve.clientId, client_secret: serve.clientSecret, grant_type: 'client_credentials' },
  });
  apiToken = tok.body.access_token;
  browser = await launchChromium();
}, 90_000);

afterAll(async () => {
  await other?.stop();
  await browser?.close();
  await http?.close();
  await serve?.stop();
  await dirs.removeAll();
});

/** Nothing of the other tenant on the page: not its site, not its seeded charger, not its live one. */
async function expectNoOtherTenant(page: Page) {
  const html = await page.content();
  for (const text of [
    'Other Tenant Yard',
    otherSeeded.sn,
    otherSeeded.device_id,
    other.deviceId,
    'OTHER-TENANT-LIVE',
  ]) {
    expect(html).not.toContain(text);
  }
}

describe('the operator dashboard', () => {
  it('shows a failed sign-in as the API words it, and keeps nothing', async () => {
    const w = await openDashboard(browser, serve.url);
    await signIn(w.page, serve.clientId!, 'not-the-secret');
    await expect.poll(() => w.page.getByRole('alert').textContent()).toContain('Invalid client credentials');
    expect(await w.page.evaluate('sessionStorage.length')).toBe(0);
    await screenshot(w.page, 'sign-in-failed');
    expect(w.problems.filter((p) => !p.includes('401'))).toEqual([]);
    await w.close();
  });

  let page: Page;
  let w: Awaited<ReturnType<typeof openDashboard>>;

  it('signs in and shows the simulated fleet live', async () => {
    w = await openDashboard(browser, serve.url);
    page = w.page;
    await signIn(page, serve.clientId!, serve.clientSecret!);
    await expect
      .poll(() => page.locator('[data-link]').getAttribute('data-link'), { timeout: 15_000 })
      .toBe('live');
    // The stream opened with a one-use ticket: no access token in any URL the platform logged.
    const logged = serve.stdout() + serve.stderr();
    expect(logged).toContain('/v1/operator/stream?ticket=[redacted]');
    expect(logged).not.toContain('access_token=');
    // The simulated chargers, online, at least one of them charging with power from the stream.
    await expect
      .poll(
        () => page.locator('tr[data-activity]:not([data-activity=offline])', { hasText: 'SIM-' }).count(),
        {
          timeout: 30_000,
        },
      )
      .toBe(SIM_CHARGERS);
    await expect
      .poll(() => page.locator('tr[data-activity=charging]', { hasText: 'SIM-' }).count(), {
        timeout: 30_000,
      })
      .toBeGreaterThan(0);
    const online = Number(await page.locator('[data-card=online] .card-value').textContent());
    expect(online).toBeGreaterThanOrEqual(SIM_CHARGERS);
    expect(await page.locator('[data-card=import] .card-value').textContent()).toMatch(/^[1-9][\d.]* kW$/);
    await screenshot(page, 'overview');
    await expectNoOtherTenant(page);
    expect(other.posted()).toBeGreaterThan(0);
  });

  it('opens a charging device, follows its power, and stops the session to succeeded', async () => {
    const chargingRow = page.locator('tr[data-activity=charging]', { hasText: 'SIM-' }).first();
    await chargingRow.locator('th a').click();
    const charging = page.locator('li.connector[data-state=charging]').first();
    await charging.waitFor();
    // Pinned by its number: its state changes below.
    const connectorId = await charging.getAttribute('data-connector-id');
    const connector = page.locator(`li.connector[data-connector-id="${connectorId}"]`);
    const powerBefore = Number(await connector.locator('[data-reading=power]').getAttribute('data-value'));
    expect(powerBefore).toBeGreaterThan(0);
    // The chart takes samples from the stream as they come (every 5 s while charging).
    await expect
      .poll(async () => Number(await page.locator('[data-live-samples]').getAttribute('data-live-samples')), {
        timeout: 20_000,
      })
      .toBeGreaterThanOrEqual(2);
    await screenshot(page, 'device');

    await connector.getByRole('button', { name: 'Stop' }).click();
    await connector.getByRole('button', { name: 'Send' }).click();
    const sent = connector.locator('.sent [data-command-status]');
    await expect.poll(() => sent.getAttribute('data-command-status'), { timeout: 20_000 }).toBe('succeeded');
    expect(await connector.locator('.trail').textContent()).toMatch(/^queued → .*succeeded$/);
    // The power falls to nothing once the charger has stopped, without a reload.
    await expect
      .poll(async () => Number(await connector.locator('[data-reading=power]').getAttribute('data-value')), {
        timeout: 20_000,
      })
      .toBe(0);
    // The commands list shows it too, with its final status.
    const commandId = await connector.locator('.sent').getAttribute('data-command-id');
    await expect
      .poll(() =>
        page
          .locator(`table.commands tr[data-command-id="${commandId}"] [data-command-status]`)
          .first()
          .getAttribute('data-command-status'),
      )
      .toBe('succeeded');
    await screenshot(page, 'device-stopped');
    await expectNoOtherTenant(page);
  });

  it('answers another tenant’s charger with the API’s not found', async () => {
    await page.goto(`${serve.url}/dashboard#/devices/${other.deviceId}`);
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('not found');
    await expectNoOtherTenant(page);
    // The browser logs the API's 404 as a failed resource; that one is expected.
    expect(w.problems).toEqual([
      'console: Failed to load resource: the server responded with a status of 404 (Not Found)',
    ]);
    w.problems.length = 0;
  });

  it('sends a site flexibility limit and shows its commands moving', async () => {
    await page.goto(`${serve.url}/dashboard#/`);
    await page.getByRole('link', { name: 'Sandbox Depot' }).first().click();
    await page.locator('figure.chart').first().waitFor();
    const form = page.getByRole('form', { name: 'Site flexibility' });
    await form.getByLabel('Power limit, % of rating').fill('50');
    await form.getByLabel('Duration, seconds').fill('120');
    await form.getByRole('button', { name: /Send to every charger/ }).click();
    // Every online simulated charger of the site carries it out; the seeded offline ones stay queued.
    const succeeded = form.locator('[data-progress-status=succeeded]');
    await expect
      .poll(async () => Number((await succeeded.count()) ? await succeeded.getAttribute('data-count') : 0), {
        timeout: 30_000,
      })
      .toBeGreaterThanOrEqual(SIM_CHARGERS);
    await screenshot(page, 'site');
    await expectNoOtherTenant(page);
  });

  it('filters charging records and exports exactly the filtered ones as CSV', async () => {
    await page.getByRole('link', { name: 'Charging records' }).click();
    const heading = page.locator('section h2', { hasText: /records$/ });
    await heading.waitFor();
    const seeded = await http.get('/v1/operator/devices?size=100', { token: apiToken });
    const device = (seeded.body.data.items as Array<{ device_id: string; sn: string }>).find(
      (d) => d.sn === 'SANDBOX-0001',
    )!;
    await page.getByLabel('Charger').selectOption(device.device_id);
    await page.getByRole('button', { name: 'Apply filters' }).click();
    const expected = await http.get(`/v1/operator/charging-records?device_id=${device.device_id}&size=100`, {
      token: apiToken,
    });
    const total = expected.body.data.total as number;
    expect(total).toBeGreaterThan(0);
    await expect.poll(() => heading.textContent()).toBe(`${total} records`);
    // The filter stays shown as applied (it lives in the URL: #/records?device_id=…).
    expect(page.url()).toContain(`device_id=${device.device_id}`);
    expect(await page.getByLabel('Charger').inputValue()).toBe(device.device_id);
    const rows = page.locator('table.records tbody tr');
    expect(await rows.count()).toBe(Math.min(total, 20));
    for (const id of await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-device-id')))) {
      expect(id).toBe(device.device_id);
    }
    await screenshot(page, 'records');

    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Export CSV' }).click();
    const file = await (await download).path();
    const lines = readFileSync(file, 'utf8').trimEnd().split('\r\n');
    expect(lines[0]).toMatch(/^record_id,device_id,connector_id,start_time,end_time,energy/);
    expect(lines).toHaveLength(total + 1);
    const ids = new Set(lines.slice(1).map((l) => l.split(',')[0]));
    const expectedIds = new Set(
      (expected.body.data.items as Array<{ record_id: string }>).map((r) => r.record_id),
    );
    expect(ids).toEqual(expectedIds);
    for (const line of lines.slice(1)) expect(line.split(',')[1]).toBe(device.device_id);
    expect(await page.locator('[data-export-note]').textContent()).toBe(`Exported ${total} records.`);

    await expectNoOtherTenant(page);
    expect(w.problems).toEqual([]);
    expect([...w.origins]).toEqual([serve.url]);
    await w.close();
  });

  it('works at phone width with the keyboard alone', async () => {
    const phone = await openDashboard(browser, serve.url, { width: 390, height: 844 });
    const p = phone.page;
    await p.keyboard.press('Tab');
    await p.keyboard.type(serve.clientId!);
    await p.keyboard.press('Tab');
    await p.keyboard.type(serve.clientSecret!);
    await p.keyboard.press('Enter');
    await expect
      .poll(() => p.locator('tr[data-activity]', { hasText: 'SIM-' }).count(), { timeout: 15_000 })
      .toBe(SIM_CHARGERS);
    await expect
      .poll(() => p.locator('[data-link]').getAttribute('data-link'), { timeout: 15_000 })
      .toBe('live');
    // Nothing wider than the screen but the tables' own scrolling frames.
    expect(await p.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await screenshot(p, 'phone');
    // Keyboard: Tab reaches a charger's link, and Enter opens it.
    const first = p.locator('table.devices tbody th a', { hasText: 'SIM-' }).first();
    const target = await first.getAttribute('href');
    for (let i = 0; i < 40; i++) {
      await p.keyboard.press('Tab');
      if ((await p.evaluate("document.activeElement?.getAttribute('href')")) === target) break;
    }
    await p.keyboard.press('Enter');
    await p.locator('li.connector').first().waitFor();
    expect(p.url()).toContain(target!);
    expect(phone.problems).toEqual([]);
    await phone.close();
  });

  it('signs out when the token expires', async () => {
    const w2 = await openDashboard(browser, serve.url);
    await w2.page.clock.install();
    await w2.page.reload();
    await signIn(w2.page, serve.clientId!, serve.clientSecret!);
    await w2.page.locator('[data-card=online]').waitFor();
    await w2.page.clock.fastForward('24:00:05');
    await expect.poll(() => w2.page.getByRole('status').first().textContent()).toContain('session expired');
    expect(await w2.page.getByLabel('Client secret').inputValue()).toBe('');
    expect(await w2.page.evaluate('sessionStorage.length')).toBe(0);
    await w2.close();
  });
});
