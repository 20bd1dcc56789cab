import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WEBHOOK_EVENT_TYPES } from '../../shared/index.js';
import { launchChromium, watchedPage } from '../helpers/browser.js';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * `/docs` in real Chromium: Swagger UI loads from the platform alone under its strict CSP, "Authorize" obtains a
 * token with a client's credentials, and "Try it out" sends a request and shows the answer.
 */
let tp: TestPlatform;
let browser: Browser;
let tenant: Awaited<ReturnType<typeof createTenant>>;

beforeAll(async () => {
  tp = await startTestPlatform();
  tenant = await createTenant(tp, 'Docs Operator');
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await tp?.stop();
});

describe('the interactive API reference', () => {
  it('obtains a token and sends a request from the page, with nothing but the platform', async () => {
    const w = await watchedPage(browser);
    const { page } = w;
    await page.goto(`${tp.url}/docs`);
    await page.waitForSelector('.opblock');
    // Every route, the eight served outside the route table (stream, probes, docs, dashboard, document), and the
    // webhook events.
    expect(await page.locator('.opblock').count()).toBe(
      tp.platform.routes.length + 8 + WEBHOOK_EVENT_TYPES.length,
    );

    await page.click('button.authorize');
    await page.fill('#client_id_clientCredentials', tenant.clientId);
    await page.fill('#client_secret_clientCredentials', tenant.clientSecret);
    await page.click('label[for="read-clientCredentials-checkbox-operatorOAuth"]');
    await page.click('.auth-btn-wrapper button.authorize');
    // Authorized: the modal offers to log out.
    await page.waitForSelector('.auth-btn-wrapper button:has-text("Logout")');
    await page.click('.auth-btn-wrapper button.btn-done');

    const op = page.locator('#operations-operator-getV1OperatorSites');
    await op.locator('.opblock-summary').click();
    await op.locator('button.try-out__btn').click();
    await op.locator('button.execute').click();
    const status = op.locator('.live-responses-table .response .response-col_status').first();
    await expect.poll(() => status.textContent()).toContain('200');
    expect(await op.locator('.live-responses-table .microlight').first().textContent()).toContain(
      tenant.siteId,
    );

    expect(w.problems).toEqual([]);
    expect([...w.origins]).toEqual([tp.url]);
    await w.close();
  });
});
