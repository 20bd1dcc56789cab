import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../helpers/browser.js';
import { type ServeProcess, spawnServe, tempDirs } from '../helpers/cli.js';
import { openDashboard, SCREENSHOT_DIR, signIn } from '../helpers/dashboard.js';
import { type HttpClient, httpClient } from '../helpers/platform.js';

/**
 * The charger page's telemetry chart (DESIGN.md §21) in real Chromium against a real sandbox `serve`: a charger
 * registered by the test uploads an hour of samples and an older half hour through the batch endpoint (as an
 * agent's outbox would), then reports live. The chart shows every sample of the last hour (more than one page of
 * the API), one line per connector of the chosen measurement, the live samples appended at "now" and not while
 * scrolled back, the previous window's samples after "earlier", an empty window, and averages for longer windows.
 */
const dirs = tempDirs('cp-telemetry-chart-');
let serve: ServeProcess;
let browser: Browser;
let http: HttpClient;
let page: Page;
let w: Awaited<ReturnType<typeof openDashboard>>;
let deviceId: string;
let deviceToken: string;

interface Sample {
  timestamp: string;
  connector_id: number;
  state: 'charging';
  power: number;
  voltage: number;
  soc?: number;
  temperature?: number;
}
/** Every sample the charger sent, for the counts the chart must show. */
const sent: Sample[] = [];
const MIN = 60_000;
/** The last 50 minutes, both connectors every 2 s: 3,000 samples, two pages of the API. */
const RECENT_EACH = 1500;
/** 70 to 100 minutes ago, connector 1 every 10 s: the window before the last hour's. */
const OLDER = 180;

function sample(atMs: number, connector: number, i: number): Sample {
  const s: Sample = {
    timestamp: new Date(atMs).toISOString(),
    connector_id: connector,
    state: 'charging',
    power: connector === 1 ? 7 + (i % 10) / 10 : 11 + (i % 7) / 10,
    voltage: 229 + (i % 5),
  };
  // SOC from connector 1's vehicle only, temperature from connector 2's sensor only: one line each.
  if (connector === 1) s.soc = 20 + Math.floor(i / 100);
  else s.temperature = 30 + (i % 4) / 4;
  return s;
}

async function upload(records: Sample[]) {
  for (let i = 0; i < records.length; i += 500) {
    const r = await http.post('/v1/device/telemetry/batch', {
      token: deviceToken,
      json: { records: records.slice(i, i + 500) },
    });
    if (r.status !== 200) throw new Error(`batch: ${r.status} ${r.text}`);
    sent.push(...records.slice(i, i + 500));
    // Well inside the charger's 10 requests a second.
    await new Promise((resolve) => setTimeout(resolve, 150));
  }
}

/** `n` live samples of connector 1, as the agent sends them while charging (faster: every 300 ms). */
async function reportLive(n: number) {
  for (let i = 0; i < n; i++) {
    const s = sample(Date.now(), 1, i);
    const r = await http.post('/v1/device/telemetry', { token: deviceToken, json: s });
    if (r.status !== 200) throw new Error(`telemetry: ${r.status} ${r.text}`);
    sent.push(s);
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
}

/** Distinct (bucket, connector) of the samples sent: the points of an averaged window holding them all. */
function buckets(bucketMs: number): number {
  return new Set(sent.map((s) => `${Math.floor(Date.parse(s.timestamp) / bucketMs)}|${s.connector_id}`)).size;
}

beforeAll(async () => {
  const dataDir = await dirs.make();
  serve = await spawnServe(['--env', 'sandbox', '--data-dir', dataDir], { timeoutMs: 60_000 });
  http = httpClient(serve.url, readFileSync(serve.certPath, 'utf8'));
  // Registered through the sandbox, which puts it in the sandbox operator's site.
  const reg = await http.post('/v1/device/register', {
    json: {
      sn: `CHART-${process.pid}`,
      model: 'Chart DC',
      manufacturer: 'Test',
      firmware_version: '1.0.0',
      connectors: [
        { connector_id: 1, max_power_kw: 22, v2g_capable: false },
        { connector_id: 2, max_power_kw: 22, v2g_capable: false },
      ],
    },
  });
  if (reg.status !== 200) throw new Error(`register: ${reg.status} ${reg.text}`);
  deviceId = reg.body.data.device_id;
  const tok = await http.post('/v1/device/token', {
    json: {
      device_id: deviceId,
      device_secret: reg.body.data.device_secret,
      grant_type: 'client_credentials',
    },
  });
  deviceToken = tok.body.data.access_token;
  const now = Date.now();
  const recent: Sample[] = [];
  for (let i = 0; i < RECENT_EACH; i++) {
    const at = now - 50 * MIN + i * 2000;
    recent.push(sample(at, 1, i), sample(at, 2, i));
  }
  const older = Array.from({ length: OLDER }, (_, i) => sample(now - 100 * MIN + i * 10_000, 1, i));
  // The outbox after an outage: the newest hour first, then the older samples.
  await upload(recent);
  await upload(older);
  browser = await launchChromium();
}, 120_000);

afterAll(async () => {
  await w?.close();
  await browser?.close();
  await http?.close();
  await serve?.stop();
  await dirs.removeAll();
});

/** The chart's panel alone, where the other dashboard screenshots go. */
async function screenshot(name: string): Promise<void> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const panel = page.getByRole('region', { name: 'Telemetry' });
  await panel.screenshot({ path: join(SCREENSHOT_DIR, `dashboard-${name}.png`) });
}

const chart = () => page.locator('[data-telemetry-chart]');
const attr = (name: string) => chart().getAttribute(`data-${name}`);
const num = async (name: string) => Number(await attr(name));
/** The chart once its window is read. */
async function settled(): Promise<Locator> {
  await expect.poll(() => attr('loading'), { timeout: 15_000 }).toBe('false');
  return chart();
}

describe('the charger page’s telemetry chart', () => {
  it('shows every sample of the last hour, one line per connector, read over more than one page', async () => {
    w = await openDashboard(browser, serve.url);
    page = w.page;
    await signIn(page, serve.clientId!, serve.clientSecret!);
    await page.locator('[data-link="live"]').waitFor({ timeout: 15_000 });
    await page.evaluate(`location.hash = '#/devices/${deviceId}'`);
    await settled();
    expect(await attr('live')).toBe('true');
    expect(await attr('resolution')).toBe('raw');
    expect(await attr('measurement')).toBe('power');
    expect(await attr('series')).toBe('1,2');
    expect(await num('samples')).toBe(2 * RECENT_EACH);
    expect(await num('points')).toBe(2 * RECENT_EACH);
    // One canvas line per connector in uPlot's legend, in kW.
    expect(await chart().locator('.u-legend .u-series').allTextContents()).toEqual(
      expect.arrayContaining([
        expect.stringContaining('Connector 1, kW'),
        expect.stringContaining('Connector 2, kW'),
      ]),
    );
    await screenshot('device-telemetry');
  });

  it('appends the stream’s samples at now, so the last hour moves', async () => {
    await reportLive(3);
    await expect.poll(() => num('live-samples'), { timeout: 15_000 }).toBe(3);
    expect(await num('points')).toBe(2 * RECENT_EACH + 3);
  });

  it('shows the chosen measurement, one line for each connector that sent it', async () => {
    const cases = [
      ['soc', '1', RECENT_EACH + 3],
      ['temperature', '2', RECENT_EACH],
      ['voltage', '1,2', 2 * RECENT_EACH + 3],
      ['power', '1,2', 2 * RECENT_EACH + 3],
    ] as const;
    for (const [measurement, series, points] of cases) {
      await page.getByLabel('Measurement').selectOption(measurement);
      await expect.poll(() => attr('measurement')).toBe(measurement);
      expect(await attr('series')).toBe(series);
      expect(await num('points')).toBe(points);
    }
  });

  it('scrolls back a window at a time, without the live samples, and returns to now', async () => {
    const clickedAt = Date.now();
    await page.getByRole('button', { name: '◀ earlier' }).click();
    await expect.poll(() => attr('live')).toBe('false');
    await settled();
    const end = Date.parse((await attr('window-end'))!);
    expect(Math.abs(end - (clickedAt - 60 * MIN))).toBeLessThan(MIN);
    expect(await attr('resolution')).toBe('raw');
    expect(await attr('series')).toBe('1');
    expect(await num('points')).toBe(OLDER);
    await screenshot('device-telemetry-earlier');

    // Still listening while scrolled back, but the window shown stays as read.
    await reportLive(2);
    await expect.poll(() => num('live-samples'), { timeout: 15_000 }).toBe(5);
    expect(await num('points')).toBe(OLDER);

    // The hour before holds nothing: an empty window says so.
    await page.getByRole('button', { name: '◀ earlier' }).click();
    await settled();
    expect(await num('points')).toBe(0);
    expect(await chart().locator('[data-empty]').textContent()).toContain('No telemetry');

    await page.getByRole('button', { name: 'later ▶' }).click();
    await settled();
    expect(await num('points')).toBe(OLDER);

    // Now: the last hour with every live sample, those that came while scrolled back too, without a new read.
    await page.getByRole('button', { name: 'now', exact: true }).click();
    await expect.poll(() => attr('live')).toBe('true');
    expect(await num('points')).toBe(2 * RECENT_EACH + 5);
    expect(await page.getByRole('button', { name: 'later ▶' }).isDisabled()).toBe(true);
  });

  it('reads averages for the longer windows', async () => {
    for (const [length, resolution, bucketMs] of [
      ['6h', '1m', MIN],
      ['7d', '15m', 15 * MIN],
    ] as const) {
      await page.getByLabel('Window').selectOption(length);
      await expect.poll(() => attr('window')).toBe(length);
      await settled();
      expect(await attr('resolution')).toBe(resolution);
      expect(await num('points')).toBe(buckets(bucketMs));
    }
    await page.getByLabel('Window').selectOption('1h');
    await settled();
    // Read again: the uploaded hour and the five live samples, now from the platform.
    expect(await num('points')).toBe(2 * RECENT_EACH + 5);
    expect(w.problems).toEqual([]);
  });
});
