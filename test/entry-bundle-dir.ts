/** Where test/global-setup.ts builds the entry-point bundles (inside node_modules: never committed). */
import * as path from 'node:path';
import { PROJECT_ROOT } from '../server/entry.ts';

export const ENTRY_BUNDLE_DIR = path.join(
  PROJECT_ROOT,
  'node_modules',
  '.cache',
  'walsim-entry-bundle',
);
