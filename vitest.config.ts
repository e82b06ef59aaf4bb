import { defineConfig } from 'vitest/config';
import { ENTRY_BUNDLE_ENV } from './server/entry.ts';
import { ENTRY_BUNDLE_DIR } from './test/entry-bundle-dir.ts';
import LongestFirst from './test/sequencer.ts';

// Three projects, one pool of WORKERS forked workers: the module files (unit/, property/), the
// simulator files (sim/, golden/) and the files that start real processes (integration/) run
// side by side. vitest runs projects of different worker counts one after the other, so all
// have the same count; test/sequencer.ts hands out the longest files first. Real-process files
// wait on their children most of the time (a file uses about half a core), so three workers
// keep the 2-core CI machine busy. Child processes run the entry points test/global-setup.ts
// bundles once per run (server/entry.ts).
const WORKERS = 3;

export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    setupFiles: ['test/port-range.ts'],
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
          name: 'modules',
          include: ['test/unit/**/*.test.ts', 'test/property/**/*.test.ts'],
          // One worker process runs many of these files one after another (a fresh process per
          // file costs more than most of them): they import modules and keep no state between
          // files (no module mocks, fake timers restored after each test).
          isolate: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'simulator',
          include: ['test/sim/**/*.test.ts', 'test/golden/**/*.test.ts'],
          // A seed allocates many short-lived objects: with V8's default 16 MB young generation
          // most of them survive a scavenge or two and are copied (scripts/simulate.ts does the
          // same for its workers).
          execArgv: ['--max-semi-space-size=64'],
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
