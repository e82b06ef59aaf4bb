import { defineConfig } from 'vitest/config';
import { ENTRY_BUNDLE_ENV } from './server/entry.ts';
import { ENTRY_BUNDLE_DIR } from './test/entry-bundle-dir.ts';
import LongestFirst from './test/sequencer.ts';

// Two projects, one pool of WORKERS forked workers: the in-process files (unit, property,
// simulator, golden) and the files that start real processes (integration/) run side by side and
// next to each other. vitest runs projects of different worker counts one after the other, so
// both have the same count; test/sequencer.ts hands out the longest files first. Real-process
// files wait on their children most of the time (a file uses about half a core), so three workers
// keep the 2-core CI machine busy. Child processes run the entry points test/global-setup.ts
// bundles once per run (server/entry.ts).
const WORKERS = 3;

export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    env: { [ENTRY_BUNDLE_ENV]: ENTRY_BUNDLE_DIR },
    pool: 'forks',
    maxWorkers: WORKERS,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    sequence: { sequencer: LongestFirst },
    projects: [
      {
        extends: true,
        test: {
          name: 'in-process',
          include: ['test/**/*.test.ts'],
          exclude: ['test/integration/**'],
        },
      },
      {
        extends: true,
        test: {
          name: 'processes',
          include: ['test/integration/**/*.test.ts'],
        },
      },
    ],
  },
});
