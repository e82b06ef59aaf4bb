/**
 * Headless Chromium for the dashboard's browser tests: Debian's `chromium` (the system
 * executable, no browser download) driven by playwright-core. `chromiumSkipReason()` says why the
 * tests must skip (null when the browser is there).
 */
import * as fs from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

export function chromiumSkipReason(): string | null {
  return fs.existsSync(CHROMIUM)
    ? null
    : `${CHROMIUM} is absent (apt-get install -y chromium; .ci/run installs it as root)`;
}

/** Launch headless Chromium with the flags a root, GPU-less, offline machine needs. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-dev-shm-usage',
      '--disable-background-networking',
      '--disable-extensions',
      '--disable-sync',
      '--no-first-run',
      '--mute-audio',
    ],
  });
}
