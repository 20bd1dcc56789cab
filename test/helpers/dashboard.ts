import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { watchedPage } from './browser.js';
import { REPO_ROOT, runCli, type ServeProcess } from './cli.js';
import { httpClient } from './platform.js';

/**
 * Driving the operator dashboard (`/dashboard`, DESIGN.md §16) in real Chromium against a real `serve`, and a
 * charger of another tenant that reports all along, which the dashboard must never show.
 */

/** Where the tests leave their screenshots: `.tmp/dashboard-screenshots/`, or `docs/images/` for the docs. */
export const SCREENSHOT_DIR =
  process.env.DASHBOARD_SCREENSHOTS ?? join(REPO_ROOT, '.tmp', 'dashboard-screenshots');

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOT_DIR, `dashboard-${name}.png`), fullPage: true });
}

export async function openDashboard(browser: Browser, url: string, viewport = { width: 1280, height: 900 }) {
  const w = await watchedPage(browser);
  await w.page.setViewportSize(viewport);
  await w.page.goto(`${url}/dashboard`);
  return w;
}

export async function signIn(page: Page, clientId: string, clientSecret: string): Promise<void> {
  await page.getByLabel('Client ID').fill(clientId);
  await page.getByLabel('Client secret').fill(clientSecret);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/**
 * A charger registered through the sandbox (which puts it in the sandbox operator's site), then moved by the
 * admin CLI to the other tenant's site, reporting telemetry every second until `stop()`.
 */
export async function otherTenantCharger(
  serve: ServeProcess,
  dataDir: string,
  otherSiteId: string,
  ca: string,
) {
  const http = httpClient(serve.url, ca);
  const reg = await http.post('/v1/device/register', {
    json: {
      sn: 'OTHER-TENANT-LIVE',
      model: 'Other AC',
      manufacturer: 'Other',
      firmware_version: '1.0.0',
      connectors: [{ connector_id: 1, max_power_kw: 22, v2g_capable: false }],
    },
  });
  if (reg.status !== 200) throw new Error(`register: ${reg.status} ${reg.text}`);
  const { device_id, device_secret } = reg.body.data as { device_id: string; device_secret: string };
  const moved = await runCli([
    'devices',
    'assign',
    '--data-dir',
    dataDir,
    '--device',
    device_id,
    '--site',
    otherSiteId,
  ]);
  if (moved.code !== 0) throw new Error(`assign: ${moved.stderr}`);
  const tok = await http.post('/v1/device/token', {
    json: { device_id, device_secret, grant_type: 'client_credentials' },
  });
  const token = tok.body.data.access_token as string;
  let posted = 0;
  const timer = setInterval(() => {
    void http
      .post('/v1/device/telemetry', {
        token,
        json: {
          timestamp: new Date().toISOString(),
          connector_id: 1,
          state: 'charging',
          power: 7.7,
          soc: 50,
        },
      })
      .then((r) => {
        if (r.status === 200) posted++;
      });
  }, 1000);
  return {
    deviceId: device_id,
    posted: () => posted,
    stop: async () => {
      clearInterval(timer);
      await http.close();
    },
  };
}
