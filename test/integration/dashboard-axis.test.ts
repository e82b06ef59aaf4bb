/**
 * The LSN charts' y-axis labels fit inside the node's card whatever the LSNs' width: the page in
 * chromium over a source whose nodes are 650 GB into their WAL ('A3/…' LSNs, 11 characters, as a
 * long-lived cluster has), each label's drawn pixels measured on the chart's canvas against the
 * canvas's and the card's boxes. Seen failing with the axis's fixed 80 px: the labels ran past the
 * canvas's left edge (painted in its first column), cut off there. The source is in memory: what
 * is tested is how the page draws LSNs, not how they are sampled (the other dashboard tests do
 * that on real clusters).
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterSource, NodeSample } from '../../dashboard/collector.ts';
import type { Dashboard } from '../../dashboard/server.ts';
import { chromiumSkipReason, launchChromium } from '../helpers/browser.ts';
import { startTestDashboard } from '../helpers/dashboard.ts';

const BASE = 0xa3n * 2n ** 32n + 0xff12ab40n;

/** A primary and a standby streaming from it, their LSNs growing by 64 kB a sample. */
class WideLsnSource implements ClusterSource {
  readonly engine = 'walsim' as const;
  readonly dir = 'in-memory';
  private n = 0n;
  nodeNames(): string[] {
    return ['primary', 'standby'];
  }
  async sample(name: string): Promise<NodeSample> {
    this.n += 1n;
    const lsn = (d: bigint) => {
      const v = BASE + this.n * 65536n - d;
      return `${(v >> 32n).toString(16).toUpperCase()}/${(v & 0xffffffffn).toString(16).toUpperCase()}`;
    };
    const common = { state: 'running' as const, error: null, pid: 1000, timeline: 1 };
    if (name === 'primary')
      return {
        ...common,
        role: 'primary',
        lsn: { current: lsn(0n), flush: lsn(0n), received: null, flushed: null, replayed: null },
        upstreamFlush: lsn(0n),
      };
    return {
      ...common,
      pid: 1001,
      role: 'standby',
      upstream: 'primary',
      lsn: {
        current: null,
        flush: null,
        received: lsn(0n),
        flushed: lsn(0n),
        replayed: lsn(1_000_000n),
      },
      upstreamFlush: lsn(0n),
    };
  }
  close(): void {}
}

/** Per card: the chart canvas's box, the card's content box, the y-axis labels' painted columns. */
async function measure(page: Page, name: string) {
  return page.evaluate((node) => {
    const card = document.querySelector(`[data-node="${node}"]`)!;
    const canvas = card.querySelector<HTMLCanvasElement>('.chart canvas')!;
    const c = canvas.getBoundingClientRect();
    const k = card.getBoundingClientRect();
    const style = getComputedStyle(card);
    const contentLeft = k.left + parseFloat(style.borderLeftWidth) + parseFloat(style.paddingLeft);
    // The y axis is the canvas's left part: its labels are the only ink there.
    const scale = canvas.width / c.width;
    const w = Math.floor(canvas.width / 3);
    const img = canvas.getContext('2d')!.getImageData(0, 0, w, canvas.height).data;
    let first = -1;
    for (let x = 0; x < w && first < 0; x++)
      for (let y = 0; y < canvas.height; y++)
        if (img[(y * w + x) * 4 + 3]! > 0) {
          first = x;
          break;
        }
    return {
      firstInkColumn: first,
      inkLeft: c.left + first / scale,
      contentLeft,
      canvasRight: c.right,
      cardRight: k.right,
    };
  }, name);
}

const reason = chromiumSkipReason();

describe.skipIf(reason !== null)(
  `dashboard LSN axis${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    let dash: Dashboard;
    let browser: Browser;
    let page: Page;

    beforeAll(async () => {
      dash = await startTestDashboard(new WideLsnSource());
      browser = await launchChromium();
      page = await browser.newPage();
      await page.goto(dash.url);
    });

    afterAll(async () => {
      await browser?.close();
      await dash?.close();
    });

    it("draws 11-character LSN labels whole, inside the chart and the card's edge", async () => {
      for (const name of ['primary', 'standby']) {
        // A few samples, so that the axis has its ticks.
        await expect
          .poll(() => page.locator(`[data-node="${name}"] [data-field="pid"]`).count())
          .toBe(1);
        await expect
          .poll(async () => (await measure(page, name)).firstInkColumn)
          .toBeGreaterThan(0);
        await page.waitForTimeout(1000);
        const m = await measure(page, name);
        // Ink in the canvas's first column: a label cut off at its edge.
        expect(m.firstInkColumn, `${name}: a label runs off the canvas`).toBeGreaterThan(1);
        expect(m.inkLeft).toBeGreaterThanOrEqual(m.contentLeft);
        expect(m.canvasRight).toBeLessThanOrEqual(m.cardRight);
      }
    });
  },
);
