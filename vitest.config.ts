import { defineConfig } from 'vitest/config';
import { ENTRY_BUNDLE_ENV } from './server/entry.ts';
import { ENTRY_BUNDLE_DIR } from './test/entry-bundle-dir.ts';

// Integration tests start real server processes; keep files serial on the 2-core CI machine.
// Child processes run the entry points test/global-setup.ts bundles once per run (server/entry.ts).
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    env: { [ENTRY_BUNDLE_ENV]: ENTRY_BUNDLE_DIR },
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
