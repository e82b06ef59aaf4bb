/**
 * Before the suite: build every process entry point (server/main.ts, scripts/*.ts) once into an
 * ESM bundle, so the hundreds of child processes the integration tests start run already
 * transpiled code instead of each paying tsx's loader (server/entry.ts says why and how children
 * pick it up). Built from the working tree on every run, so it can never be stale.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';
import { PROJECT_ROOT } from '../server/entry.ts';
import { ENTRY_BUNDLE_DIR } from './entry-bundle-dir.ts';

/** `import.meta.url` / `.dirname` / `.filename` become the source file's own, not the bundle's. */
const sourceMetaPaths: Plugin = {
  name: 'source-import-meta',
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, (args) => {
      const text = fs
        .readFileSync(args.path, 'utf8')
        .replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href))
        .replaceAll('import.meta.dirname', JSON.stringify(path.dirname(args.path)))
        .replaceAll('import.meta.filename', JSON.stringify(args.path));
      return { contents: text, loader: 'ts' };
    });
  },
};

/** Each project of a run calls the global setup; the first builds, the others find it built. */
const BUILT_BY = '.built-by-run';

export default async function setup(): Promise<void> {
  const marker = path.join(ENTRY_BUNDLE_DIR, BUILT_BY);
  if (fs.existsSync(marker) && fs.readFileSync(marker, 'utf8') === String(process.pid)) return;
  const scripts = fs
    .readdirSync(path.join(PROJECT_ROOT, 'scripts'))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join(PROJECT_ROOT, 'scripts', f));
  fs.rmSync(ENTRY_BUNDLE_DIR, { recursive: true, force: true });
  await build({
    entryPoints: [path.join(PROJECT_ROOT, 'server', 'main.ts'), ...scripts],
    outdir: ENTRY_BUNDLE_DIR,
    outbase: PROJECT_ROOT,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    sourcemap: 'inline',
    plugins: [sourceMetaPaths],
    logLevel: 'warning',
  });
  fs.writeFileSync(marker, String(process.pid));
}
