/**
 * The exporter's unreplayed range kept as LSN windows: each window holds the counts its records
 * add to a prediction (a `ReplayTally`), the LSN of its last full-scan drop, and its image (what
 * its records changed in the startup process's relation state), never its records. When the
 * replay LSN moves, the windows wholly replayed are dropped after their images are applied to
 * the tail model; of the window the replay LSN falls in, only its records before the replay LSN
 * are read again — counted on a copy of the tail, kept for the next cycle, which reads on from
 * there — and its unreplayed part is its counts less theirs (`subtractTally`); the window's
 * first full-scan drop after the replay LSN, when its first one lies before it and its last one
 * after it, is found by reading on from the replay LSN to that drop. New WAL is read once, into
 * the head model.
 *
 * Why this is exact (the size-cache rule, replay-model.ts): what a record adds — whether a drop
 * takes the full scan or the lookup, whether smgrnblocks is called, how many blocks are extended
 * or invalidated — depends on the relation state left by every record since the startup process
 * began (the restartpoint's redo). Learning a record and replaying it change that state alike
 * (the exporter never has pg_buffercache's resident buffers: INV-EXPORTER-6), so a record's counts
 * do not depend on where the replay LSN is: they are fixed when the head first meets the record,
 * after the same records a from-scratch prediction reads before it. The sum of the windows after
 * the replay LSN is then what a from-scratch prediction counts. The one window cut by the replay
 * LSN is its counts less those of its records before the replay LSN, which need the state at its
 * start to be counted again: the tail model, which is the state before the first kept window (the
 * images of the retired windows applied in order equal replaying their records).
 *
 * What a cycle reads again is at most the cut window (and, for a full-scan drop, the rest of it):
 * so windows are many and narrow — up to `maxWindows` (2048), a backlog spanning at most half of
 * them — and a 10 GB backlog is cut in windows of 4–16 MiB (256 windows would make them
 * 64–128 MiB).
 *
 * Memory: the windows are at most `maxWindows` (pairs are merged beyond, and the size of new
 * windows doubles while the backlog is longer than maxWindows/2 of them); an image holds, per
 * relation its records read or changed, the final fork state, the lowest truncation point and
 * the blocks that became resident — bounded by the relations and their blocks, not by records.
 * Narrow windows multiply the images of a backlog that touches many relations in every window
 * (DDL): beyond `minWindows` windows, pairs are also merged while the images weigh more (a
 * relation as 32 blocks, plus the blocks they make resident) than `imageBudget` plus twice the
 * head model, so that they never weigh more than that or than `minWindows` windows' images.
 *
 * Entry points: `ReplayWindows`, `sumTallies`, `subtractTally`, `WindowOptions`,
 * `DEFAULT_WINDOW_OPTIONS`.
 */
import { addCounters, diffCounters } from '../../common/counters.ts';
import { formatLsn, parseLsn } from '../../wal/lsn.ts';
import type { ReadRange } from '../predict/prediction.ts';
import {
  newJournal,
  type PredictedDrop,
  type RecoveryModel,
  type RelJournal,
  type RelState,
  type ReplayPrediction,
  type ReplayTally,
} from '../predict/replay-model.ts';
import type { RangeRead } from '../predict/wal-source.ts';
import type { RelFileNode } from '../predict/wal-records.ts';

export interface WindowOptions {
  /** Bytes of WAL a new window spans at least (doubled while the backlog is long). */
  windowBytes: number;
  /** Windows kept at most: beyond, adjacent pairs are merged. */
  maxWindows: number;
  /**
   * New windows wide enough that the backlog spans at most maxWindows/2 of them (default), or
   * always `windowBytes` wide (merging alone bounds them: tests use it to merge often).
   */
  grow?: boolean;
  /**
   * Beyond this many windows (default: maxWindows), pairs also merge while the images weigh more
   * (relations × 32 + the blocks they make resident) than `imageBudget` plus twice the head model.
   */
  minWindows?: number;
  /** What the images may weigh beyond twice the head model (default: no such bound). */
  imageBudget?: number;
}

/**
 * Narrow windows (a cycle reads again at most about one: 4 MiB, or about the backlog/1000 on
 * a long one), many of them; a backlog that touches many relations in every window is kept
 * in as few as 256 windows when their images outgrow the budget: memory before read-again cost.
 */
export const DEFAULT_WINDOW_OPTIONS: WindowOptions = {
  windowBytes: 4 << 20,
  maxWindows: 2048,
  minWindows: 256,
  imageBudget: 1 << 21,
};

interface ForkImage {
  exists: boolean | undefined;
  cached: boolean;
  size: number | undefined;
  /** The lowest block a truncation in the window cut from (null: none). */
  truncFrom: number | null;
  /** Blocks resident at the window's end that became resident in it. */
  add: number[];
}
type ForkImages = [ForkImage, ForkImage, ForkImage, ForkImage];

/**
 * A relation after the window: gone (it was there when the window began), or its forks
 * (`existed`: there when the window began; `fresh`: created in the window).
 */
type RelImage =
  | { deleted: true }
  | { deleted: false; existed: boolean; fresh: boolean; node: RelFileNode; forks: ForkImages };

interface WindowImage {
  /** The window's records forgot every cached size (DROP DATABASE, …). */
  forgot: boolean;
  /** The window's records ran a full scan (the startup process mapped the descriptor array). */
  fullScan: boolean;
  rels: Map<string, RelImage>;
}

interface Window {
  /** Its records start at or after `from` and before `to` (the end of its last record). */
  from: number;
  to: number;
  tally: ReplayTally;
  /** The LSN of its last full-scan drop (null: none); `tally.drops` holds its first. */
  lastFullScan: number | null;
  image: WindowImage;
}

/**
 * The window the replay LSN cuts, as far as it was read again: `model` is the tail moved over
 * [from, at) — those records counted in `before` — kept so that a later replay LSN in the same
 * window reads on from `at`; `last` the answer for the last replay LSN asked.
 */
interface Cut {
  from: number;
  to: number;
  at: number;
  model: RecoveryModel;
  before: ReplayTally;
  last: { r: number; tally: ReplayTally; learned: number } | null;
}

/** What a `ReplayWindows` holds: the memory-bound test reads these counters. */
export interface WindowStats {
  windows: number;
  windowBytes: number;
  /** Relations in the head and the tail models. */
  headRelations: number;
  tailRelations: number;
  /** Resident blocks in the head model (what the image budget grows with). */
  headBlocks: number;
  /** Relation images and resident blocks the windows' images hold. */
  imageRelations: number;
  imageBlocks: number;
  /** Record types the windows' tallies hold (each tally has one entry a type). */
  tallyTypes: number;
  /** Pairs of windows merged so far; windows retired so far. */
  merges: number;
  retired: number;
}

/** The unreplayed range of one standby, by LSN window (see the file's comment). */
export class ReplayWindows {
  private readonly head: RecoveryModel;
  private readonly sealed: Window[] = [];
  /** Where the open window (the head's tally since the last seal) starts. */
  private openFrom: number;
  /** Where the open window's first record starts; null while it has none. */
  private openFirst: number | null = null;
  /** Where the next record to read starts. */
  private headTo: number;
  private windowBytes: number;
  /** The window the replay LSN cuts, read again up to the replay LSN. */
  private cut: Cut | null = null;
  /** Bytes of WAL read (new WAL once, plus the cut window's records before the replay LSN). */
  readBytes = 0;
  private merges = 0;
  private retired = 0;
  /** The sealed windows' images weighed as the budget counts them (`imageEntries`). */
  private imageEntries = 0;
  /**
   * The tallies of the sealed windows after the first, summed (`n`: of sealed[1..n)): the
   * prediction of a paused backlog adds three tallies a cycle, not one a window. Appending a
   * window extends it; retiring or merging windows drops it.
   */
  private rest: { tally: ReplayTally; n: number } | null = null;

  /**
   * `tail`: the state learned from the restartpoint's redo to `from` (`tailRecords` records);
   * it stays the state before the first kept window.
   */
  constructor(
    private readonly tail: RecoveryModel,
    private tailRecords: number,
    from: string,
    private readonly opts: WindowOptions = DEFAULT_WINDOW_OPTIONS,
  ) {
    this.head = tail.clone();
    this.head.takeTally();
    this.head.journal = newJournal();
    this.openFrom = this.headTo = parseLsn(from);
    this.windowBytes = opts.windowBytes;
  }

  /**
   * The WAL received since the last read, [end of the last record read, `to`), read once. With
   * the replay LSN (`replay`), the open window is also closed before the first record at or after
   * it: `retire(replay)` then drops the records before it whole, and the window after it starts
   * at the replay LSN, so nothing is read again (a standby keeping up: its new WAL read once).
   */
  async read(read: ReadRange, to: string, replay?: string): Promise<RangeRead> {
    const start = this.headTo;
    const r = replay === undefined ? null : parseLsn(replay);
    let lastEnd: number | null = null;
    let inOpen = this.head.peekRecords();
    const src = await read(formatLsn(start), to, (rec) => {
      const atReplay = r !== null && rec.lsn >= r && this.openFirst !== null && this.openFirst < r;
      if (inOpen > 0 && (atReplay || rec.lsn - this.openFrom >= this.windowBytes)) {
        this.seal(lastEnd ?? start);
        inOpen = 0;
      }
      if (inOpen === 0) this.openFirst = rec.lsn;
      this.head.replay(rec);
      inOpen += 1;
      lastEnd = rec.endLsn ?? null;
    });
    this.headTo = parseLsn(src.nextLsn ?? to);
    this.readBytes += Math.max(0, parseLsn(to) - start);
    return src;
  }

  /** Drop the windows wholly replayed (replay LSN ≥ their end), their images into the tail. */
  retire(replay: string): void {
    const r = parseLsn(replay);
    // The replay LSN past the open window's first record: it becomes a window to cut or retire.
    if (this.openFirst !== null && this.openFirst < r && this.head.peekRecords() > 0)
      this.seal(this.headTo);
    while (this.sealed.length > 0 && this.sealed[0]!.to <= r) {
      const w = this.sealed.shift()!;
      applyImage(this.tail, w.image);
      this.tailRecords += w.tally.records;
      this.imageEntries -= imageEntries(w.image);
      this.retired += 1;
      this.cut = null;
      this.rest = null;
    }
  }

  /**
   * The counts of [replay LSN, end of the WAL read), equal to a from-scratch replay model's, and
   * the records learned before the replay LSN since the redo (predict's `learnedRecords`).
   */
  async prediction(
    replay: string,
    read: ReadRange,
  ): Promise<{ rp: ReplayPrediction; learned: number }> {
    const r = parseLsn(replay);
    const tallies: ReplayTally[] = [];
    let learned = this.tailRecords;
    const w = this.sealed[0];
    if (w !== undefined) {
      if (w.from < r) {
        const c = await this.cutWindow(w, r, read);
        tallies.push(c.tally);
        learned += c.learned;
      } else tallies.push(w.tally);
    }
    const rest = this.restTally();
    if (rest !== null) tallies.push(rest);
    tallies.push(this.head.peekTally());
    const sum = sumTallies(tallies);
    return { rp: { ...sum, assumptions: this.head.assumptionList(sum.counts) }, learned };
  }

  /** The sum of the sealed windows' tallies after the first (null: none), kept between cycles. */
  private restTally(): ReplayTally | null {
    const n = this.sealed.length;
    if (n <= 1) return null;
    const c = this.rest;
    if (c === null || c.n > n) {
      this.rest = { tally: sumTallies(this.sealed.slice(1).map((x) => x.tally)), n };
    } else if (c.n < n) {
      const added = this.sealed.slice(c.n).map((x) => x.tally);
      this.rest = { tally: sumTallies([c.tally, ...added]), n };
    }
    return this.rest!.tally;
  }

  /** The tail model and the LSN it stands at (the first kept window's start): for tests. */
  tailState(): { lsn: number; model: RecoveryModel } {
    return { lsn: this.sealed[0]?.from ?? this.openFrom, model: this.tail };
  }

  stats(): WindowStats {
    let imageRelations = 0;
    let imageBlocks = 0;
    let tallyTypes = 0;
    for (const w of this.sealed) {
      imageRelations += w.image.rels.size;
      tallyTypes += w.tally.types.length;
      for (const ri of w.image.rels.values())
        if (!ri.deleted) for (const f of ri.forks) imageBlocks += f.add.length;
    }
    return {
      windows: this.sealed.length + (this.head.peekRecords() > 0 ? 1 : 0),
      windowBytes: this.windowBytes,
      headRelations: this.head.relStates().size,
      headBlocks: modelEntries(this.head) - this.head.relStates().size * RELATION_WEIGHT,
      tailRelations: this.tail.relStates().size,
      imageRelations,
      imageBlocks,
      tallyTypes,
      merges: this.merges,
      retired: this.retired,
    };
  }

  /**
   * The unreplayed part of the window the replay LSN cuts: its records before the replay LSN are
   * counted on a copy of the tail (from where the last cut of this window stopped, else from its
   * start), and subtracted from the window's counts.
   */
  private async cutWindow(
    w: Window,
    r: number,
    read: ReadRange,
  ): Promise<{ tally: ReplayTally; learned: number }> {
    let c = this.cut;
    if (c === null || c.from !== w.from || c.to !== w.to || c.at > r) {
      const model = this.tail.clone();
      c = { from: w.from, to: w.to, at: w.from, model, before: model.takeTally(), last: null };
      this.cut = c;
    }
    if (c.last?.r === r) return c.last;
    if (c.at < r) {
      const m = c.model;
      await read(formatLsn(c.at), formatLsn(r), (rec) => m.replay(rec));
      this.readBytes += r - c.at;
      c.at = r;
      c.before = sumTallies([c.before, m.takeTally()]);
    }
    const tally = subtractTally(w.tally, c.before, await this.firstFullScanFrom(w, c, read));
    c.last = { r, tally, learned: c.before.records };
    return c.last;
  }

  /**
   * The window's first full-scan drop at or after the cut's replay LSN (`c.at`): the window's
   * first when it lies there, none when its last lies before, else read on from the replay LSN
   * on a copy of the cut's model until one is met.
   */
  private async firstFullScanFrom(w: Window, c: Cut, read: ReadRange): Promise<PredictedDrop[]> {
    const first = w.tally.drops.find((d) => d.path === 'full-scan');
    if (first === undefined || first.lsn >= c.at) return first === undefined ? [] : [first];
    if (w.lastFullScan === null || w.lastFullScan < c.at) return [];
    const m = c.model.clone();
    let stop = c.at;
    try {
      await read(formatLsn(c.at), formatLsn(w.to), (rec) => {
        m.replay(rec);
        stop = rec.endLsn ?? rec.lsn;
        if (m.lastFullScanLsn !== null) throw FOUND;
      });
    } catch (e) {
      if (e !== FOUND) throw e;
    }
    this.readBytes += stop - c.at;
    return m.takeTally().drops.filter((d) => d.path === 'full-scan');
  }

  /** Close the open window at `to`: its tally and image become a kept window. */
  private seal(to: number): void {
    const journal = this.head.journal!;
    const lastFullScan = this.head.lastFullScanLsn;
    const image = imageOf(this.head.relStates(), journal);
    this.sealed.push({
      from: this.openFrom,
      to,
      tally: this.head.takeTally(),
      lastFullScan,
      image,
    });
    this.imageEntries += imageEntries(image);
    this.head.journal = newJournal();
    this.openFrom = to;
    this.openFirst = null;
    // New windows wide enough that the backlog spans at most half of maxWindows of them.
    const backlog = to - (this.sealed[0]?.from ?? to);
    this.windowBytes = this.opts.windowBytes;
    while (this.opts.grow !== false && backlog / this.windowBytes > this.opts.maxWindows / 2)
      this.windowBytes *= 2;
    while (this.sealed.length > this.opts.maxWindows || this.overBudget()) this.mergePairs();
  }

  /**
   * More than `minWindows` windows (and more than two: a merge of two changes nothing) whose
   * images hold more entries than the budget allows beyond twice the head model's.
   */
  private overBudget(): boolean {
    const { minWindows, imageBudget } = this.opts;
    if (imageBudget === undefined || this.sealed.length <= Math.max(2, minWindows ?? Infinity))
      return false;
    return this.imageEntries > imageBudget + 2 * modelEntries(this.head);
  }

  /** Merge adjacent windows pairwise, the first (perhaps cut) kept as it is. */
  private mergePairs(): void {
    const out: Window[] = [this.sealed[0]!];
    for (let i = 1; i < this.sealed.length; i += 2) {
      const a = this.sealed[i]!;
      const b = this.sealed[i + 1];
      if (b !== undefined) this.merges += 1;
      out.push(
        b === undefined
          ? a
          : {
              from: a.from,
              to: b.to,
              tally: sumTallies([a.tally, b.tally]),
              lastFullScan: b.lastFullScan ?? a.lastFullScan,
              image: composeImages(a.image, b.image),
            },
      );
    }
    this.sealed.splice(0, this.sealed.length, ...out);
    this.imageEntries = out.reduce((n, w) => n + imageEntries(w.image), 0);
    this.rest = null;
  }
}

/**
 * What the image budget counts a relation as, in block numbers: a relation's image (its object,
 * four fork images and their arrays) weighs about what 32 entries of a block list do.
 */
const RELATION_WEIGHT = 32;

/** An image's weight for the budget: relations (weighted) and the blocks it makes resident. */
function imageEntries(img: WindowImage): number {
  let n = img.rels.size * RELATION_WEIGHT;
  for (const ri of img.rels.values()) if (!ri.deleted) for (const f of ri.forks) n += f.add.length;
  return n;
}

/** A model's weight, counted as images are: relations (weighted) and resident blocks. */
function modelEntries(m: RecoveryModel): number {
  let n = 0;
  for (const r of m.relStates().values()) {
    n += RELATION_WEIGHT;
    for (const f of r.forks) n += f.resident.size;
  }
  return n;
}

/**
 * The tallies of consecutive spans as one: counts added, record types in first-seen order, the
 * first full-scan drop kept (the exporter's models keep no other: `dropList`).
 */
export function sumTallies(ts: readonly ReplayTally[]): ReplayTally {
  const types = new Map<string, ReplayTally['types'][number]>();
  let counts = ts[0]?.counts;
  const out: ReplayTally = {
    counts: counts!,
    types: [],
    genericRecords: 0,
    records: 0,
    walBytes: 0,
    drops: [],
  };
  for (const [i, t] of ts.entries()) {
    if (i > 0) counts = addCounters(counts!, t.counts);
    for (const x of t.types) {
      const k = `${x.rmgr}/${x.type}`;
      const y = types.get(k);
      if (y === undefined) types.set(k, { ...x });
      else {
        y.count += x.count;
        y.bytes += x.bytes;
      }
    }
    out.genericRecords += t.genericRecords;
    out.records += t.records;
    out.walBytes += t.walBytes;
    if (out.drops.length === 0) {
      const d = t.drops.find((x) => x.path === 'full-scan');
      if (d !== undefined) out.drops.push(d);
    }
  }
  out.counts = ts.length === 1 ? structuredClone(counts!) : counts!;
  out.types = [...types.values()];
  return out;
}

/** Thrown from a read's callback to end it at the record it was looking for. */
const FOUND = Symbol('found');

/**
 * `total` less `part` (a span and its first records): counts, records by type (those left at
 * zero dropped; `total`'s order), generic records, records, bytes; `drops` given (what the
 * difference cannot tell: the first full-scan drop of the rest).
 */
export function subtractTally(
  total: ReplayTally,
  part: ReplayTally,
  drops: PredictedDrop[],
): ReplayTally {
  const less = new Map(part.types.map((t) => [`${t.rmgr}/${t.type}`, t]));
  const types = total.types.flatMap((t) => {
    const p = less.get(`${t.rmgr}/${t.type}`);
    const count = t.count - (p?.count ?? 0);
    return count === 0 ? [] : [{ ...t, count, bytes: t.bytes - (p?.bytes ?? 0) }];
  });
  const counts = diffCounters(part.counts, total.counts);
  // By kind, only the kinds met (as a model counts them): those left at zero go.
  for (const byKind of [counts.records, counts.pgRecords] as Array<Record<string, number>>)
    for (const [k, v] of Object.entries(byKind)) if (v === 0) delete byKind[k];
  return {
    counts,
    types,
    genericRecords: total.genericRecords - part.genericRecords,
    records: total.records - part.records,
    walBytes: total.walBytes - part.walBytes,
    drops,
  };
}

/** A window's image: the head's state of every relation its journal names. */
function imageOf(states: Map<string, RelState>, journal: RelJournal): WindowImage {
  const rels = new Map<string, RelImage>();
  for (const [k, e] of journal.rels) {
    const r = states.get(k);
    if (r === undefined) {
      rels.set(k, { deleted: true });
      continue;
    }
    const forks = r.forks.map((st, f): ForkImage => {
      const newly = e.newly[f];
      return {
        exists: st.exists,
        cached: st.cached,
        size: st.size,
        truncFrom: e.truncFrom[f] ?? null,
        // Created in the window: all its resident blocks came in it.
        add: e.fresh
          ? [...st.resident]
          : newly === null || newly === undefined
            ? []
            : [...newly].filter((b) => st.resident.has(b)),
      };
    }) as ForkImages;
    rels.set(k, { deleted: false, existed: e.existed, fresh: e.fresh, node: r.node, forks });
  }
  return { forgot: journal.forgot, fullScan: journal.fullScan, rels };
}

/** The tail moved over a window: the same state as learning the window's records. */
function applyImage(tail: RecoveryModel, img: WindowImage): void {
  if (img.forgot) tail.forgetAllSizes();
  if (img.fullScan) tail.markDescriptorsMapped();
  const states = tail.relStates();
  for (const [k, ri] of img.rels) {
    if (ri.deleted) {
      states.delete(k);
      continue;
    }
    let r = states.get(k);
    if (ri.fresh || r === undefined) {
      const fork = () => ({
        exists: undefined,
        cached: false,
        size: undefined,
        resident: new Set<number>(),
      });
      r = { key: k, node: ri.node, forks: [fork(), fork(), fork(), fork()] };
      states.set(k, r);
    }
    for (const [f, fi] of ri.forks.entries()) {
      const st = r.forks[f]!;
      st.exists = fi.exists;
      st.cached = fi.cached;
      st.size = fi.size;
      if (fi.truncFrom !== null)
        for (const b of [...st.resident]) if (b >= fi.truncFrom) st.resident.delete(b);
      for (const b of fi.add) st.resident.add(b);
    }
  }
}

/** Two consecutive windows' images as one (applying it = applying `a` then `b`). */
function composeImages(a: WindowImage, b: WindowImage): WindowImage {
  const rels = new Map(a.rels);
  // `b` forgot every cached size: what `a` alone changed keeps its state, uncached.
  if (b.forgot)
    for (const [k, ri] of a.rels)
      if (!ri.deleted && !b.rels.has(k))
        rels.set(k, { ...ri, forks: ri.forks.map((f) => ({ ...f, cached: false })) as ForkImages });
  for (const [k, bi] of b.rels) {
    const ai = a.rels.get(k);
    // Created in `a`, dropped in `b`: the two windows leave no trace of it.
    const existedAtA = ai === undefined || ai.deleted || ai.existed;
    if (bi.deleted) {
      if (existedAtA) rels.set(k, bi);
      else rels.delete(k);
      continue;
    }
    if (bi.fresh || ai === undefined || ai.deleted) {
      rels.set(k, { ...bi, existed: existedAtA });
      continue;
    }
    const forks = bi.forks.map((fb, f): ForkImage => {
      const fa = ai.forks[f]!;
      const t = fb.truncFrom;
      const keptA = t === null ? fa.add : fa.add.filter((x) => x < t);
      return {
        ...fb,
        truncFrom:
          fa.truncFrom === null ? t : t === null ? fa.truncFrom : Math.min(fa.truncFrom, t),
        add: [...new Set([...keptA, ...fb.add])],
      };
    }) as ForkImages;
    rels.set(k, { deleted: false, existed: ai.existed, fresh: ai.fresh, node: bi.node, forks });
  }
  return { forgot: a.forgot || b.forgot, fullScan: a.fullScan || b.fullScan, rels };
}
