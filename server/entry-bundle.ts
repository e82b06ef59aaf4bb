/**
 * Build walsim's process entry points (server/main.ts, scripts/*.ts) once into an ESM bundle, so
 * the child processes a run starts execute already transpiled code instead of each paying tsx's
 * loader (about 1.5 s per start on a 2-core machine against about 0.4 s; server/entry.ts says how
 * children pick it up). Used by the test suite (test/global-setup.ts, once per run) and by the
 * sweeps (`npm start` starts two servers per cell), each into its own directory, built from the
 * working tree every time, so a bundle is never stale.
 *
 * Entry points: `buildEntryBundle`, `withEntryBundle`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';
import { ENTRY_BUNDLE_ENV, PROJECT_ROOT } from './entry.ts';

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

/**
 * (Re)build every entry point into `dir` (replaced whole). `dir` must lie inside the project
 * (e.g. under node_modules/.cache): the bundles leave packages external, and Node finds them by
 * walking up from the bundle to the project's node_modules.
 */
export async function buildEntryBundle(dir: string): Promise<void> {
  const scripts = fs
    .readdirSync(path.join(PROJECT_ROOT, 'scripts'))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join(PROJECT_ROOT, 'scripts', f));
  fs.rmSync(dir, { recursive: true, force: true });
  await build({
    entryPoints: [
      path.join(PROJECT_ROOT, 'server', 'main.ts'),
      ...scripts,
      // The exporter's cycle thread (a worker's module: scripts/exporter/cycle-host.ts).
      path.join(PROJECT_ROOT, 'scripts', 'exporter', 'cycle-worker.ts'),
    ],
    outdir: dir,
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
}

/**
 * Run `fn` with the child processes it starts running a bundle built for this process alone
 * (under node_modules/.cache, removed afterwards). When the environment already names a bundle
 * (inside the test suite), that one is used as it is.
 */
export async function withEntryBundle<T>(fn: () => Promise<T>): Promise<T> {
  if (process.env[ENTRY_BUNDLE_ENV]) return fn();
  const dir = path.join(PROJECT_ROOT, 'node_modules', '.cache', `walsim-entry-${process.pid}`);
  const remove = () => fs.rmSync(dir, { recursive: true, force: true });
  process.once('exit', remove); // also after a Ctrl-C's process.exit
  await buildEntryBundle(dir);
  process.env[ENTRY_BUNDLE_ENV] = dir;
  try {
    return await fn();
  } finally {
    delete process.env[ENTRY_BUNDLE_ENV];
    process.removeListener('exit', remove);
    remove();
  }
}
