/**
 * The simulator's faults one at a time, on hand-written scenarios (sim/README "Faults"): a flipped
 * byte in the primary's WAL (crash recovery ends WAL at the bad record; acknowledged commits at or
 * past it count as lost to corruption, never as allowed losses, and the run still converges), a
 * slow disk (the production latency layer over the in-memory disk: writes and fsyncs take
 * simulated time), and failover phases reported on the promoted node's simulated clock with the
 * cost model's PostgreSQL time beside them. Method: run the scenario, assert counters, the ledger's
 * verdicts and the trace; every figure is deterministic, so exact values are asserted where stable.
 */
import { describe, expect, it } from 'vitest';
import { Simulation, runSimulation } from '../../sim/simulation.ts';
import { SIM_EPOCH_MS } from '../../sim/scheduler.ts';
import { TWO_NODES, type Scenario, type SimCommand, type SimOptions } from '../../sim/scenario.ts';

function scenario(seed: number, commands: SimCommand[], over: Partial<SimOptions> = {}): Scenario {
  return {
    seed,
    options: {
      synchronousCommit: 'on',
      dropStrategy: { primary: 'full-scan', standby: 'cached-lookup' },
      sharedBuffers: '256kB',
      walSegmentSize: 64 * 1024,
      link: { delayMinMs: 1, delayMaxMs: 5, cutDetectMs: 100 },
      stepMs: 20,
      ...over,
    },
    topology: TWO_NODES,
    commands,
  };
}

const inserts = (table: string, from: number, n: number): SimCommand[] =>
  Array.from({ length: n }, (_, i) => ({
    op: 'sql',
    sql: `INSERT INTO ${table} VALUES (${from + i})`,
  }));

describe('primary WAL corruption', () => {
  const commands: SimCommand[] = [
    { op: 'sql', sql: 'CREATE TABLE t1 (c int)' },
    { op: 'sql', sql: 'CHECKPOINT' },
    ...inserts('t1', 1, 12),
    { op: 'corrupt', node: 'primary', downMs: 300 },
    ...inserts('t1', 100, 3),
  ];

  it('crash recovery ends WAL at the bad record; commits past it are lost to corruption, the rest hold, the cluster converges', async () => {
    let withLoss = 0;
    for (let seed = 1; seed <= 8; seed++) {
      const r = await runSimulation(scenario(seed, commands), { trace: true });
      expect(r.violations).toEqual([]);
      expect(r.lost).toBe(0);
      expect(r.faults['corruption (primary WAL)']).toBe(1);
      const trace = r.trace!.join('\n');
      // PostgreSQL's behaviour: the bad CRC is the end of WAL, said in the log, not an error.
      expect(trace).toMatch(/A#2 LOG: {2}invalid record at \d+\/[0-9A-F]+ ends local WAL/);
      const flipped = /flipped a byte at \S+ in the record at (\S+) \(\S+ on A\)/.exec(trace);
      expect(flipped).not.toBeNull();
      // Every commit the ledger gave up to the corruption ended past the bad record's start.
      for (const m of trace.matchAll(
        /lost to WAL corruption on A \(commit ends at or before (\S+)\)/g,
      )) {
        expect(parseInt(m[1]!.replace('/', ''), 16)).toBeGreaterThan(
          parseInt(flipped![1]!.replace('/', ''), 16),
        );
      }
      expect(r.lostToCorruption).toBe([...trace.matchAll(/lost to WAL corruption/g)].length);
      if (r.lostToCorruption > 0) withLoss++;
      // The commits after the restart are acknowledged and survive (the standby was re-cloned).
      expect(trace).toMatch(/ack INSERT INTO t1 VALUES \(102\)/);
    }
    // Most draws hit a record before some acknowledged commit (a loss the ledger names honestly).
    expect(withLoss).toBeGreaterThan(0);
  }, 60_000);

  it('replays a corruption seed to the identical trace', async () => {
    const a = await runSimulation(scenario(3, commands), { trace: true });
    const b = await runSimulation(scenario(3, commands), { trace: true });
    expect(b.trace).toEqual(a.trace);
  });
});

describe('slow disk', () => {
  it('delays writes and fsyncs on simulated time through the production latency layer, and ends with its hold', async () => {
    const cmds: SimCommand[] = [
      { op: 'sql', sql: 'CREATE TABLE s (c int)' },
      { op: 'slowDisk', node: 'primary', writeMs: 20, latencyMs: 100, ms: 2000 },
      ...inserts('s', 1, 5),
      { op: 'wait', ms: 3000 },
      ...inserts('s', 10, 5),
    ];
    const slow = new Simulation(scenario(5, cmds));
    const r = await slow.run();
    expect(r.violations).toEqual([]);
    expect(r.faults['slow disk (primary)']).toBe(1);
    const c = slow.latencyOf('primary').counters;
    expect(c.delayedWrites).toBeGreaterThan(0);
    expect(c.delayedFsyncs).toBeGreaterThan(0);
    expect(slow.latencyOf('standby').counters.delayedMs).toBe(0);
    // The same run without the fault takes less simulated time; with it, no more than the delays.
    const fast = await runSimulation(
      scenario(
        5,
        cmds.filter((x) => x.op !== 'slowDisk'),
      ),
    );
    expect(fast.violations).toEqual([]);
    expect(r.simMs).toBeGreaterThan(fast.simMs);
    expect(r.acknowledged).toBe(fast.acknowledged);
    // Each delay is 50–100 % of its latency (seeded spread), and replays exactly.
    expect(c.delayedMs).toBeGreaterThanOrEqual(10 * c.delayedWrites + 50 * c.delayedFsyncs);
    expect(c.delayedMs).toBeLessThanOrEqual(20 * c.delayedWrites + 100 * c.delayedFsyncs);
    const again = new Simulation(scenario(5, cmds));
    expect((await again.run()).traceHash).toBe(r.traceHash);
    expect(again.latencyOf('primary').counters).toEqual(c);
  });
});

describe('failover time', () => {
  it("reports the phases on the promoted node's simulated clock, with modeled PostgreSQL time", async () => {
    const cmds: SimCommand[] = [
      { op: 'sql', sql: 'CREATE TABLE f (c int)' },
      { op: 'pause' },
      { op: 'sql', sql: 'INSERT INTO f SELECT generate_series(1, 3000)' },
      { op: 'sql', sql: 'TRUNCATE f' },
      // Every fsync of the standby's machine is slow: end of recovery and open for writes take simulated time.
      { op: 'slowDisk', node: 'standby', writeMs: 0, latencyMs: 200, ms: 60_000 },
      { op: 'failover', how: 'immediate' },
      ...inserts('f', 5000, 2),
    ];
    const sim = new Simulation(scenario(11, cmds, { synchronousCommit: 'local' }));
    const r = await sim.run();
    expect(r.violations).toEqual([]);
    expect(r.failovers).toBe(1);
    const t = r.failoverTimes[0]!;
    expect(t.failoverMs).toBe(t.replayMs! + t.endOfRecoveryMs! + t.openForWritesMs!);
    expect(t.endOfRecoveryMs! + t.openForWritesMs!).toBeGreaterThanOrEqual(100); // at least one slow fsync (≥ 50 % of 200 ms)
    expect(t.modeledS).toBeGreaterThan(0);
    // The report's instants are on the simulated wall clock (epoch + simulated ms), not the real one.
    const report = sim.nodeOf('primary')!.failoverReport()!;
    const resumeAt = Date.parse(report.resumeAt!);
    expect(resumeAt).toBeGreaterThanOrEqual(SIM_EPOCH_MS);
    expect(resumeAt).toBeLessThanOrEqual(SIM_EPOCH_MS + r.simMs);
    expect(Date.parse(report.promotedAt!) - resumeAt).toBe(t.failoverMs);
  });
});

describe('node status on the simulated disk', () => {
  it("counts WAL files on the node's own disk (not the real file system)", async () => {
    const sim = new Simulation(scenario(1, []));
    await sim.setup();
    expect(sim.nodeOf('primary')!.status().walFiles).toBeGreaterThanOrEqual(1);
  });
});

describe('primary disk full', () => {
  it('a WAL write on a full disk ends the primary in a PANIC; it restarts once space is free and keeps every acknowledged commit', async () => {
    for (const level of ['off', 'on'] as const) {
      const cmds: SimCommand[] = [
        { op: 'sql', sql: 'CREATE TABLE d (c int)' },
        ...inserts('d', 1, 3),
        { op: 'wait', ms: 300 }, // past wal_writer_delay: even synchronous_commit=off commits are on disk
        { op: 'diskFull', node: 'primary', ms: 700 },
        ...inserts('d', 10, 3),
        { op: 'wait', ms: 1000 },
        ...inserts('d', 20, 3),
      ];
      const r = await runSimulation(scenario(21, cmds, { synchronousCommit: level }), {
        trace: true,
      });
      expect(r.violations).toEqual([]);
      expect(r.lost).toBe(0);
      expect(r.faults['disk full (primary pg_wal)']).toBe(1);
      const trace = r.trace!.join('\n');
      expect(trace).toMatch(
        /A#1 exit after PANIC: {2}could not write to WAL: ENOSPC: no space left on device/,
      );
      expect(trace).toMatch(/sim start A#2 as primary/);
      // Every statement before the fault and after the restart was acknowledged (and survived: lost 0).
      for (const v of [1, 2, 3, 20, 21, 22])
        expect(trace).toContain(`ack INSERT INTO d VALUES (${v})`);
      if (level === 'on') {
        // The commit that hit the full disk got no answer: its session ended with the process.
        expect(trace).not.toContain('ack INSERT INTO d VALUES (10)');
      } else {
        // off: acknowledged before its WAL was written; the PANIC at the background flush loses it,
        // which synchronous_commit=off allows (counted as allowed losses).
        expect(trace).toContain('ack INSERT INTO d VALUES (10)');
        expect(r.lostAllowed).toBeGreaterThan(0);
      }
    }
  });
});

/**
 * The simulator's share of test/integration/faults-primary-crash.test.ts, which keeps one real
 * process test per promise (remote_write: nothing acknowledged is lost; local: only what had not
 * reached the standby is). Every level here: the primary is killed while single-row commits are in
 * flight (one step of simulated time per statement, shorter than a round trip), a standby is
 * promoted and the old primary rejoins; the ledger checks every acknowledged commit against what
 * its level promised.
 */
describe('primary crash during commits, then failover', () => {
  const commands: SimCommand[] = [
    { op: 'sql', sql: 'CREATE TABLE acks (c int)' },
    { op: 'wait', ms: 300 },
    ...inserts('acks', 1, 40),
    { op: 'failover', how: 'crash' },
    ...inserts('acks', 100, 5),
  ];
  for (const level of ['remote_write', 'on', 'remote_apply', 'local', 'off'] as const) {
    it(`synchronous_commit=${level}: ${level === 'local' || level === 'off' ? 'only commits its level made no promise for may be missing' : 'no acknowledged commit is lost'}`, async () => {
      let acknowledged = 0;
      let lostAllowed = 0;
      for (let seed = 1; seed <= 6; seed++) {
        const r = await runSimulation(
          scenario(seed, commands, { synchronousCommit: level, stepMs: 1 }),
        );
        expect(r.violations).toEqual([]);
        expect(r.lost).toBe(0);
        expect(r.failovers).toBe(1);
        acknowledged += r.acknowledgedByLevel[level] ?? 0;
        lostAllowed += r.lostAllowed;
      }
      // 46 statements a seed: the CREATE, 40 inserts before the crash, 5 after the failover.
      if (level === 'local' || level === 'off') {
        // Acknowledged at once; what had not reached the standby is gone, as these levels allow.
        expect(acknowledged).toBe(6 * 46);
        expect(lostAllowed).toBeGreaterThan(0);
      } else {
        // Waiting for the standby: some commits were acknowledged, those in flight at the kill
        // never were, and nothing acknowledged is missing.
        expect(acknowledged).toBeGreaterThan(6 * 10);
        expect(acknowledged).toBeLessThan(6 * 46);
        expect(lostAllowed).toBe(0);
      }
    });
  }
});
