/**
 * The exporter's LSN windows (scripts/exporter/windows.ts) over generated WAL records: cycle after
 * cycle, with WAL arriving and the replay LSN moving through the backlog (inside windows, on their
 * edges, across many at once), the windows' prediction equals a from-scratch replay model's —
 * learn every record before the replay LSN from the redo, replay the rest — counts, record types,
 * the first full-scan drop, assumptions and records learned; and the state kept (windows, images,
 * relations) stays bounded however long the backlog grows. The generated records cover what the
 * size-cache rule depends on: reads, extensions, FSM/VM forks, truncations, relation drops (some
 * of relations created in the backlog), DROP DATABASE (every cached size forgotten).
 */
import { describe, expect, it } from 'vitest';
import { pgDropRules } from '../../storage/pg-drop-rules.ts';
import { formatLsn, parseLsn } from '../../wal/lsn.ts';
import type { ReadRange } from '../../scripts/predict/prediction.ts';
import { RecoveryModel, type StandbyFiles } from '../../scripts/predict/replay-model.ts';
import type { PgWalRecord, RelFileNode } from '../../scripts/predict/wal-records.ts';
import {
  DEFAULT_WINDOW_OPTIONS,
  ReplayWindows,
  type WindowOptions,
  type WindowStats,
} from '../../scripts/exporter/windows.ts';

const NB = 2048; // NBuffers: the lookup threshold is 64 blocks
const RULES = pgDropRules({ major: 15, minor: 11 });

/** A small deterministic generator (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The standby's files: fixed sizes (the model reads them at a relation's first need). */
const FILES: StandbyFiles = {
  diskBlocks: (n, f) => (f === 0 ? n.rel % 40 : f === 1 && n.rel % 3 === 0 ? 3 : null),
  residentBlocks: () => undefined,
};

/** `n` records: inserts/updates on a pool of relations, truncations, drops, creations. */
function generate(n: number, seed: number): PgWalRecord[] {
  const rand = rng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)]!;
  const node = (rel: number, db = 5): RelFileNode => ({ spc: 1663, db, rel });
  const live: RelFileNode[] = [];
  for (let i = 0; i < 12; i++) live.push(node(16384 + i, i % 4 === 0 ? 6 : 5));
  let nextRel = 20000;
  let lsn = 0x1000000;
  const out: PgWalRecord[] = [];
  const emit = (r: Omit<PgWalRecord, 'lsn' | 'endLsn' | 'totalLength' | 'xid'>) => {
    const totalLength = 50 + Math.floor(rand() * 200);
    out.push({ lsn, endLsn: lsn + totalLength, totalLength, xid: 700 + out.length, ...r });
    // Now and then the next record starts after a page header, not at the end of this one.
    lsn += totalLength + (rand() < 0.1 ? 24 : 0);
  };
  for (let i = 0; i < n; i++) {
    const x = rand();
    if (live.length === 0 || x < 0.05) {
      const nd = node(nextRel++, rand() < 0.2 ? 6 : 5);
      live.push(nd);
      emit({ rmgr: 'Storage', type: 'CREATE', blocks: [], create: { node: nd, fork: 0 } });
    } else if (x < 0.6) {
      const nd = pick(live);
      const free = rand() < 0.3 ? 100 : 4000;
      emit({
        rmgr: 'Heap',
        type: rand() < 0.5 ? 'INSERT' : 'UPDATE',
        blocks: [{ node: nd, fork: 0, block: Math.floor(rand() * 70) }],
        heapPageFreeAfter: free,
      });
    } else if (x < 0.7) {
      const nd = pick(live);
      emit({ rmgr: 'Heap2', type: 'VISIBLE', blocks: [{ node: nd, fork: 2, block: 0 }] });
    } else if (x < 0.8) {
      const nd = pick(live);
      const flags = pick([1, 3, 5, 7]);
      emit({
        rmgr: 'Storage',
        type: 'TRUNCATE',
        blocks: [],
        truncate: { node: nd, blkno: Math.floor(rand() * 50), flags },
      });
    } else if (x < 0.9) {
      const k = 1 + Math.floor(rand() * 2);
      const gone = live.splice(Math.floor(rand() * live.length), k);
      emit({ rmgr: 'Transaction', type: 'COMMIT', blocks: [], dropRels: gone });
    } else if (x < 0.905) {
      for (let j = live.length - 1; j >= 0; j--) if (live[j]!.db === 6) live.splice(j, 1);
      emit({ rmgr: 'Database', type: 'DROP', blocks: [], dropDatabase: 6 });
    } else if (x < 0.925) {
      // CREATE DATABASE … STRATEGY FILE_COPY: every cached size forgotten (15+), nothing dropped.
      emit({ rmgr: 'Database', type: 'CREATE_FILE_COPY', blocks: [] });
    } else emit({ rmgr: 'Standby', type: 'RUNNING_XACTS', blocks: [] });
  }
  return out;
}

/** pg-wal's reader over the records: those starting at or after `from` that end by `to`. */
function reader(recs: readonly PgWalRecord[]): ReadRange {
  return async (from, to, onRecord) => {
    const a = parseLsn(from);
    const b = parseLsn(to);
    let next = a;
    for (const r of recs) {
      if (r.lsn < a || r.endLsn! > b) continue;
      onRecord(r);
      next = r.endLsn!;
    }
    return { source: 'pg-wal', detail: `records from ${from} to ${to}`, nextLsn: formatLsn(next) };
  };
}

/** A from-scratch prediction: learn [redo, replay), replay [replay, received). */
function fromScratch(recs: readonly PgWalRecord[], replay: number, received: number) {
  const m = headModel();
  let learned = 0;
  for (const r of recs) {
    if (r.lsn < replay) {
      m.learn(r);
      learned += 1;
    } else if (r.endLsn! <= received) m.replay(r);
  }
  return { rp: m.result(), learned };
}

/**
 * A replay prediction with its record types by name: the windows' counts of a cut window are
 * its counts less those before the replay LSN, which keep no first-seen order of the rest
 * (assemblePrediction orders the types by seconds, count, then name).
 */
function byName<T extends { rp: { types: Array<{ rmgr: string; type: string }> } }>(x: T): T {
  const key = (t: { rmgr: string; type: string }) => `${t.rmgr}/${t.type}`;
  return {
    ...x,
    rp: { ...x.rp, types: [...x.rp.types].sort((a, b) => (key(a) < key(b) ? -1 : 1)) },
  };
}

/** A model's relation states, comparable (resident blocks sorted). */
function relations(m: RecoveryModel) {
  return Object.fromEntries(
    [...m.relStates()].map(([k, r]) => [
      k,
      r.forks.map((f) => ({ ...f, resident: [...f.resident].sort((a, b) => a - b) })),
    ]),
  );
}

/** The exporter's head model: first-full-scan drop accounting. */
const headModel = () => new RecoveryModel(NB, FILES, false, RULES, 'first-full-scan');

/** Windows over a head model, reading from `lsn`. */
const windowsFrom = (lsn: number, opts: WindowOptions) =>
  new ReplayWindows(headModel(), 0, formatLsn(lsn), opts);

/** The tail (retired windows' images applied) is the state learning their records makes. */
function expectTailLearned(w: ReplayWindows, recs: readonly PgWalRecord[]): void {
  const tail = w.tailState();
  const m = headModel();
  for (const x of recs) if (x.lsn < tail.lsn) m.learn(x);
  expect(relations(tail.model)).toEqual(relations(m));
}

/** A record that drops nothing (no truncation, relation or database drop). */
const noDrops = (x: PgWalRecord) =>
  x.truncate === undefined && !x.dropRels && x.dropDatabase === undefined;

/** Replay LSNs a standby reports: the end of a record (or the redo). */
const endOf = (recs: readonly PgWalRecord[], i: number) =>
  i === 0 ? recs[0]!.lsn : recs[i - 1]!.endLsn!;

async function runCycles(
  recs: PgWalRecord[],
  opts: WindowOptions,
  seed: number,
  cycles: number,
  check: (w: ReplayWindows, replay: number, received: number) => Promise<void>,
  /** Give `read` the replay LSN, as the exporter does (a window closes at it). */
  hint = true,
): Promise<void> {
  const rand = rng(seed);
  const read = reader(recs);
  const redo = recs[0]!.lsn;
  const w = windowsFrom(redo, opts);
  let replayed = 0; // records replayed
  let received = 0; // records received
  for (let c = 0; c < cycles; c++) {
    received = Math.min(recs.length, received + Math.floor(rand() * (recs.length / cycles) * 2));
    const roll = rand();
    // Paused (replay stands still), creeping, jumping over windows, or caught up.
    if (roll < 0.3) replayed += 0;
    else if (roll < 0.6) replayed += Math.floor(rand() * 40);
    else if (roll < 0.85) replayed += Math.floor(rand() * (received - replayed));
    else replayed = received;
    replayed = Math.min(replayed, received);
    const to = received === 0 ? redo : recs[received - 1]!.endLsn!;
    // A receive LSN inside the next record: that record is read by a later cycle.
    const receive = to + (received < recs.length && rand() < 0.5 ? 7 : 0);
    const replay = endOf(recs, replayed);
    await w.read(read, formatLsn(receive), hint ? formatLsn(replay) : undefined);
    w.retire(formatLsn(replay));
    await check(w, replay, receive);
  }
}

/** The state kept after a paused standby received `n` generated records over 50 cycles. */
async function pausedBacklog(n: number, opts: WindowOptions): Promise<WindowStats> {
  const recs = generate(n, 7);
  const w = windowsFrom(recs[0]!.lsn, opts);
  const read = reader(recs);
  for (let c = 1; c <= 50; c++) {
    await w.read(read, formatLsn(recs[Math.floor((recs.length * c) / 50) - 1]!.endLsn!));
    w.retire(formatLsn(recs[0]!.lsn));
  }
  return w.stats();
}

describe('the exporter LSN windows', () => {
  it('equal a from-scratch prediction cycle after cycle while replay moves through the backlog', async () => {
    const runs: Array<[number, WindowOptions]> = [];
    for (const seed of [1, 2, 3, 4, 5, 6]) runs.push([seed, { windowBytes: 8192, maxWindows: 6 }]);
    // Many merges: two windows at most, small ones.
    for (const seed of [7, 8]) runs.push([seed, { windowBytes: 1024, maxWindows: 2 }]);
    for (const seed of [9, 10, 12, 13])
      runs.push([seed, { windowBytes: 1024, maxWindows: 3, grow: false }]);
    // Merged by the image budget: many windows allowed, but their images outweigh the head.
    for (const seed of [14, 15])
      runs.push([
        seed,
        { windowBytes: 1024, maxWindows: 64, minWindows: 3, imageBudget: 0, grow: false },
      ]);
    for (const [seed, opts] of runs) {
      const recs = generate(3000, seed);
      let cuts = 0;
      let stats: ReturnType<ReplayWindows['stats']> | null = null;
      // Odd seeds read without the replay LSN (windows close by size only), even ones with it.
      await runCycles(
        recs,
        opts,
        seed,
        40,
        async (w, r, to) => {
          const before = w.readBytes;
          const got = await w.prediction(formatLsn(r), reader(recs));
          if (w.readBytes > before) cuts += 1;
          stats = w.stats();
          const want = fromScratch(recs, r, to);
          expect(got.learned).toBe(want.learned);
          expect(byName(got)).toEqual(byName(want));
          expectTailLearned(w, recs);
        },
        seed % 2 === 0,
      );
      // Replay LSNs fell inside windows (read again) in every run.
      expect(cuts).toBeGreaterThan(0);
      if (opts.grow === false || opts.imageBudget !== undefined)
        expect(stats!.merges).toBeGreaterThan(10);
    }
  });

  it('read the WAL of a standby keeping up once: nothing again, and still agree', async () => {
    const recs = generate(3000, 21);
    const read = reader(recs);
    const w = windowsFrom(recs[0]!.lsn, { windowBytes: 1 << 20, maxWindows: 8 });
    const rand = rng(21);
    let received = 0;
    let receivedLsn = recs[0]!.lsn;
    while (received < recs.length) {
      // Each cycle 100-200 new records; replay 0-20 records behind, inside the new WAL.
      const prev = received;
      received = Math.min(recs.length, received + 100 + Math.floor(rand() * 100));
      const replayed = Math.max(prev + 1, received - Math.floor(rand() * 20));
      const receive = recs[received - 1]!.endLsn!;
      const replay = endOf(recs, replayed);
      const before = w.readBytes;
      await w.read(read, formatLsn(receive), formatLsn(replay));
      w.retire(formatLsn(replay));
      const got = await w.prediction(formatLsn(replay), read);
      // Only the new WAL was read: no window was read again.
      expect(w.readBytes - before).toBe(receive - receivedLsn);
      receivedLsn = receive;
      const want = fromScratch(recs, replay, receive);
      expect(got.learned).toBe(want.learned);
      expect(got.rp).toEqual(want.rp);
      expect(w.stats().windows).toBeLessThanOrEqual(1);
    }
  });

  it('count every drop path, forget cached sizes at DROP DATABASE, and still agree', async () => {
    const recs = generate(4000, 11);
    const m = new RecoveryModel(NB, FILES, false, RULES);
    for (const r of recs) m.replay(r);
    const d = m.result().counts.drops.drops;
    // The generated WAL exercises both paths (what the cached sizes decide).
    expect(d['full-scan']).toBeGreaterThan(10);
    expect(d['cached-lookup']).toBeGreaterThan(10);
    expect(recs.filter((r) => r.dropDatabase !== undefined).length).toBeGreaterThan(0);
  });

  it('merge windows into one image that applies as their records do', async () => {
    // One record a window, two windows kept: [w0] [w1 w2] are merged while replay stands still.
    const R: RelFileNode = { spc: 1663, db: 5, rel: 16390 };
    const S: RelFileNode = { spc: 1663, db: 5, rel: 16391 };
    const T: RelFileNode = { spc: 1663, db: 5, rel: 16392 };
    const bodies: Array<Omit<PgWalRecord, 'lsn' | 'endLsn' | 'totalLength' | 'xid'>> = [
      { rmgr: 'Heap', type: 'INSERT', blocks: [{ node: S, fork: 0, block: 1 }] },
      { rmgr: 'Heap', type: 'INSERT', blocks: [{ node: R, fork: 0, block: 2 }] },
      { rmgr: 'Storage', type: 'TRUNCATE', blocks: [], truncate: { node: R, blkno: 1, flags: 1 } },
      // After R's last touch: every cached size forgotten, R's included.
      { rmgr: 'Database', type: 'CREATE_FILE_COPY', blocks: [] },
      { rmgr: 'Storage', type: 'CREATE', blocks: [], create: { node: T, fork: 0 } },
      { rmgr: 'Heap', type: 'INSERT', blocks: [{ node: R, fork: 0, block: 5 }] },
      { rmgr: 'Transaction', type: 'COMMIT', blocks: [], dropRels: [T] },
      { rmgr: 'Heap', type: 'INSERT', blocks: [{ node: S, fork: 0, block: 3 }] },
    ];
    const recs = bodies.map((b, i) => ({
      lsn: 0x2000000 + i * 100,
      endLsn: 0x2000000 + i * 100 + 80,
      totalLength: 80,
      xid: 800 + i,
      ...b,
    }));
    const read = reader(recs);
    const w = windowsFrom(recs[0]!.lsn, {
      windowBytes: 1,
      maxWindows: 2,
      grow: false,
    });
    const check = async (replayed: number, received: number) => {
      const r = replayed === 0 ? recs[0]!.lsn : recs[replayed - 1]!.endLsn!;
      w.retire(formatLsn(r));
      expectTailLearned(w, recs);
      const to = recs[received - 1]!.endLsn!;
      expect(byName(await w.prediction(formatLsn(r), read))).toEqual(
        byName(fromScratch(recs, r, to)),
      );
    };
    await w.read(read, formatLsn(recs[1]!.endLsn!));
    await w.read(read, formatLsn(recs[4]!.endLsn!));
    // [w0] [w1 w2 w3]: the forget merged after R's last touch.
    expect(w.stats().merges).toBeGreaterThan(0);
    for (const replayed of [0, 3, 5]) await check(replayed, 5);
    await w.read(read, formatLsn(recs[7]!.endLsn!));
    for (const replayed of [5, 6, 7, 8]) await check(replayed, 8);
  });

  it('keep windows, images and tallies bounded whatever the backlog', async () => {
    const opts = { windowBytes: 4096, maxWindows: 8 };
    const short = await pausedBacklog(2_000, opts);
    const long = await pausedBacklog(40_000, opts);
    for (const s of [short, long]) {
      expect(s.windows).toBeLessThanOrEqual(opts.maxWindows + 1);
      // Per window at most the relations and blocks the generator can hold at once.
      expect(s.imageRelations).toBeLessThanOrEqual(s.windows * 200);
      expect(s.imageBlocks).toBeLessThanOrEqual(s.windows * 200 * 4 * 70);
      expect(s.tallyTypes).toBeLessThanOrEqual(s.windows * 12);
    }
    // Twenty times the backlog: no more windows, wider ones.
    expect(long.windows).toBeLessThanOrEqual(short.windows + 1);
    expect(long.windowBytes).toBeGreaterThan(short.windowBytes);
  });
  it("read again only the cut window's records before the replay LSN, from where its last cut stopped", async () => {
    // A paused backlog in one window (truncations and drops: full-scan drops all through it),
    // then replay moving through it in steps, twice in the same place.
    const recs = generate(3000, 41);
    const read = reader(recs);
    const from = recs[0]!.lsn;
    const receive = recs.at(-1)!.endLsn!;
    const w = windowsFrom(from, { windowBytes: 1 << 30, maxWindows: 8 });
    await w.read(read, formatLsn(receive));
    expect(w.readBytes).toBe(receive - from);
    // The window's full-scan drops, as the head counted them (the same state: every record).
    const all = new RecoveryModel(NB, FILES, false, RULES);
    for (const x of recs) all.replay(x);
    const fullScans = all
      .result()
      .drops.filter((d) => d.path === 'full-scan')
      .map((d) => d.lsn);
    expect(fullScans.length).toBeGreaterThan(20);
    let at = from;
    let steps = 0;
    let searched = 0;
    for (const replayed of [0, 1, 40, 40, 700, 1500, 1501, 2990, 3000]) {
      const r = endOf(recs, replayed);
      w.retire(formatLsn(r));
      const before = w.readBytes;
      const got = await w.prediction(formatLsn(r), read);
      expect(byName(got)).toEqual(byName(fromScratch(recs, r, receive)));
      if (replayed === recs.length) {
        // Caught up: the window was retired whole, nothing read.
        expect(w.readBytes - before).toBe(0);
        break;
      }
      // Its records before r not yet read (from the window's start, then from the last r); and
      // while its first full-scan drop lies before r, those from r to the next full-scan drop.
      const next = fullScans.find((lsn) => lsn >= r);
      const toDrop =
        fullScans[0]! < r && next !== undefined ? recs.find((x) => x.lsn === next)!.endLsn! - r : 0;
      // The same replay LSN again: the last answer, nothing read.
      const again = r === at && steps > 0;
      expect(w.readBytes - before).toBe(again ? 0 : r - at + toDrop);
      if (toDrop > 0) searched += 1;
      at = r;
      steps += 1;
    }
    expect(steps).toBe(8);
    expect(searched).toBeGreaterThan(2);
  });

  it('read again, of a replay moving through many windows, each cut window up to the replay LSN only', async () => {
    // No drops: only the records before the replay LSN are read again.
    const recs = generate(3000, 43).filter(noDrops);
    const read = reader(recs);
    const from = recs[0]!.lsn;
    const receive = recs.at(-1)!.endLsn!;
    const w = windowsFrom(from, { windowBytes: 16 << 10, maxWindows: 64, grow: false });
    await w.read(read, formatLsn(receive));
    let last = { window: -1, at: 0 };
    let reread = 0;
    for (const replayed of [5, 90, 91, 300, 1100, 1900, 1950, recs.length - 3]) {
      const r = endOf(recs, replayed);
      w.retire(formatLsn(r));
      const window = w.tailState().lsn; // the cut window's start: the windows before it retired
      const before = w.readBytes;
      const got = await w.prediction(formatLsn(r), read);
      expect(byName(got)).toEqual(byName(fromScratch(recs, r, receive)));
      const at = last.window === window ? last.at : window;
      expect(w.readBytes - before).toBe(r - at);
      reread += r - at;
      last = { window, at: r };
    }
    // Less than a window a cut, in all: what reading each cut window whole would exceed.
    expect(reread).toBeLessThan(8 * (16 << 10));
  });

  it('merge narrow windows whose images outweigh the budget, down to minWindows', async () => {
    // The generated backlog touches several relations in every window (creations, drops).
    const narrow: WindowOptions = { windowBytes: 1024, maxWindows: 256, grow: false };
    const budget: WindowOptions = { ...narrow, minWindows: 16, imageBudget: 2000 };
    const free = await pausedBacklog(40_000, narrow);
    const bounded = await pausedBacklog(40_000, budget);
    const weight = (s: WindowStats) => s.imageRelations * 32 + s.imageBlocks;
    const allowed = (s: WindowStats) => 2000 + 2 * (s.headRelations * 32 + s.headBlocks);
    // Without the budget, the images of many narrow windows outweigh it (what it is for) …
    expect(weight(free)).toBeGreaterThan(allowed(free));
    // … with it, they were merged until they weigh no more, or down to minWindows (+ the open).
    expect(weight(bounded) <= allowed(bounded) || bounded.windows <= 16 + 1).toBe(true);
    expect(bounded.windows).toBeLessThan(free.windows);
    expect(weight(bounded)).toBeLessThan(weight(free));
  });

  it('read again at most the backlog/512 a cycle while replay moves through a long backlog', async () => {
    // 16,384 records of 512 KiB each (no drops: nothing is searched past the replay LSN): an
    // 8 GiB backlog received while paused, then replay moving through it, the exporter's own
    // window options. A cycle reads again the cut window's records before the replay LSN: with
    // windows of the backlog/128 to /64 (256 windows) that is up to 64–128 MiB.
    const STEP = 512 << 10;
    const base = 0x100000000;
    const recs = generate(24_000, 47)
      .filter(noDrops)
      .slice(0, 16_384)
      .map((x, i) => ({ ...x, lsn: base + i * STEP, endLsn: base + (i + 1) * STEP - 16 }))
      .map((x) => ({ ...x, totalLength: x.endLsn - x.lsn }));
    expect(recs.length).toBe(16_384);
    const backlog = recs.at(-1)!.endLsn - base;
    const read = reader(recs);
    const w = windowsFrom(base, DEFAULT_WINDOW_OPTIONS);
    for (let c = 1; c <= 8; c++) {
      await w.read(read, formatLsn(recs[(recs.length * c) / 8 - 1]!.endLsn), formatLsn(base));
      w.retire(formatLsn(base));
    }
    expect(w.readBytes).toBe(backlog);
    let most = 0;
    for (let k = 1; k <= 12; k++) {
      // Replay moved by about a thirteenth of the backlog, to a record end anywhere in a window.
      const r = endOf(recs, Math.floor((k * recs.length) / 13) + ((k * 577) % 997));
      w.retire(formatLsn(r));
      const before = w.readBytes;
      const got = await w.prediction(formatLsn(r), read);
      expect(byName(got)).toEqual(byName(fromScratch(recs, r, recs.at(-1)!.endLsn)));
      most = Math.max(most, w.readBytes - before);
    }
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(backlog / 512);
  });
});
