import { defineConfig } from 'vitest/config';

// Integration tests start real server processes; keep files serial on the 2-core CI machine.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
