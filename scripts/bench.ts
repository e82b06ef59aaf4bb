/**
 * `npm run bench`: cost of dropping relation buffers at a realistic shared_buffers, plus the WAL codec.
 *
 * Usage: tsx scripts/bench.ts [--shared-buffers 100GB] [--runs 7] [--json]
 * Prints an aligned table; with --json the LAST line of stdout is one JSON object with the figures.
 *
 * Method. Build a pool of NBuffers, fill it completely with pages of 1000 relations (so a full scan
 * meets real tags everywhere), then, in the same process and with medians over `--runs`:
 *   - seqReadNsPerBuffer: sum pool.tagRel sequentially (a floating-point reference);
 *   - scanFloorNsPerBuffer: a plain loop comparing every tag of an Int32Array of NBuffers (a view
 *     of pool.tagRel) with a constant — the integer floor a full scan is held to (fullScanToFloor,
 *     paired per round, target ≤ 1.5);
 *   - fullScanNsPerBuffer: DropRelFileNodeBuffers of a 1000-block relation, pre-PG14 full scan
 *     (fullScanPreCheck says whether its pre-check ran in WebAssembly SIMD or JavaScript);
 *   - fullScanBsearchNsPerBuffer: DropRelFileNodesAllBuffers of 1000 relations (binary search);
 *   - lookupNsPerBlock: the PG14 lookup path (in recovery, size cached) on a relation of
 *     min(100,000, threshold - 1) blocks, all buffered; time per probe including the invalidation;
 *   - lookupMissNsPerBlock: the same probes again once nothing is buffered (mapping table only);
 *   - replayRecordsPerSec / replayNsPerHeapBlock: VACUUM of NB/8 at 8GB replayed as a standby's
 *     startup process does it (scripts/bench/replay.ts; `--replay-pages N` to change the size);
 *   - endToEndRecordsPerSec: a bulk INSERT through a real primary and standby, the second of two
 *     (warm JIT); endToEndColdRecordsPerSec the first (`--no-end-to-end` skips both).
 *   - pgWalReaderMiBPerSec / pgWaldumpMiBPerSec: PostgreSQL's own WAL (`--pg-wal-mib`, default
 *     1024 MiB, written once by a real PostgreSQL 15) read by pg-wal/ and by `pg_waldump
 *     --stats=record` for the same per-type counts, wall clock and CPU time (the *Cpu* figures,
 *     every thread of the process counted): the reader on one thread (its default) and
 *     pgWalWorker* with its CRC-32C worker thread; pgWalRecordsMiBPerSec the reader decoding an
 *     object per record; pgWalViews* predict's reading alone (the reader's views, counted);
 *     pgWalPredict* predict's path (the reader's views into the replay model);
 *     pgWalWorkerCrossover the worker against one thread over the first 8–256 MiB
 *     (scripts/bench/pg-wal.ts; `--no-pg-wal` skips it, as does a machine without PostgreSQL).
 */
import { BufferPool } from '../storage/buffer-pool.ts';
import {
  DEFAULT_DROP_SETTINGS,
  dropFullScanThreshold,
  dropRelFileNodeBuffers,
  dropRelFileNodesAllBuffers,
  type DropSettings,
} from '../storage/drop.ts';
import { formatSharedBuffers, parseSharedBuffers } from '../storage/shared-buffers.ts';
import { StorageManager } from '../storage/smgr.ts';
import { measureWalCodec } from './bench/codec.ts';
import { measureEndToEnd, measureVacuumReplay } from './bench/replay.ts';
import { measurePgWalReader } from './bench/pg-wal.ts';
import { MAIN_FORKNUM } from '../wal/records.ts';
import { exitWithUsageIfHelp, parseCli, positiveInt, UsageError } from './cli/command.ts';
import { exitWhenFlushed } from '../server/process-exit.ts';

const USAGE =
  'usage: npm run bench -- [--shared-buffers 100GB] [--runs 7] [--replay-pages 131072] [--no-end-to-end] [--pg-wal-mib 1024] [--no-pg-wal] [--json]';
await exitWithUsageIfHelp(process.argv.slice(2), USAGE);

const OPTIONS = {
  'shared-buffers': { type: 'string', default: '100GB' },
  runs: { type: 'string', default: '7' },
  'replay-pages': { type: 'string', default: '131072' },
  'no-end-to-end': { type: 'boolean' },
  'pg-wal-mib': { type: 'string', default: '1024' },
  'no-pg-wal': { type: 'boolean' },
  json: { type: 'boolean' },
} as const;

/** The options, read by the CLIs' one parser (cli/command.ts) and checked. */
function options() {
  const { values, positionals } = parseCli(process.argv.slice(2), OPTIONS, USAGE);
  if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"`);
  return {
    json: values.json === true,
    nBuffers: parseSharedBuffers(values['shared-buffers']).nBuffers,
    runs: positiveInt(values.runs, 'runs'),
    replayPages: positiveInt(values['replay-pages'], 'replay-pages'),
    endToEnd: values['no-end-to-end'] !== true,
    pgWalMiB: values['no-pg-wal'] === true ? 0 : positiveInt(values['pg-wal-mib'], 'pg-wal-mib'),
  };
}

/** A bad option is one `error:` line and the usage (exit 2), never a stack trace or a NaN table. */
async function optionsOrExit(): Promise<ReturnType<typeof options>> {
  try {
    return options();
  } catch (e) {
    const message = (e as Error).message;
    console.error(`error: ${message.endsWith(USAGE) ? message : `${message}\n${USAGE}`}`);
    return exitWhenFlushed(2);
  }
}
const { json, nBuffers, runs, replayPages, endToEnd, pgWalMiB } = await optionsOrExit();
const log = (line: string): void => {
  if (!json) console.log(line);
  else console.error(line);
};

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function nowNs(): number {
  return Number(process.hrtime.bigint());
}

const MiB = 2 ** 20;
const FILL_RELS = 1000;
const FIRST_REL = 16384;
const SCAN_REL = 900_000;
const LOOKUP_REL = 900_001;
const SCAN_REL_BLOCKS = Math.min(1000, Math.floor(nBuffers / 64));
const SCAN: DropSettings = { ...DEFAULT_DROP_SETTINGS, strategy: 'full-scan' };
const LOOKUP: DropSettings = DEFAULT_DROP_SETTINGS;
const threshold = dropFullScanThreshold(nBuffers, LOOKUP);
const lookupBlocks = Math.max(1, Math.min(100_000, threshold - 1));

log(
  `shared_buffers = ${formatSharedBuffers(nBuffers)} (${nBuffers} buffers), ${runs} runs, medians`,
);

// Pool construction.
const rssBefore = process.memoryUsage().rss;
let t = nowNs();
const pool = new BufferPool(nBuffers);
const poolInitMs = (nowNs() - t) / 1e6;
const rssAfterInit = process.memoryUsage().rss;
const bytesPerBuffer = pool.byteLength / nBuffers;

// Fill every buffer with pages of FILL_RELS relations (a standby that has replayed a lot).
const smgr = new StorageManager();
smgr.inRecovery = true;
const blocksPerRel = Math.ceil(nBuffers / FILL_RELS);
t = nowNs();
let filled = 0;
for (let r = 0; r < FILL_RELS && filled < nBuffers; r++) {
  const rel = FIRST_REL + r;
  smgr.create(rel, MAIN_FORKNUM);
  smgr.extend(rel, MAIN_FORKNUM, blocksPerRel - 1);
  for (let b = 0; b < blocksPerRel && filled < nBuffers; b++, filled++)
    pool.accessBlock(rel, MAIN_FORKNUM, b);
}
const fillNsPerRead = (nowNs() - t) / filled;
const rssAfterFill = process.memoryUsage().rss;

function loadRelation(rel: number, blocks: number): void {
  if (!smgr.exists(rel, MAIN_FORKNUM)) {
    smgr.create(rel, MAIN_FORKNUM);
    smgr.nblocks(rel, MAIN_FORKNUM);
    for (let b = 0; b < blocks; b++) smgr.extend(rel, MAIN_FORKNUM, b);
  }
  for (let b = 0; b < blocks; b++) pool.accessBlock(rel, MAIN_FORKNUM, b);
}

// Sequential read floor: one pass summing the Uint32Array a full scan reads.
let sink = 0;
function seqRead(): number {
  const a = pool.tagRel;
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]!;
  return s;
}

// The integer floor: the plainest tag-compare loop over the same 4 bytes per buffer.
const floorTags = new Int32Array(pool.tagRel.buffer, pool.tagRel.byteOffset, pool.tagRel.length);
function scanFloor(rel: number): number {
  let n = 0;
  for (let i = 0; i < floorTags.length; i++) if (floorTags[i] === rel) n++;
  return n;
}

const seqNs: number[] = [];
const floorNs: number[] = [];
/** Per-round full scan / integer floor. */
const floorRatios: number[] = [];
/** Per-round full scan / sequential read, paired so machine noise hits both alike. */
const ratios: number[] = [];
const scanNs: number[] = [];
const lookupNs: number[] = [];
const lookupMissNs: number[] = [];
let scanResult = dropRelFileNodeBuffers(pool, smgr, SCAN_REL, [MAIN_FORKNUM], [0], SCAN); // warm-up
let lookupResult = scanResult;
for (let k = 0; k < runs + 1; k++) {
  t = nowNs();
  sink += seqRead();
  const seq = nowNs() - t;
  t = nowNs();
  sink += scanFloor(SCAN_REL);
  const floor = nowNs() - t;

  loadRelation(SCAN_REL, SCAN_REL_BLOCKS);
  t = nowNs();
  scanResult = dropRelFileNodeBuffers(pool, smgr, SCAN_REL, [MAIN_FORKNUM], [0], SCAN);
  const scan = nowNs() - t;

  loadRelation(LOOKUP_REL, lookupBlocks);
  t = nowNs();
  lookupResult = dropRelFileNodeBuffers(pool, smgr, LOOKUP_REL, [MAIN_FORKNUM], [0], LOOKUP);
  const lookup = nowNs() - t;
  // Same probes again, now every one misses: the pure mapping-table cost.
  t = nowNs();
  const miss = dropRelFileNodeBuffers(pool, smgr, LOOKUP_REL, [MAIN_FORKNUM], [0], LOOKUP);
  const lookupMiss = nowNs() - t;
  if (miss.invalidated !== 0 || miss.path !== 'cached-lookup')
    throw new Error('bench: second lookup drop found buffers');
  if (k === 0) continue; // warm-up round for the JIT
  seqNs.push(seq / nBuffers);
  ratios.push(scan / seq);
  floorNs.push(floor / nBuffers);
  floorRatios.push(scan / floor);
  scanNs.push(scan / nBuffers);
  lookupNs.push(lookup / Math.max(1, lookupResult.probes));
  lookupMissNs.push(lookupMiss / Math.max(1, miss.probes));
}
if (scanResult.path !== 'full-scan' || scanResult.invalidated !== SCAN_REL_BLOCKS) {
  throw new Error(
    `bench: full scan dropped ${scanResult.invalidated} buffers via ${scanResult.path}`,
  );
}
if (lookupResult.path !== 'cached-lookup' || lookupResult.invalidated !== lookupBlocks) {
  throw new Error(
    `bench: lookup dropped ${lookupResult.invalidated} buffers via ${lookupResult.path}`,
  );
}

// The whole-relation drop of 1000 relations (seed Test B's DROP/TRUNCATE of 1000 tables), full scan.
const manyRels = Array.from({ length: 1000 }, (_, i) => 1_000_000 + i);
const bsearchNs: number[] = [];
for (let k = 0; k < Math.min(runs, 3); k++) {
  t = nowNs();
  const r = dropRelFileNodesAllBuffers(pool, smgr, manyRels, SCAN);
  bsearchNs.push((nowNs() - t) / nBuffers);
  if (r.matcher !== 'bsearch') throw new Error('bench: expected the bsearch matcher');
}

const wal = measureWalCodec();
await measureVacuumReplay('8GB', Math.min(replayPages, 4096)); // warm-up for the JIT, not reported
const replay = await measureVacuumReplay('8GB', replayPages);
const e2e = endToEnd ? await measureEndToEnd() : null;
const pgWal = pgWalMiB > 0 ? await measurePgWalReader(pgWalMiB, Math.min(runs, 3), log) : null;
const rssAfterAll = process.memoryUsage().rss;

const result = {
  sharedBuffers: formatSharedBuffers(nBuffers),
  nbuffers: nBuffers,
  bytesPerBuffer: Number(bytesPerBuffer.toFixed(2)),
  poolBytes: pool.byteLength,
  rssDeltaInitMiB: Number(((rssAfterInit - rssBefore) / MiB).toFixed(1)),
  rssDeltaFilledMiB: Number(((rssAfterFill - rssBefore) / MiB).toFixed(1)),
  rssDeltaFilledBytesPerBuffer: Number(((rssAfterFill - rssBefore) / nBuffers).toFixed(2)),
  poolInitMs: Number(poolInitMs.toFixed(1)),
  fillNsPerRead: Number(fillNsPerRead.toFixed(1)),
  seqReadNsPerBuffer: Number(median(seqNs).toFixed(3)),
  fullScanNsPerBuffer: Number(median(scanNs).toFixed(3)),
  fullScanToSeqRead: Number(median(ratios).toFixed(2)),
  scanFloorNsPerBuffer: Number(median(floorNs).toFixed(3)),
  fullScanToFloor: Number(median(floorRatios).toFixed(2)),
  fullScanMs: Number(((median(scanNs) * nBuffers) / 1e6).toFixed(2)),
  /** Which pre-check the full scans ran (storage/tag-scan.ts: SIMD from WASM_TAG_MIN_BUFFERS on). */
  fullScanPreCheck: pool.findTagBlock === null ? 'javascript' : 'wasm-simd',
  fullScanBsearchNsPerBuffer: Number(median(bsearchNs).toFixed(3)),
  thresholdBlocks: threshold,
  lookupBlocks,
  lookupNsPerBlock: Number(median(lookupNs).toFixed(1)),
  lookupMissNsPerBlock: Number(median(lookupMissNs).toFixed(1)),
  lookupMs: Number(((median(lookupNs) * lookupBlocks) / 1e6).toFixed(2)),
  walEncodeRecordsPerSec: Math.round(wal.walEncodeRecordsPerSec),
  walDecodeRecordsPerSec: Math.round(wal.walDecodeRecordsPerSec),
  replayPages: replay.pages,
  replayRecords: replay.records,
  replayRecordsPerSec: Math.round(replay.replayRecordsPerSec),
  replayNsPerHeapBlock: Math.round(replay.replayNsPerHeapBlock),
  endToEndRecords: e2e?.records ?? null,
  endToEndRecordsPerSec: e2e === null ? null : Math.round(e2e.endToEndRecordsPerSec),
  endToEndColdRecordsPerSec: e2e === null ? null : Math.round(e2e.endToEndColdRecordsPerSec),
  pgWalMiB: pgWal?.walMiB ?? null,
  pgWalRecords: pgWal?.records ?? null,
  pgWalReaderMiBPerSec: pgWal?.readerMiBPerSec ?? null,
  pgWaldumpMiBPerSec: pgWal?.waldumpMiBPerSec ?? null,
  pgWalReaderToWaldump: pgWal?.readerToWaldump ?? null,
  pgWalReaderCpuMiBPerSec: pgWal?.readerCpuMiBPerSec ?? null,
  pgWaldumpCpuMiBPerSec: pgWal?.waldumpCpuMiBPerSec ?? null,
  pgWalReaderToWaldumpCpu: pgWal?.readerToWaldumpCpu ?? null,
  pgWalWorkerMiBPerSec: pgWal?.workerMiBPerSec ?? null,
  pgWalWorkerCpuMiBPerSec: pgWal?.workerCpuMiBPerSec ?? null,
  pgWalRecordsMiBPerSec: pgWal?.recordsMiBPerSec ?? null,
  pgWalRecordsCpuMiBPerSec: pgWal?.recordsCpuMiBPerSec ?? null,
  pgWalViewsMiBPerSec: pgWal?.viewsMiBPerSec ?? null,
  pgWalViewsCpuMiBPerSec: pgWal?.viewsCpuMiBPerSec ?? null,
  pgWalPredictMiBPerSec: pgWal?.predictMiBPerSec ?? null,
  pgWalPredictCpuMiBPerSec: pgWal?.predictCpuMiBPerSec ?? null,
  pgWalPredictToWaldump: pgWal?.predictToWaldump ?? null,
  pgWalPredictToWaldumpCpu: pgWal?.predictToWaldumpCpu ?? null,
  pgWalWorkerCrossover: pgWal?.workerCrossover ?? null,
  pgWalReaderRssGrowthMiB: pgWal?.readerRssGrowthMiB ?? null,
  rssAfterAllMiB: Number((rssAfterAll / MiB).toFixed(0)),
  node: process.version,
  sink: sink % 2,
};

const rows: Array<[string, string]> = [
  ['nbuffers', String(result.nbuffers)],
  ['bytes/buffer (typed arrays)', `${result.bytesPerBuffer}  (target ≤ 32)`],
  [
    'RSS delta after init / fill',
    `${result.rssDeltaInitMiB} MiB / ${result.rssDeltaFilledMiB} MiB`,
  ],
  ['pool init', `${result.poolInitMs} ms  (target < 1000 ms at 100GB)`],
  ['fill (readBuffer miss)', `${result.fillNsPerRead} ns/read`],
  ['sequential read', `${result.seqReadNsPerBuffer} ns/buffer`],
  [
    'integer scan floor',
    `${result.scanFloorNsPerBuffer} ns/buffer (full scan ${result.fullScanToFloor} × floor; target ≤ 1.5)`,
  ],
  [
    'full-scan drop',
    `${result.fullScanNsPerBuffer} ns/buffer = ${result.fullScanMs} ms  (${result.fullScanToSeqRead} × seq; target ≤ 1.5; ${result.fullScanPreCheck} pre-check)`,
  ],
  ['full scan, 1000 rels (bsearch)', `${result.fullScanBsearchNsPerBuffer} ns/buffer`],
  [
    'lookup drop',
    `${result.lookupNsPerBlock} ns/block × ${lookupBlocks} = ${result.lookupMs} ms (threshold ${threshold})`,
  ],
  ['lookup probe, block not buffered', `${result.lookupMissNsPerBlock} ns/block`],
  ['WAL encode', `${result.walEncodeRecordsPerSec} records/s`],
  ['WAL decode', `${result.walDecodeRecordsPerSec} records/s`],
  [
    'VACUUM replay (startup process)',
    `${result.replayRecordsPerSec} records/s, ${result.replayNsPerHeapBlock} ns/heap block (target ≤ 3000)`,
  ],
  [
    'end to end (insert → replay)',
    `${result.endToEndRecordsPerSec ?? 'skipped'} records/s warm (target ≥ 500000), ${result.endToEndColdRecordsPerSec ?? 'skipped'} cold`,
  ],
  [
    'PostgreSQL WAL reader (pg-wal/)',
    pgWal === null
      ? 'skipped'
      : `${pgWal.readerMiBPerSec} MiB/s vs pg_waldump --stats=record ${pgWal.waldumpMiBPerSec} MiB/s, both on one thread (${pgWal.readerToWaldump}×; target ≥ 1) over ${pgWal.walMiB} MiB, ${pgWal.records} records, RSS +${pgWal.readerRssGrowthMiB} MiB`,
  ],
  [
    '  the same in CPU time',
    pgWal === null
      ? 'skipped'
      : `${pgWal.readerCpuMiBPerSec} MiB/s vs ${pgWal.waldumpCpuMiBPerSec ?? '?'} MiB/s (${pgWal.readerToWaldumpCpu ?? '?'}×)`,
  ],
  [
    '  with the CRC worker (2 threads)',
    pgWal === null
      ? 'skipped'
      : `${pgWal.workerMiBPerSec} MiB/s, ${pgWal.workerCpuMiBPerSec} MiB/s of CPU`,
  ],
  [
    '  an object per record (batches)',
    pgWal === null
      ? 'skipped'
      : `${pgWal.recordsMiBPerSec} MiB/s, ${pgWal.recordsCpuMiBPerSec} MiB/s of CPU`,
  ],
  [
    "  predict's reading (views, no model)",
    pgWal === null
      ? 'skipped'
      : `${pgWal.viewsMiBPerSec} MiB/s, ${pgWal.viewsCpuMiBPerSec} MiB/s of CPU`,
  ],
  [
    "  predict's path (views → model)",
    pgWal === null
      ? 'skipped'
      : `${pgWal.predictMiBPerSec} MiB/s (${pgWal.predictToWaldump}× pg_waldump), ${pgWal.predictCpuMiBPerSec} MiB/s of CPU (${pgWal.predictToWaldumpCpu ?? '?'}×)`,
  ],
  [
    '  CRC worker vs one thread (ms)',
    pgWal === null
      ? 'skipped'
      : pgWal.workerCrossover.map((c) => `${c.mib} MiB ${c.workerMs}/${c.oneThreadMs}`).join(', '),
  ],
];
const width = Math.max(...rows.map(([k]) => k.length));
for (const [k, v] of rows) log(`${k.padEnd(width)}  ${v}`);
if (json) console.log(JSON.stringify(result));
