/**
 * Before the suite: build every process entry point (server/main.ts, scripts/*.ts) once into an
 * ESM bundle (server/entry-bundle.ts), so the hundreds of child processes the integration tests
 * start run already transpiled code instead of each paying tsx's loader (server/entry.ts says why
 * and how children pick it up). Built from the working tree on every run, so it can never be stale.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildEntryBundle } from '../server/entry-bundle.ts';
import { ENTRY_BUNDLE_DIR } from './entry-bundle-dir.ts';

/** Each project of a run calls the global setup; the first builds, the others find it built. */
const BUILT_BY = '.built-by-run';

export default async function setup(): Promise<void> {
  const marker = path.join(ENTRY_BUNDLE_DIR, BUILT_BY);
  if (fs.existsSync(marker) && fs.readFileSync(marker, 'utf8') === String(process.pid)) return;
  await buildEntryBundle(ENTRY_BUNDLE_DIR);
  fs.writeFileSync(marker, String(process.pid));
}
