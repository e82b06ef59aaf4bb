/**
 * Where the standby's startup process spent a failover, from the kernel's scheduler statistics
 * (/proc/<pid>/schedstat: time on a CPU, time runnable but waiting for a CPU, and timeslices run).
 * The startup process is PostgreSQL's replay; on a shared machine its wall time is its CPU work, its
 * blocked time (fsync, file operations) and its run-queue delay — the last one is the machine's
 * other load, not PostgreSQL's work (BENCHMARKS.md "What PostgreSQL's replay time is made of").
 *
 * Entry points: `findStartupPid(postmasterPid)`, `parseSchedstat(text)`, `StartupSampler`,
 * `startupSamplerOf(pgdata)`, `StartupSched`.
 *
 * The startup process exits when recovery ends, so its counters are sampled every `intervalMs`
 * and the last sample read before it exited is used: the figures miss at most one interval of its
 * last moments. Linux only; elsewhere (or without permission) the sampler reports null.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** The startup process's scheduler time over the failover (first sample → last sample). */
export interface StartupSched {
  /** On a CPU, ms. */
  cpuMs: number;
  /** Runnable, waiting for a CPU (the kernel's run_delay), ms. */
  runQueueMs: number;
  /** Wall time between the two samples, ms; cpuMs + runQueueMs + blocked time. */
  wallMs: number;
  /** wallMs − cpuMs − runQueueMs: sleeping (fsync, I/O, latch waits), ms. */
  blockedMs: number;
  /** Timeslices run on a CPU (each wake-up is at least one). */
  slices: number;
}

/** `<cpu ns> <run-queue ns> <timeslices>` → numbers; null when malformed. */
export function parseSchedstat(
  text: string,
): { cpuNs: number; runQueueNs: number; slices: number } | null {
  const m = /^(\d+) (\d+) (\d+)\s*$/.exec(text);
  return m ? { cpuNs: Number(m[1]), runQueueNs: Number(m[2]), slices: Number(m[3]) } : null;
}

/** The pid of the postmaster's child whose command line names the startup process, or null. */
export function findStartupPid(postmasterPid: number): number | null {
  let children: string[];
  try {
    children = fs
      .readFileSync(`/proc/${postmasterPid}/task/${postmasterPid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean);
  } catch {
    return null;
  }
  for (const c of children) {
    try {
      const cmd = fs.readFileSync(`/proc/${c}/cmdline`, 'utf8');
      if (/^postgres: (\S+: )?startup/.test(cmd.replace(/\0/g, ' '))) return Number(c);
    } catch {
      /* exited meanwhile */
    }
  }
  return null;
}

/** Samples one process's schedstat on a timer until it exits or `stop()` is called. */
export class StartupSampler {
  private first: { at: number; s: ReturnType<typeof parseSchedstat> } | null = null;
  private last: { at: number; s: ReturnType<typeof parseSchedstat> } | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly pid: number,
    intervalMs = 5,
  ) {
    this.sample();
    this.timer = setInterval(() => this.sample(), intervalMs);
  }

  private sample(): void {
    let s: ReturnType<typeof parseSchedstat>;
    try {
      s = parseSchedstat(fs.readFileSync(`/proc/${this.pid}/schedstat`, 'utf8'));
    } catch {
      this.halt(); // the process exited: keep the last sample
      return;
    }
    if (s === null) return;
    const at = performance.now();
    if (this.first === null) this.first = { at, s };
    this.last = { at, s };
  }

  private halt(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  /** Stop sampling; the span from the first to the last sample (null if never sampled twice). */
  stop(): StartupSched | null {
    this.halt();
    const a = this.first?.s;
    const b = this.last?.s;
    if (!a || !b || this.last === this.first) return null;
    const cpuMs = (b.cpuNs - a.cpuNs) / 1e6;
    const runQueueMs = (b.runQueueNs - a.runQueueNs) / 1e6;
    const wallMs = this.last!.at - this.first!.at;
    return {
      cpuMs,
      runQueueMs,
      wallMs,
      blockedMs: Math.max(0, wallMs - cpuMs - runQueueMs),
      slices: b.slices - a.slices,
    };
  }
}

/**
 * A sampler of the startup process of the server running in `pgdata` (its postmaster.pid's first
 * line names the postmaster), or null when it cannot be found (not running, no /proc).
 */
export function startupSamplerOf(pgdata: string): StartupSampler | null {
  try {
    const pm = Number(fs.readFileSync(path.join(pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const pid = Number.isInteger(pm) && pm > 0 ? findStartupPid(pm) : null;
    return pid === null ? null : new StartupSampler(pid);
  } catch {
    return null;
  }
}

/**
 * How many 4 KiB pages of the buffer descriptor array the startup process has not mapped yet
 * (`/proc/<pid>/pagemap`: neither present nor swapped). Its first full scan of NBuffers descriptors
 * takes one minor page fault for each such page; later scans take none. `descOffset` and
 * `descBytes` are the array's place in the main shared memory segment (`pg_shmem_allocations`,
 * "Buffer Descriptors"); the segment is the process's largest shared mapping. null: not readable.
 */
export function unmappedDescriptorPages(
  pgdata: string,
  descOffset: number,
  descBytes: number,
): { pages: number; unmapped: number } | null {
  try {
    const pm = Number(fs.readFileSync(path.join(pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const pid = Number.isInteger(pm) && pm > 0 ? findStartupPid(pm) : null;
    if (pid === null) return null;
    let base = -1;
    let largest = 0;
    for (const line of fs.readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n')) {
      const m = /^([0-9a-f]+)-([0-9a-f]+) rw-s /.exec(line);
      if (!m) continue;
      const [a, b] = [parseInt(m[1]!, 16), parseInt(m[2]!, 16)];
      if (b - a > largest) [largest, base] = [b - a, a];
    }
    if (base < 0 || descOffset + descBytes > largest) return null;
    const first = Math.floor((base + descOffset) / 4096);
    const pages = Math.ceil((base + descOffset + descBytes) / 4096) - first;
    const buf = Buffer.alloc(pages * 8);
    const fd = fs.openSync(`/proc/${pid}/pagemap`, 'r');
    try {
      fs.readSync(fd, buf, 0, buf.length, first * 8);
    } finally {
      fs.closeSync(fd);
    }
    let unmapped = 0;
    for (let i = 0; i < pages; i++) if (buf.readBigUInt64LE(i * 8) >> 62n === 0n) unmapped++;
    return { pages, unmapped };
  } catch {
    return null;
  }
}
