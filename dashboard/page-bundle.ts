/**
 * The page's script: dashboard/page/*.ts bundled by esbuild into one ES module, in memory, when
 * the dashboard starts (served as /app.js). Nothing is written to disk, so a fresh clone's
 * `npm run dashboard` needs no build step and the page is never stale; the same sources give the
 * same bytes (no minification, no timestamps; file comments relative to the project root).
 *
 * Entry points: `bundlePage`, `PAGE_ENTRY`.
 */
import * as path from 'node:path';
import { build } from 'esbuild';

export const PAGE_ENTRY = path.join(import.meta.dirname, 'page', 'main.ts');

/** The bundled page script (ES2022, for the chromium and current browsers the page targets). */
export async function bundlePage(): Promise<string> {
  const out = await build({
    entryPoints: [PAGE_ENTRY],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    charset: 'utf8',
    legalComments: 'none',
    sourcemap: false,
    logLevel: 'silent',
    // The output's file comments name paths relative to this: the project root, whatever the cwd.
    absWorkingDir: path.resolve(import.meta.dirname, '..'),
  });
  const js = out.outputFiles[0];
  if (js === undefined) throw new Error('bundling the dashboard page produced no output');
  return js.text;
}
