/**
 * The page's script as the dashboard serves it (dashboard/page-bundle.ts): one ES module bundled
 * from dashboard/page/ in memory, the same bytes on every build, naming no path of this machine,
 * with every module of the page in it and nothing of the server.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { bundlePage } from '../../dashboard/page-bundle.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

describe('dashboard page bundle', () => {
  it('is deterministic, self-contained and made of the page modules only', async () => {
    const [a, b] = [await bundlePage(), await bundlePage()];
    expect(a).toBe(b);
    expect(a).not.toContain(ROOT);
    expect(a).not.toMatch(/^\s*(import|export)\s/m);
    const modules = [...a.matchAll(/^\/\/ (\S+\.ts)$/gm)].map((m) => m[1]).sort();
    const pageFiles = fs
      .readdirSync(path.join(ROOT, 'dashboard/page'))
      .filter((f) => f.endsWith('.ts'))
      .map((f) => `dashboard/page/${f}`)
      // Type-only modules leave nothing in the bundle.
      .filter((f) =>
        /^export (const|function|async function)/m.test(
          fs.readFileSync(path.join(ROOT, f), 'utf8'),
        ),
      )
      .sort();
    expect(modules).toEqual([...pageFiles, 'dashboard/page/main.ts'].sort());
  });
});
