import { defineConfig } from 'vitest/config';
import { ENTRY_BUNDLE_ENV } from './server/entry.ts';
import { ENTRY_BUNDLE_DIR } from './test/entry-bundle-dir.ts';

// Two projects that run side by side: the in-process files (unit, property, simulator, golden)
// in parallel workers, and the files that start real processes (integration/) one at a time — on
// the 2-core CI machine two of those at once would time each other out. Child processes run the
// entry points test/global-setup.ts bundles once per run (server/entry.ts).
export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    env: { [ENTRY_BUNDLE_ENV]: ENTRY_BUNDLE_DIR },
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'in-process',
          include: ['test/**/*.test.ts'],
          exclude: ['test/integration/**'],
          maxWorkers: 2,
        },
      },
      {
        extends: true,
        test: {
          name: 'processes',
          include: ['test/integration/**/*.test.ts'],
          fileParallelism: false,
        },
      },
    ],
  },
});
