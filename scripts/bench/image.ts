/**
 * The data image writer's event-loop stretches at many tables (the node's 10 ms bound), in one process:
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
import { parseCli, positiveInt, runCli } from '../cli/command.ts';

const USAGE = 'usage: tsx scripts/bench/image.ts [--tables 100000] [--rounds 3] [--json] [--marks]';
const OPTIONS = {
  tables: { type: 'string', default: '100000' },
  rounds: { type: 'string', default: '3' },
  json: { type: 'boolean' },
  marks: { type: 'boolean' },
} as const;

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
  marks: boolean,
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

async function round(tables: number, marks: boolean): Promise<ImageRun[]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-bench-image-'));
  try {
    const st = buildStorage(tables);
    const runs = [await timedImage(st, dir, 1, 'all new', marks)];
    for (let i = 0; i < 5; i++) st.heap.applyInsert(FIRST_REL + i * 1000, 0, 2, i, 3, false);
    runs.push(await timedImage(st, dir, 2, '5 changed', marks));
    runs.push(await timedImage(st, dir, 3, 'none changed', marks));
    return runs;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function main(): Promise<void> {
  const { values } = parseCli(process.argv.slice(2), OPTIONS, USAGE);
  const tables = positiveInt(values.tables, 'tables');
  const rounds = positiveInt(values.rounds, 'rounds');
  const all: ImageRun[] = [];
  for (let r = 0; r < rounds; r++) all.push(...(await round(tables, values.marks === true)));
  const fields = ['ms', 'longestGapMs', 'longestStepMs', 'pauses', 'gcCount', 'longestGcMs'];
  const summary = ['all new', '5 changed', 'none changed'].map((image) => {
    const runs = all.filter((r) => r.image === image);
    const row: Record<string, number | string> = { image };
    for (const f of fields) row[f] = median(runs.map((r) => r[f as keyof ImageRun] as number));
    row['maxGapMs'] = Math.max(...runs.map((r) => r.longestGapMs));
    return row;
  });
  if (values.json === true) {
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

runCli(main, USAGE);
