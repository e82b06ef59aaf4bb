/**
 * The dashboard in tests: `startTestDashboard` (the server on a free loopback port over a real
 * cluster's source, the defaults `npm run dashboard` uses) and `DashboardPage`, the page in
 * chromium read through its DOM (`data-node`, `data-field`, the confirmation dialog).
 */
import type { Page } from 'playwright-core';
import { expect } from 'vitest';
import { startDashboard, type Dashboard } from '../../dashboard/server.ts';
import type { ClusterSource } from '../../dashboard/collector.ts';
import type { PredictionSource } from '../../dashboard/predictions.ts';
import { defaultCostProfile } from '../../cost-model/profile.ts';
import { parseLsn, type Lsn } from '../../wal/lsn.ts';

export function startTestDashboard(
  source: ClusterSource,
  opts: {
    pollMs?: number;
    resultsDir?: string;
    listen?: string;
    password?: string | null;
    predictions?: PredictionSource;
  } = {},
): Promise<Dashboard> {
  return startDashboard({
    source,
    port: 0,
    listen: opts.listen ?? '127.0.0.1',
    password: opts.password ?? null,
    pollMs: opts.pollMs ?? 250,
    profile: defaultCostProfile(),
    profileName: defaultCostProfile().name,
    resultsDir: opts.resultsDir ?? source.dir,
    predictions: opts.predictions ?? null,
  });
}

export class DashboardPage {
  constructor(readonly page: Page) {}

  node(name: string) {
    return this.page.locator(`[data-node="${name}"]`);
  }

  field(name: string, f: string): Promise<string> {
    return this.node(name).locator(`[data-field="${f}"]`).first().innerText();
  }

  async lsn(name: string, f: string): Promise<Lsn> {
    return parseLsn((await this.field(name, f)).trim());
  }

  /** The card's data-state: running, stopped or unreachable. */
  state(name: string): Promise<string | null> {
    return this.node(name).getAttribute('data-state');
  }

  /** Click a node's button and answer its confirmation dialog (OK, or Cancel). */
  async press(name: string, action: string, answer: 'ok' | 'cancel' = 'ok'): Promise<void> {
    await this.node(name).locator(`button[data-action="${action}"]`).click();
    await expect.poll(() => this.page.locator('#confirm').getAttribute('open')).not.toBeNull();
    await this.page.locator(`[data-testid="confirm-${answer}"]`).click();
  }

  /** Press a button, confirm, and return the dashboard's answer to the action request. */
  async pressAndAnswer(name: string, action: string): Promise<Record<string, unknown>> {
    const answer = this.page.waitForResponse((r) => r.url().endsWith('/api/action'), {
      timeout: 120_000,
    });
    await this.press(name, action);
    return (await (await answer).json()) as Record<string, unknown>;
  }
}
