/**
 * How walsim starts one of its own TypeScript entry points (server/main.ts, scripts/*.ts) as a
 * child process: `node --import tsx FILE.ts`, the way `npm run` does.
 *
 * The test suite starts several hundred such processes, and tsx's loader transpiles and resolves
 * every module again in each of them (about 1 s of CPU per start on this 2-core machine, against
 * about 0.3 s for the same code already transpiled). So before the suite runs,
 * test/global-setup.ts builds every entry point once into an ESM bundle (esbuild, the transpiler
 * tsx itself uses) and names its directory in WALSIM_ENTRY_BUNDLE; children then run the bundle.
 * Same sources, built fresh on every run, so a bundle is never stale; paths taken from
 * `import.meta` are rewritten to the source file's own at build time, so files found next to the
 * source (cost profiles) are found the same way. Outside the suite nothing sets the variable.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (every entry point's path is relative to it). */
export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The environment variable naming the directory of prebuilt entry-point bundles. */
export const ENTRY_BUNDLE_ENV = 'WALSIM_ENTRY_BUNDLE';

/** The bundle's file for an entry point (`scripts/cluster.ts` → `<dir>/scripts/cluster.mjs`). */
export function bundledEntry(dir: string, entry: string): string {
  return path.join(dir, entry.replace(/\.ts$/, '.mjs'));
}

/**
 * Node arguments that run `entry` (a path relative to the repository root, or absolute inside
 * it): the prebuilt bundle when WALSIM_ENTRY_BUNDLE names one that holds it, else tsx.
 */
export function entryArgs(entry: string): string[] {
  const rel = path.isAbsolute(entry) ? path.relative(PROJECT_ROOT, entry) : entry;
  const dir = process.env[ENTRY_BUNDLE_ENV];
  if (dir) {
    const bundled = bundledEntry(dir, rel);
    if (fs.existsSync(bundled)) return [bundled];
  }
  return ['--import', 'tsx', path.join(PROJECT_ROOT, rel)];
}
