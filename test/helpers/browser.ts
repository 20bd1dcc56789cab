import { type Browser, chromium, type Page } from 'playwright-core';

/** Debian's Chromium (`apt-get install chromium`), driven through playwright-core (DESIGN.md §16). */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** The flags of DESIGN.md §16; playwright gives each launch a fresh user-data-dir and runs it headless. */
const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
}

/**
 * A page that trusts the platform's self-signed certificate and records what would show a broken page: console
 * errors (a CSP violation is one), uncaught errors, and every origin it sent a request to.
 */
export async function watchedPage(browser: Browser) {
  const context = await browser.newContext({
    ignoreHTTPSErrors: true,
    viewport: { width: 1280, height: 900 },
  });
  const page: Page = await context.newPage();
  const problems: string[] = [];
  const origins = new Set<string>();
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page: ${e.message}`));
  page.on('request', (r) => {
    const url = new URL(r.url());
    if (url.protocol !== 'data:') origins.add(url.origin);
  });
  return { page, problems, origins, close: () => context.close() };
}
