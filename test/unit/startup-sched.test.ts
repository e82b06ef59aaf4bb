import * as fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseSchedstat, StartupSampler } from '../../scripts/postgres/startup-sched.ts';

describe('startup process scheduler statistics', () => {
  it('parses /proc/<pid>/schedstat and refuses anything else', () => {
    expect(parseSchedstat('361544232 7691076525 883\n')).toEqual({
      cpuNs: 361544232,
      runQueueNs: 7691076525,
      slices: 883,
    });
    expect(parseSchedstat('')).toBeNull();
    expect(parseSchedstat('1 2')).toBeNull();
    expect(parseSchedstat('a b c')).toBeNull();
  });

  it.skipIf(!fs.existsSync(`/proc/${process.pid}/schedstat`))(
    'splits a span of a live process into CPU, run-queue wait and blocked time that sum to its wall time',
    async () => {
      const s = new StartupSampler(process.pid, 1);
      const until = performance.now() + 30;
      while (performance.now() < until) {
        /* on a CPU */
      }
      await new Promise((r) => setTimeout(r, 20)); // blocked
      const r = s.stop()!;
      expect(r).not.toBeNull();
      expect(r.cpuMs).toBeGreaterThan(0);
      expect(r.runQueueMs).toBeGreaterThanOrEqual(0);
      expect(r.blockedMs).toBeGreaterThanOrEqual(0);
      expect(r.cpuMs + r.runQueueMs + r.blockedMs).toBeGreaterThanOrEqual(r.wallMs - 1e-6);
    },
  );
});
