import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONFIGURATION_KEY_NAMES, CONFIGURATION_KEYS } from '../../shared/configuration.js';
import { waitFor } from '../helpers/agent.js';
import { launchChromium } from '../helpers/browser.js';
import { runCliJson, type ServeProcess, spawnServe, tempDirs } from '../helpers/cli.js';
import { openDashboard, SCREENSHOT_DIR, signIn } from '../helpers/dashboard.js';
import { type MaintenanceCharger, maintenanceChargers } from '../helpers/maintenance-chargers.js';
import { type HttpClient, httpClient } from '../helpers/platform.js';

/**
 * Remote maintenance from the charger page (DESIGN.md §20), as a helpdesk would do it, in real Chromium against a
 * real sandbox `serve` and a real agent on the simulated HAL (in this process, so that its launcher's restart is
 * the test's: the runtime stops and a new one starts on the same store and hardware). Its HAL has no reboot(), so
 * a charger reboot is refused with the charger's reason; an agent restart comes back with a new boot event.
 * Connectors taken out of service and back, a cable unlocked, the configuration changed (a bad value refused
 * before sending, the API's own refusal shown by its field), a read-only client's page, and diagnostics collected
 * and downloaded.
 */
const dirs = tempDirs('cp-maintenance-');
const SN = `HELPDESK-${process.pid}`;
let serve: ServeProcess;
let browser: Browser;
let http: HttpClient;
let apiToken: string;
let dataDir: string;
let page: Page;
let w: Awaited<ReturnType<typeof openDashboard>>;
const ev = { capacityKwh: 80, soc: 40, maxChargeKw: 22, maxDischargeKw: 11 };

let charger: MaintenanceCharger;
/** Its HAL has no reboot(): a charger reboot is refused with the charger's reason. */
const chargers = maintenanceChargers(() => ({
  platformUrl: serve.url,
  ca: readFileSync(serve.certPath, 'utf8'),
}));
const startCharger = () => chargers.start(SN, { seed: 7, maintenanceFaults: ['no_reboot'] });

beforeAll(async () => {
  dataDir = await dirs.make();
  serve = await spawnServe(['--env', 'sandbox', '--data-dir', dataDir], { timeoutMs: 60_000 });
  http = httpClient(serve.url, readFileSync(serve.certPath, 'utf8'));
  const tok = await http.post('/v1/operator/oauth/token', {
    json: { client_id: serve.clientId, client_secret: serve.clientSecret, grant_type: 'client_credentials' },
  });
  apiToken = tok.body.access_token;
  charger = await startCharger();
  // Online, with its first configuration report in, before the page opens.
  const reported = await waitFor(
    () => apiGet(`/v1/operator/devices/${charger.deviceId}/configuration`),
    (v) => typeof v.reported_at === 'string',
    20_000,
    250,
  );
  if (!reported.reported_at) throw new Error('the charger reported no configuration');
  browser = await launchChromium();
}, 90_000);

afterAll(async () => {
  await w?.close();
  await browser?.close();
  await chargers.stopAll();
  chargers.removeDirs();
  await http?.close();
  await serve?.stop();
  await dirs.removeAll();
});

/** One part of the page (the docs show the part, not the whole long page), where `screenshot` puts them. */
async function screenshotOf(part: Locator, name: string): Promise<void> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await part.screenshot({ path: join(SCREENSHOT_DIR, `dashboard-${name}.png`) });
}

// biome-ignore lint/suspicious/noExplicitAny: the API's JSON, checked field by field
async function apiGet(path: string): Promise<any> {
  const r = await http.get(path, { token: apiToken });
  if (r.status !== 200) throw new Error(`GET ${path}: ${r.status} ${r.text}`);
  return r.body.data;
}

async function bootEvents(): Promise<string[]> {
  const events = await apiGet(`/v1/operator/devices/${charger.deviceId}/events?size=100`);
  return (events.items as Array<{ event_id: string; kind: string }>)
    .filter((e) => e.kind === 'boot')
    .map((e) => e.event_id);
}

const connector = (id: number) => page.locator(`li.connector[data-connector-id="${id}"]`);
const connectorView = async (id: number) =>
  (
    (await apiGet(`/v1/operator/devices/${charger.deviceId}`)).connectors as Array<{
      connector_id: number;
      status: string;
      available?: boolean;
    }>
  ).find((c) => c.connector_id === id);

describe('remote maintenance on the charger page', () => {
  it('refuses a charger reboot with the charger’s reason, then restarts the agent, which comes back', async () => {
    w = await openDashboard(browser, serve.url);
    page = w.page;
    await signIn(page, serve.clientId!, serve.clientSecret!);
    await page.locator('[data-link="live"]').waitFor({ timeout: 15_000 });
    await page.evaluate(`location.hash = '#/devices/${charger.deviceId}'`);
    await expect.poll(() => page.locator('[data-device-status]').textContent()).toBe('online');

    const maintenance = page.getByRole('region', { name: 'Maintenance' });
    await maintenance.getByRole('button', { name: 'Restart…' }).click();
    const form = page.getByRole('form', { name: `Restart ${SN}` });
    // The defaults: the agent, when idle.
    expect(await form.getByLabel('The agent (restart the software)').isChecked()).toBe(true);
    expect(await form.getByLabel(/^When idle/).isChecked()).toBe(true);

    // A reboot of the charger, now: asked twice, then refused by the charger (its HAL has no reboot()).
    await form.getByLabel('The charger (reboot the hardware)').check();
    await form.getByLabel('Now', { exact: true }).check();
    await form.getByRole('button', { name: 'Restart', exact: true }).click();
    const confirm = form.locator('[data-confirm=reset]');
    expect(await confirm.locator('legend').textContent()).toBe(`Reboot ${SN} now?`);
    expect(await confirm.textContent()).toContain('every session on it ends');
    // Cancel sends nothing; the second time it goes.
    await confirm.getByRole('button', { name: 'Cancel' }).click();
    expect(await form.locator('.sent').count()).toBe(0);
    await form.getByRole('button', { name: 'Restart', exact: true }).click();
    await form.getByRole('button', { name: 'Yes, restart' }).click();
    const refused = form.locator('[data-reset-refused]');
    await expect.poll(() => refused.textContent(), { timeout: 20_000 }).toContain('cannot reboot');
    expect(await refused.textContent()).toContain('Not restarted (rejected)');
    expect(charger.restarts).toBe(0);

    // The agent, when idle (no vehicle): it reports succeeded, restarts, and a new boot event shows it back.
    const bootsBefore = await bootEvents();
    await form.getByLabel('The agent (restart the software)').check();
    await form.getByLabel(/^When idle/).check();
    await form.getByRole('button', { name: 'Restart', exact: true }).click();
    expect(await form.locator('[data-confirm=reset] legend').textContent()).toBe(
      `Restart the agent of ${SN} when idle?`,
    );
    await form.getByRole('button', { name: 'Yes, restart' }).click();
    await expect
      .poll(() => form.locator('.sent [data-command-status]').last().getAttribute('data-command-status'), {
        timeout: 20_000,
      })
      .toBe('succeeded');
    const back = form.locator('[data-back]');
    await back.waitFor({ timeout: 45_000 });
    expect(charger.restarts).toBe(1);
    const bootsAfter = await bootEvents();
    expect(bootsAfter.length).toBe(bootsBefore.length + 1);
    expect(await back.getAttribute('data-back')).toBe(bootsAfter.find((id) => !bootsBefore.includes(id)));
    // The events on the page are read again and show it; the charger is online.
    const events = page.getByRole('region', { name: 'Events' });
    await expect
      .poll(() => events.locator('tbody td:nth-child(2)', { hasText: /^boot$/ }).count())
      .toBe(bootsAfter.length);
    expect(await page.locator('[data-device-status]').textContent()).toBe('online');
    expect((await apiGet(`/v1/operator/devices/${charger.deviceId}`)).status).toBe('online');
    await screenshotOf(maintenance, 'device-restart');
  });

  it('takes connector 1 out of service (shown unavailable), unlocks its cable, and puts it back', async () => {
    const c1 = connector(1);
    expect(await c1.getAttribute('data-state')).toBe('idle');
    await c1.getByRole('button', { name: 'Take out of service' }).click();
    await expect.poll(() => c1.getAttribute('data-state'), { timeout: 20_000 }).toBe('unavailable');
    expect(await c1.locator('[data-availability-note]').textContent()).toBe('Out of service.');
    expect(await c1.locator('[data-out-of-service]').count()).toBe(1);
    expect(await c1.locator('h2 .badge').first().textContent()).toBe('unavailable');
    expect(await connectorView(1)).toMatchObject({ status: 'unavailable', available: false });
    // Its idle telemetry goes on arriving on the stream: it stays unavailable.
    await page.waitForTimeout(4_000);
    expect(await c1.getAttribute('data-state')).toBe('unavailable');

    await c1.getByRole('button', { name: 'Unlock cable' }).click();
    await expect.poll(() => c1.getByText('Cable lock released.').count(), { timeout: 20_000 }).toBe(1);
    expect(charger.hal.maintenance.unlocks.get(1)).toBe(1);
    await screenshotOf(page.locator('ul.connectors'), 'device-out-of-service');

    await c1.getByRole('button', { name: 'Put back in service' }).click();
    await expect.poll(() => c1.getAttribute('data-state'), { timeout: 20_000 }).toBe('idle');
    expect(await c1.locator('[data-availability-note]').textContent()).toBe('Back in service.');
    expect(await c1.locator('[data-out-of-service]').count()).toBe(0);
    expect(await connectorView(1)).toMatchObject({ status: 'idle', available: true });
  });

  it('takes a charging connector out of service once its session ends', async () => {
    charger.hal.plugIn(2, ev);
    const c2 = connector(2);
    await expect.poll(() => c2.getAttribute('data-state'), { timeout: 20_000 }).toBe('charging');
    await c2.getByRole('button', { name: 'Take out of service' }).click();
    await expect
      .poll(() => c2.locator('[data-availability-note]').textContent(), { timeout: 20_000 })
      .toBe('Out of service once the current session ends.');
    expect(await c2.getAttribute('data-state')).toBe('charging');
    expect(await c2.locator('[data-out-of-service]').count()).toBe(1);
    // The vehicle leaves: the stream's idle telemetry shows it unavailable.
    charger.hal.unplug(2);
    await expect.poll(() => c2.getAttribute('data-state'), { timeout: 20_000 }).toBe('unavailable');
    expect(await connectorView(2)).toMatchObject({ status: 'unavailable', available: false });
    await c2.getByRole('button', { name: 'Put back in service' }).click();
    await expect.poll(() => c2.getAttribute('data-state'), { timeout: 20_000 }).toBe('idle');
  });

  it('shows every key of the configuration table as reported, refuses a bad value before sending, and changes one', async () => {
    const config = page.getByRole('region', { name: 'Configuration' });
    const reported = await apiGet(`/v1/operator/devices/${charger.deviceId}/configuration`);
    // As the charger reported it when it came back from the restart (the page read it again then).
    await expect
      .poll(() => config.locator('[data-reported-at]').getAttribute('data-reported-at'))
      .toBe(reported.reported_at);
    for (const key of CONFIGURATION_KEY_NAMES) {
      const row = config.locator(`tr[data-key="${key}"]`);
      // A value outside the table (the test's agent logs at `silent`) is left out by the platform.
      expect(await row.getAttribute('data-value'), key).toBe(String(reported.values[key] ?? ''));
      if (reported.values[key] === undefined)
        expect(await row.locator('td').first().textContent()).toBe('not reported');
      const text = await row.textContent();
      expect(text).toContain(CONFIGURATION_KEYS[key].description);
      expect(text).toContain(String(CONFIGURATION_KEYS[key].default));
    }
    const reportedAt = reported.reported_at as string;
    const before = reported.values.telemetry_interval_seconds as number;
    expect(before).toBe(CONFIGURATION_KEYS.telemetry_interval_seconds.default);

    const patches: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'PATCH') patches.push(r.postData() ?? '');
    });
    await config.getByRole('button', { name: 'Edit' }).click();
    const interval = config.getByLabel('telemetry_interval_seconds', { exact: true });
    expect(await interval.getAttribute('min')).toBe('1');
    expect(await interval.getAttribute('max')).toBe('60');
    expect(await interval.inputValue()).toBe(String(before));
    // An edit starts from the reported value, or the default where there is none.
    expect(await config.getByLabel('log_level', { exact: true }).inputValue()).toBe(
      reported.values.log_level ?? CONFIGURATION_KEYS.log_level.default,
    );

    // Out of the table's bounds: refused beside the field, nothing sent.
    await interval.fill('0');
    await config.getByRole('button', { name: 'Send changes' }).click();
    const fieldError = config.locator('tr[data-key="telemetry_interval_seconds"]').getByRole('alert');
    expect(await fieldError.textContent()).toBe('must be a whole number from 1 to 60');
    expect(await interval.getAttribute('aria-invalid')).toBe('true');
    // Nothing changed at all: said so, nothing sent either.
    await interval.fill(String(before));
    await config.getByRole('button', { name: 'Send changes' }).click();
    expect(await config.getByRole('alert').textContent()).toBe('Nothing changed: no value differs.');
    expect(patches).toEqual([]);

    // The API's own refusal is shown by the field it names: a value altered on its way (as by an older page).
    await page.route('**/configuration', (route) =>
      route.request().method() === 'PATCH'
        ? route.continue({ postData: JSON.stringify({ values: { telemetry_interval_seconds: 999 } }) })
        : route.continue(),
    );
    await interval.fill('2');
    await config.getByRole('button', { name: 'Send changes' }).click();
    await expect
      .poll(() => fieldError.textContent())
      .toMatch(/values\.telemetry_interval_seconds.*\[1001\]$/);
    await page.unroute('**/configuration');

    // A good value: only the changed key goes; the charger applies it and reports it.
    await interval.fill('2');
    await config.getByRole('button', { name: 'Send changes' }).click();
    await expect
      .poll(() => config.locator('[data-configuration-applied]').count(), { timeout: 20_000 })
      .toBe(1);
    expect(JSON.parse(patches.at(-1)!)).toEqual({ values: { telemetry_interval_seconds: 2 } });
    await expect
      .poll(() => config.locator('tr[data-key="telemetry_interval_seconds"]').getAttribute('data-value'))
      .toBe('2');
    expect(await config.locator('[data-reported-at]').getAttribute('data-reported-at')).not.toBe(reportedAt);
    const after = await apiGet(`/v1/operator/devices/${charger.deviceId}/configuration`);
    expect(after.values.telemetry_interval_seconds).toBe(2);
    expect(await config.locator('[data-reported-at]').getAttribute('data-reported-at')).toBe(
      after.reported_at,
    );
    await screenshotOf(config, 'device-configuration');
  });

  it('fits a phone’s width, and the keyboard reaches the restart and the configuration’s edit', async () => {
    const phone = await openDashboard(browser, serve.url, { width: 390, height: 844 });
    try {
      const p = phone.page;
      await signIn(p, serve.clientId!, serve.clientSecret!);
      await p.locator('[data-link]').waitFor();
      await p.evaluate(`location.hash = '#/devices/${charger.deviceId}'`);
      await p.getByRole('region', { name: 'Configuration' }).locator('tr[data-key]').first().waitFor();
      await p.getByRole('button', { name: 'Restart…' }).click();
      // Nothing wider than the screen but the tables' own scrolling frames.
      expect(await p.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
      const reached = new Set<string>();
      for (let i = 0; i < 80 && reached.size < 3; i++) {
        await p.keyboard.press('Tab');
        const text = String(await p.evaluate('document.activeElement?.textContent ?? ""'));
        if (['Take out of service', 'Restart', 'Edit'].includes(text)) reached.add(text);
      }
      expect([...reached].sort()).toEqual(['Edit', 'Restart', 'Take out of service']);
    } finally {
      await phone.close();
    }
  });

  it('gives a read-only client the table and the diagnostics, without an action', async () => {
    const sites = await apiGet('/v1/operator/sites');
    const operatorId = sites.items[0].operator_id as string;
    const client = await runCliJson([
      'clients',
      'create',
      '--data-dir',
      dataDir,
      '--operator',
      operatorId,
      '--scopes',
      'read',
      '--json',
    ]);
    const ro = await openDashboard(browser, serve.url);
    try {
      await signIn(ro.page, client.client_id, client.client_secret);
      await ro.page.locator('[data-link]').waitFor();
      await ro.page.evaluate(`location.hash = '#/devices/${charger.deviceId}'`);
      const config = ro.page.getByRole('region', { name: 'Configuration' });
      await expect
        .poll(() => config.locator('tr[data-key="telemetry_interval_seconds"]').getAttribute('data-value'))
        .toBe('2');
      for (const name of [
        'Edit',
        'Restart…',
        'Take out of service',
        'Unlock cable',
        'Collect diagnostics',
        'Send changes',
      ]) {
        expect(await ro.page.getByRole('button', { name }).count(), name).toBe(0);
      }
      expect(await ro.page.getByRole('region', { name: 'Maintenance' }).count()).toBe(0);
      // The charger's diagnostics are listed (none yet), read with the read scope.
      await ro.page
        .getByRole('region', { name: 'Diagnostics' })
        .getByText('No diagnostics collected from this charger yet.')
        .waitFor({ timeout: 10_000 });
      expect(ro.problems).toEqual([]);
    } finally {
      await ro.close();
    }
  });

  it('collects diagnostics, follows them to available, and downloads the archive', async () => {
    const panel = page.getByRole('region', { name: 'Diagnostics' });
    const form = panel.getByRole('form', { name: 'Collect diagnostics' });
    expect(await form.getByLabel('Logs of').inputValue()).toBe('24h');
    await form.getByLabel('Logs of').selectOption('1h');
    await form.getByRole('button', { name: 'Collect diagnostics' }).click();
    const requested = panel.locator('.sent[data-diagnostics-id]');
    await expect.poll(() => requested.getAttribute('data-status'), { timeout: 60_000 }).toBe('available');
    const id = (await requested.getAttribute('data-diagnostics-id'))!;
    const view = await apiGet(`/v1/operator/diagnostics/${id}`);
    expect(view).toMatchObject({ diagnostics_id: id, device_id: charger.deviceId, status: 'available' });
    expect(Date.parse(view.end_time) - Date.parse(view.start_time)).toBe(3_600_000);

    const download = page.waitForEvent('download');
    await requested.getByRole('button', { name: `Download ${id}.tar.gz` }).click();
    const file = await download;
    expect(file.suggestedFilename()).toBe(`${id}.tar.gz`);
    const bytes = readFileSync((await file.path())!);
    expect(bytes.length).toBe(view.size);
    expect([...bytes.subarray(0, 2)]).toEqual([0x1f, 0x8b]);

    // Listed with the charger's archives, newest first, with its own download.
    const row = panel.locator(`table.diagnostics tr[data-diagnostics-id="${id}"]`);
    await expect.poll(() => row.getAttribute('data-status')).toBe('available');
    expect(
      await panel.locator('table.diagnostics tbody tr').first().getAttribute('data-diagnostics-id'),
    ).toBe(id);
    expect(await row.getByRole('button', { name: `Download ${id}.tar.gz` }).count()).toBe(1);
    await screenshotOf(panel, 'device-diagnostics');
    // The only errors the page met are the API's 400 (the altered configuration), as Chromium logs any refusal.
    expect(w.problems.filter((p) => !p.includes('status of 400'))).toEqual([]);
    expect([...w.origins]).toEqual([serve.url]);
  }, 120_000);
});
