/**
 * The data image writer's event-loop stretches at many tables (issue 24 item 6), in one process:
 * `NodeStorage.writeImage` of N one-row tables (one heap block each, in smgr and the catalog) into a
 * temp data directory, while a 1 ms `setTimeout` ticker measures the longest gap between its ticks
 * (what a status request waiting behind the writer would see) and a `PerformanceObserver` records
 * the GC pauses during the write. Three images per round: all N new, 5 changed, none changed.
 *
 * Usage: tsx scripts/bench/image.ts [--tables 100000] [--rounds 3] [--json]
 * [--marks] (run node with --trace-gc and --marks to see each scavenge between `# image` lines;
 * the figures are wall clock, so state the load.)
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { nodeDisk } from '../../common/node-disk.ts';
import { systemClock } from '../../common/system-clock.ts';
import { DEFAULT_DROP_SETTINGS } from '../../storage/drop.ts';
import { NodeStorage, type ImageWriteStats } from '../../storage/node-storage.ts';

interface ImageRun {
  image: string;
  ms: number;
  longestGapMs: number;
  longestStepMs: number;
  pauses: number;
  gcCount: number;
  longestGcMs: number;
  gcTotalMs: number;
}

const FIRST_REL = 20000;

function buildStorage(tables: number): NodeStorage {
  const st = NodeStorage.create(1024, DEFAULT_DROP_SETTINGS);
  for (let i = 0; i < tables; i++) {
    const rel = FIRST_REL + i;
    st.heap.createRelation(rel);
    st.smgr.create(rel, 0);
    st.heap.applyInsert(rel, 0, 1, i, 3, true);
    st.catalog.set(`t${i}`, rel);
  }
  return st;
}

/** One image with the ticker and the GC observer running; the figures of that image only. */
async function timedImage(
  st: NodeStorage,
  dir: string,
  lsn: number,
  image: string,
): Promise<ImageRun> {
  const gcs: PerformanceEntry[] = [];
  const obs = new PerformanceObserver((list) => gcs.push(...list.getEntries()));
  obs.observe({ entryTypes: ['gc'] });
  let last = performance.now();
  let longestGapMs = 0;
  let ticking = true;
  const tick = (): void => {
    const now = performance.now();
    longestGapMs = Math.max(longestGapMs, now - last);
    last = now;
    if (ticking) setTimeout(tick, 1);
  };
  setTimeout(tick, 1);
  const pause = () => new Promise<void>((resolve) => setImmediate(resolve));
  const header = { redoLsn: lsn << 20, redoPrevLsn: 0, timeline: 1 };
  const marks = process.argv.includes('--marks');
  if (marks) console.log(`# image ${image}: start`);
  const t0 = performance.now();
  const stats: ImageWriteStats = await st.writeImage(dir, header, pause, {
    disk: nodeDisk,
    clock: systemClock,
  });
  const ms = performance.now() - t0;
  if (marks) console.log(`# image ${image}: end`);
  ticking = false;
  await new Promise((resolve) => setTimeout(resolve, 5));
  obs.disconnect();
  const during = gcs.filter((g) => g.startTime >= t0 && g.startTime <= t0 + ms);
  return {
    image,
    ms,
    longestGapMs,
    longestStepMs: stats.longestStepMs,
    pauses: stats.pauses,
    gcCount: during.length,
    longestGcMs: Math.max(0, ...during.map((g) => g.duration)),
    gcTotalMs: during.reduce((s, g) => s + g.duration, 0),
  };
}

async function round(tables: number): Promise<ImageRun[]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-bench-image-'));
  try {
    const st = buildStorage(tables);
    const runs = [await timedImage(st, dir, 1, 'all new')];
    for (let i = 0; i < 5; i++) st.heap.applyInsert(FIRST_REL + i * 1000, 0, 2, i, 3, false);
    runs.push(await timedImage(st, dir, 2, '5 changed'));
    runs.push(await timedImage(st, dir, 3, 'none changed'));
    return runs;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

async function main(): Promise<void> {
  const tables = arg('--tables', 100_000);
  const rounds = arg('--rounds', 3);
  const all: ImageRun[] = [];
  for (let r = 0; r < rounds; r++) all.push(...(await round(tables)));
  const fields = ['ms', 'longestGapMs', 'longestStepMs', 'pauses', 'gcCount', 'longestGcMs'];
  const summary = ['all new', '5 changed', 'none changed'].map((image) => {
    const runs = all.filter((r) => r.image === image);
    const row: Record<string, number | string> = { image };
    for (const f of fields) row[f] = median(runs.map((r) => r[f as keyof ImageRun] as number));
    row['maxGapMs'] = Math.max(...runs.map((r) => r.longestGapMs));
    return row;
  });
  if (process.argv.includes('--json')) {
    console.log(JSON.stringify({ tables, rounds, load: os.loadavg()[0], summary, runs: all }));
    return;
  }
  console.log(`tables ${tables}, rounds ${rounds}, load ${os.loadavg()[0]!.toFixed(1)} (medians)`);
  for (const row of summary)
    console.log(
      Object.entries(row)
        .map(([k, v]) => `${k}=${typeof v === 'number' ? v.toFixed(1) : v}`)
        .join(' '),
    );
}

await main();
