/**
 * The slow-disk layer (common/latency-disk.ts) shared by the production binding and the simulator:
 * while a latency is set, every write and fsync (file or directory) stalls the caller for it,
 * asynchronous writes wait on the clock instead, nothing else is delayed, and the hold ends on
 * time. Method: wrap the in-memory disk, drive a scheduler clock, count the stalls.
 */
import { describe, expect, it } from 'vitest';
import { DiskLatency, LatencyDisk } from '../../common/latency-disk.ts';
import { MemDisk } from '../../sim/mem-disk.ts';
import { Scheduler } from '../../sim/scheduler.ts';
import { SeededRandom } from '../../common/random.ts';

function setup() {
  const sched = new Scheduler();
  const clock = sched.clockFor('n#1');
  const stalls: number[] = [];
  const mem = new MemDisk();
  const disk = new LatencyDisk(mem, clock, (ms) => {
    stalls.push(ms);
    sched.advance(ms);
  });
  mem.mkdirp('/d');
  return { sched, clock, stalls, mem, disk };
}

describe('LatencyDisk', () => {
  it('passes through at full speed until a latency is set', () => {
    const { disk, stalls } = setup();
    const fd = disk.open('/d/f', 'w');
    disk.write(fd, new Uint8Array([1, 2, 3]), 0, 3, 0);
    disk.fsync(fd);
    disk.close(fd);
    expect(stalls).toEqual([]);
    expect(disk.latency.counters).toEqual({ delayedWrites: 0, delayedFsyncs: 0, delayedMs: 0 });
  });

  it('stalls writes and fsyncs (files and directories) while the hold lasts, then stops', () => {
    const { disk, stalls, sched } = setup();
    disk.latency.set(5, 40, 100, sched.now);
    const fd = disk.open('/d/f', 'w');
    disk.write(fd, new Uint8Array([1]), 0, 1, 0); // t=0 → 5
    disk.fsync(fd); // t=5 → 45
    disk.fsyncDir('/d'); // t=45 → 85
    disk.read(fd, new Uint8Array(1), 0, 1, 0); // reads are not delayed
    disk.write(fd, new Uint8Array([2]), 0, 1, 1); // t=85 → 90
    disk.fsync(fd); // t=90 → 130 (started inside the hold)
    disk.write(fd, new Uint8Array([3]), 0, 1, 2); // t=130: the hold is over
    disk.fsync(fd);
    expect(stalls).toEqual([5, 40, 40, 5, 40]);
    expect(disk.latency.counters).toEqual({ delayedWrites: 2, delayedFsyncs: 3, delayedMs: 130 });
    expect(disk.latency.writeMs).toBe(0); // cleared once the hold passed
  });

  it('delays asynchronous writes and syncs on the clock without stalling the caller', async () => {
    const { disk, stalls, sched } = setup();
    disk.latency.set(10, 30, 1000, sched.now);
    let done = false;
    void (async () => {
      const f = await disk.openAsync('/d/img', 'w');
      await f.writev([new Uint8Array([1, 2])]);
      await f.sync();
      await f.close();
      done = true;
    })();
    expect(await sched.runUntil(() => done, 1000)).toBe(true);
    expect(sched.now).toBe(40); // 10 ms for the write, then 30 for the sync, on simulated time
    expect(stalls).toEqual([]);
  });

  it('spreads delays with a seeded source, the same on every run', () => {
    const run = () => {
      const { disk, stalls, sched } = setup();
      const rng = new SeededRandom(42);
      disk.latency.spread = () => rng.float();
      disk.latency.set(0, 100, 10_000, sched.now);
      const fd = disk.open('/d/f', 'w');
      for (let i = 0; i < 5; i++) disk.fsync(fd);
      return stalls;
    };
    const a = run();
    expect(a).toEqual(run());
    for (const ms of a) expect(ms >= 50 && ms <= 100).toBe(true);
    expect(new Set(a).size).toBeGreaterThan(1);
  });

  it('shares one device latency between process incarnations, and refuses latencies out of range', () => {
    const shared = new DiskLatency();
    const sched = new Scheduler();
    const mem = new MemDisk();
    const a = new LatencyDisk(mem, sched.clockFor('n#1'), () => {}, shared);
    const b = new LatencyDisk(mem, sched.clockFor('n#2'), () => {}, shared);
    a.latency.set(1, 2, 50, 0);
    expect(b.latency.fsyncMs).toBe(2);
    expect(() => shared.set(1001, 0, 10, 0)).toThrow(
      'writeMs must be an integer between 0 and 1000, got 1001',
    );
    expect(() => shared.set(0, -1, 10, 0)).toThrow(
      'fsyncMs must be an integer between 0 and 1000, got -1',
    );
  });
});
