/**
 * `npm run predict`'s work: for one live PostgreSQL 13–18 standby, read its state and its unreplayed
 * WAL range [replay LSN, receive LSN), turn every record into the cost model's counts
 * (replay-model.ts), price them with a cost profile (cost-model/price.ts) and say
 * what dominates; for several standbys, rank them beside the choice Patroni's defaults would make.
 * Read-only: every session is default_transaction_read_only and runs SELECTs only.
 *
 * Entry points: `predictStandby`, `predictedSeconds`, `rankStandbys`, `Prediction`,
 * `PATRONI_MAXIMUM_LAG_ON_FAILOVER`.
 */
import * as path from 'node:path';
import type pg from 'pg';
import { WalsimError } from '../../common/errors.ts';
import { formatLsn, parseLsn } from '../../wal/lsn.ts';
import { describeTarget, stopOf, type RecoveryTarget } from './recovery-target.ts';
import {
  promotionStepCounts,
  walSegmentsPreallocated,
  type FailoverCounts,
} from '../../storage/replay-counts.ts';
import { genericRecordSeconds, price } from '../../cost-model/price.ts';
import {
  builtinProfileNames,
  DEFAULT_PROFILE,
  PROFILES_DIR,
  profilePath,
  type CostProfile,
  type ProfileBand,
} from '../../cost-model/profile.ts';
import {
  RecoveryModel,
  withDescriptorPageMap,
  type PredictedDrop,
  type RecordTypeCount,
  type ReplayPrediction,
  type StandbyFiles,
} from './replay-model.ts';
import {
  checkStandby,
  connectServer,
  readPrimaryLsn,
  readStandbyState,
  redactUrl,
  type StandbyState,
} from './standby-state.ts';
import {
  checkPgdata,
  hasWalinspect,
  MissingWalError,
  walDirTimelineHistory,
  PgdataFiles,
  walinspectRecords,
  type RangeRead,
} from './wal-source.ts';
import { pgWalRecords } from './pg-wal-source.ts';
import type { PgMajor } from '../../pg-wal/format.ts';
import { pgDropRules, pgVersionOfNum, type PgDropRules } from '../../storage/pg-drop-rules.ts';
import { relKey, type ForkNumber, type PgWalRecord, type RelFileNode } from './wal-records.ts';
import { unmappedDescriptorPages } from '../postgres/startup-sched.ts';

/** Patroni's default maximum_lag_on_failover: 1 MB. */
export const PATRONI_MAXIMUM_LAG_ON_FAILOVER = 1048576;

/**
 * What the reader must know of a shipped profile: it was fitted on another machine. The default
 * (seed-001) on the seed's 2020 machine; the others on the project's calibration machine. null
 * for a profile file of one's own.
 */
export function profileNote(ref: string): string | null {
  const { file } = profilePath(ref);
  if (path.dirname(file) !== PROFILES_DIR) return null;
  const where =
    path.basename(file) === `${DEFAULT_PROFILE}.json`
      ? "the seed's 2020 machine (seed 001: Xeon E5-2637 v4, XFS)"
      : "the project's calibration machine";
  return `a shipped profile, fitted on ${where}, not this one: run npm run calibrate for this machine and pass its file with --profile`;
}

/**
 * The profile's PostgreSQL major beside the standby's: a profile that names none is read as 15
 * (every profile before majors were recorded was fitted on 15), and either case is said.
 */
export function profileMajor(
  p: CostProfile,
  standbyMajor: number,
): { pgMajor: number; majorNote: string | null } {
  const pgMajor = p.pgMajor ?? 15;
  const named = p.pgMajor === null ? ' (it names no major: read as 15)' : '';
  if (pgMajor !== standbyMajor) {
    // Name the standby's own shipped profile when there is one: fitted on its major, though on
    // the project's machine, it prices that major's counts with that major's constants.
    const own = `pg${standbyMajor}-calibrated-uncontended`;
    const shipped = builtinProfileNames().includes(own)
      ? `, or pass the shipped ${own} (fitted on ${standbyMajor}, on the project's calibration machine)`
      : '';
    return {
      pgMajor,
      majorNote: `profile ${p.name} was fitted on PostgreSQL ${pgMajor}${named}, this standby runs ${standbyMajor}: its seconds are ${pgMajor}'s constants on ${standbyMajor}'s counts — calibrate on ${standbyMajor} (npm run calibrate -- --pg-version ${standbyMajor}) and pass it with --profile${shipped}`,
    };
  }
  return {
    pgMajor,
    majorNote: named === '' ? null : `profile ${p.name} names no PostgreSQL major: read as 15`,
  };
}

export interface PredictInput {
  standby: string;
  pgdata?: string;
  primary?: string;
  profile: CostProfile;
  profileRef: string;
}

export interface Prediction {
  standby: string;
  state: StandbyState;
  paused: boolean;
  note: string;
  range: { from: string; to: string; bytes: number };
  /** The recovery target, when one is set: where it stops replay in or before the range. */
  recoveryTarget: TargetBound | null;
  source: RangeRead & { learnedFrom: string; learnedRecords: number };
  primary:
    | { url: string; currentLsn: string; walNotReceivedBytes: number }
    | { url: string; error: string }
    | null;
  /** Patroni's position for this member: max(received, replayed). */
  patroniPosition: string;
  counts: FailoverCounts;
  records: {
    total: number;
    bytes: number;
    generic: number;
    byType: Array<RecordTypeCount & { seconds: number }>;
  };
  drops: {
    calls: { fullScan: number; lookup: number };
    descriptorsScanned: number;
    probes: number;
    invalidated: number;
    list: PredictedDrop[];
  };
  predicted: {
    writableS: number;
    phases: { replayS: number; endOfRecoveryS: number; openForWritesS: number };
    replay: {
      recordsS: number;
      genericRecordsS: number;
      dropsS: number;
      smgrS: number;
      controlFileS: number;
    };
    byRmgr: Array<{ rmgr: string; records: number; seconds: number }>;
  };
  dominates: string;
  /**
   * The profile: the name inside it, what was passed, the file read, and for a shipped profile
   * which machine it was fitted on (not this one).
   */
  profile: {
    name: string;
    ref: string;
    file: string;
    band: ProfileBand | null;
    note: string | null;
    /** The major the profile was fitted on (15 when it names none, which `majorNote` says). */
    pgMajor: number;
    /** Said when the profile names no major, or another than the standby's; else null. */
    majorNote: string | null;
  };
  assumptions: string[];
  rules: {
    /** The standby's version's drop rules (storage/pg-drop-rules.ts): names, paths, cache. */
    drop: PgDropRules;
    sizeCached: string;
    invalidations: string;
  };
}

const fmtInt = (n: number) => n.toLocaleString('en-US');

/** pg_buffercache blocks of the relations that will be dropped or truncated (read-only). */
async function residentBlocks(c: pg.Client, nodes: RelFileNode[]): Promise<Map<string, number[]>> {
  const out = new Map<string, number[]>();
  if (nodes.length === 0) return out;
  const r = await c.query(
    `SELECT reltablespace::int8 AS spc, reldatabase::int8 AS db, relfilenode::int8 AS rel,
            relforknumber::int AS fork, relblocknumber::int8 AS blk
       FROM pg_buffercache WHERE relfilenode = ANY($1::oid[])`,
    [[...new Set(nodes.map((n) => n.rel))]],
  );
  for (const row of r.rows as Array<Record<string, string | number>>) {
    const k = `${row.spc}/${row.db}/${row.rel}#${row.fork}`;
    let a = out.get(k);
    if (a === undefined) out.set(k, (a = []));
    a.push(Number(row.blk));
  }
  return out;
}

/** The relations the range drops or truncates (a cheap first pass when pg_buffercache is read). */
function droppedNodes(rec: PgWalRecord, into: RelFileNode[]): void {
  if (rec.truncate) into.push(rec.truncate.node);
  if (rec.dropRels) into.push(...rec.dropRels);
}

/**
 * Reads a WAL range record by record (pg-wal/ or pg_waldump on the standby's pg_wal, or
 * pg_walinspect). The record handed to `onRecord` is valid during the call only (the pg-wal/
 * source refills one object): a caller keeps values or a copy, never the object.
 */
export type ReadRange = (
  from: string,
  to: string,
  onRecord: (r: PgWalRecord) => void,
) => Promise<RangeRead>;

/** The sessions a prediction opens; predictStandby ends them whatever happens. */
export interface Sessions {
  standby: pg.Client;
  primary: pg.Client | null;
}

export async function predictStandby(input: PredictInput): Promise<Prediction> {
  const sessions: Sessions = {
    standby: await connectServer(input.standby, 'standby'),
    primary: null,
  };
  try {
    return await predictWith(sessions, input);
  } finally {
    await sessions.standby.end().catch(() => {});
    await sessions.primary?.end().catch(() => {});
  }
}

/** What a prediction reads before any WAL: the standby's state, its range, how to read it. */
export interface RangeSetup {
  st: StandbyState;
  /** [replay LSN, receive LSN). */
  from: string;
  to: string;
  /** --pgdata's pg_wal, null when pg_walinspect on the primary is read instead. */
  walDir: string | null;
  primaryInfo: Prediction['primary'];
  read: ReadRange;
  dropRules: PgDropRules;
  /** Descriptor pages the startup process has not mapped (its page map); null: not readable. */
  unmappedDescriptorPages: number | null;
}

/** The standby's state (checked), the unreplayed range, the primary's LSN, the range reader. */
export async function setUpRange(sessions: Sessions, input: PredictInput): Promise<RangeSetup> {
  const st = await readStandbyState(sessions.standby, input.standby);
  checkStandby(st);
  const from = st.replayLsn!;
  // Replay stops at the end of what was received; a replay LSN past the receive LSN (WAL from
  // the archive or pg_wal at startup) leaves nothing unreplayed.
  const received =
    st.receiveLsn !== null && parseLsn(st.receiveLsn) > parseLsn(from) ? st.receiveLsn : from;
  const walDir = input.pgdata !== undefined ? checkPgdata(input.pgdata, st) : null;
  checkTargetReadable(st, walDir);
  const primaryInfo = await connectPrimary(sessions, input, st, walDir);
  const read = await rangeReader(sessions.primary, input, st, walDir, from, received);
  const dropRules = pgDropRules(pgVersionOfNum(st.versionNum));
  const unmappedDescriptorPages = await unmappedDescriptorPagesOf(sessions.standby, input.pgdata);
  return {
    st,
    from,
    to: received,
    walDir,
    primaryInfo,
    read,
    dropRules,
    unmappedDescriptorPages,
  };
}

/** The standby's files (--pgdata's sizes) and buffers (pg_buffercache's, when `resident`). */
export function standbyFiles(
  input: PredictInput,
  resident: Map<string, number[]> | null,
): StandbyFiles {
  const pgdataFiles =
    input.pgdata !== undefined ? new PgdataFiles(path.resolve(input.pgdata)) : null;
  return {
    diskBlocks: (n: RelFileNode, f: ForkNumber) => pgdataFiles?.diskBlocks(n, f),
    residentBlocks: (n: RelFileNode, f: ForkNumber) =>
      resident === null ? undefined : (resident.get(`${relKey(n)}#${f}`) ?? []),
  };
}

/**
 * How many 4 KiB pages of the buffer descriptor array the standby's startup process has not
 * mapped: its /proc/<pid>/pagemap (predict on the standby's host, --pgdata given, as the
 * postgres user or root) at the array's place in shared memory (pg_shmem_allocations, readable by
 * superusers and pg_read_all_stats). null when any of it is out of reach.
 */
export async function unmappedDescriptorPagesOf(
  standby: pg.Client,
  pgdata: string | undefined,
): Promise<number | null> {
  if (pgdata === undefined) return null;
  try {
    const r = await standby.query(
      "SELECT off::float8 AS off, allocated_size::float8 AS size FROM pg_shmem_allocations WHERE name = 'Buffer Descriptors'",
    );
    const row = r.rows[0] as { off: number; size: number } | undefined;
    if (row === undefined) return null;
    return unmappedDescriptorPages(path.resolve(pgdata), row.off, row.size)?.unmapped ?? null;
  } catch {
    return null;
  }
}

async function predictWith(sessions: Sessions, input: PredictInput): Promise<Prediction> {
  const setup = await setUpRange(sessions, input);
  const { st, from, to, read } = setup;
  // Buffers of the relations the range drops: pg_buffercache when installed (first pass).
  let resident: Map<string, number[]> | null = null;
  if (st.hasBuffercache) {
    const nodes: RelFileNode[] = [];
    await read(from, to, (r) => droppedNodes(r, nodes));
    resident = await residentBlocks(sessions.standby, nodes);
  }
  const files = standbyFiles(input, resident);
  const model = new RecoveryModel(st.nBuffers, files, resident !== null, setup.dropRules);
  const stops = stopFinder(st.recoveryTarget);
  const learned = await learnCachedSizes(read, model, st.restartpointRedoLsn, from, stops.seen);
  const bound = await replayBounded(read, model, st, from, to, stops.reached());
  return assemblePrediction(
    setup,
    input,
    model.result(),
    bound.src,
    learned,
    resident !== null,
    bound,
  );
}

/**
 * The prediction from the modeled replay of [from, to) (`rp`), priced with the profile.
 * `learned`: the records read from the last restartpoint's redo to `from`.
 */
export function assemblePrediction(
  setup: RangeSetup,
  input: PredictInput,
  walRp: ReplayPrediction,
  src: RangeRead,
  learned: number,
  residentKnown: boolean,
  bound: { to: string; target: TargetBound | null } = { to: setup.to, target: null },
): Prediction {
  const { st, from, dropRules } = setup;
  const { to, target } = bound;
  const rp = withDescriptorPageMap(walRp, setup.unmappedDescriptorPages);
  const learnFrom = st.restartpointRedoLsn;
  // EndOfLog: the end of the last record replay reaches (pg-wal says where the next would start;
  // a received range may end inside a record), else the range's end.
  const endOfLog = target === null && src.nextLsn !== undefined ? src.nextLsn : to;
  const preallocs = walSegmentsPreallocated(parseLsn(endOfLog), st.walSegmentSize);
  const { counts, byType, drops, predicted } = pricePrediction(
    rp,
    preallocs,
    st.nBuffers,
    input.profile,
  );
  const recv = parseLsn(st.receiveLsn ?? from);
  const rep = parseLsn(st.replayLsn!);
  return {
    standby: st.url,
    state: st,
    paused: st.pauseState !== 'not paused',
    note: [...predictionNotes(st, from, to), ...(target !== null ? [target.note] : [])].join('; '),
    recoveryTarget: target,
    range: { from, to, bytes: parseLsn(to) - parseLsn(from) },
    source: { ...src, learnedFrom: learnFrom, learnedRecords: learned },
    primary: setup.primaryInfo,
    patroniPosition: recv >= rep ? (st.receiveLsn ?? from) : st.replayLsn!,
    counts,
    records: { total: rp.records, bytes: rp.walBytes, generic: rp.genericRecords, byType },
    drops,
    predicted,
    dominates: dominates(predicted, drops, st.nBuffers, byType),
    profile: {
      name: input.profile.name,
      ref: input.profileRef,
      file: profilePath(input.profileRef).file,
      band: input.profile.fitBand,
      note: profileNote(input.profileRef),
      ...profileMajor(input.profile, Math.floor(st.versionNum / 10000)),
    },
    assumptions: rp.assumptions,
    rules: {
      drop: dropRules,
      sizeCached: !dropRules.cachedLookup
        ? `PostgreSQL ${dropRules.major} caches no relation sizes: every drop scans all NBuffers descriptors`
        : `a fork's size is cached iff replay read, extended or truncated it since the startup process began (WAL read from the last restartpoint's redo ${learnFrom}: ${fmtInt(learned)} records); a relation created and never written, or touched only before the standby restarted, is not`,
      invalidations: residentKnown
        ? 'buffers to invalidate: pg_buffercache now, plus the blocks the range reads'
        : 'buffers to invalidate: the blocks replay read since the standby started (pg_buffercache not installed)',
    },
  };
}

/**
 * --primary: its current LSN (WAL not yet received). A primary that is down is only an error when
 * there is no pg_wal to read instead (a failover: the standby's pg_wal is enough).
 */
async function connectPrimary(
  sessions: Sessions,
  input: PredictInput,
  st: StandbyState,
  walDir: string | null,
): Promise<Prediction['primary']> {
  if (input.primary === undefined) return null;
  try {
    sessions.primary = await connectServer(input.primary, 'primary');
    const lsn = await readPrimaryLsn(
      sessions.primary,
      input.primary,
      Math.floor(st.versionNum / 10000),
    );
    return {
      url: redactUrl(input.primary),
      currentLsn: lsn,
      walNotReceivedBytes: Math.max(0, parseLsn(lsn) - parseLsn(st.receiveLsn ?? st.replayLsn!)),
    };
  } catch (e) {
    if (walDir === null) throw e;
    const primaryInfo = { url: redactUrl(input.primary), error: (e as Error).message };
    await sessions.primary?.end().catch(() => {});
    sessions.primary = null;
    return primaryInfo;
  }
}

/**
 * How the WAL is read: the pg-wal/ reader on --pgdata's pg_wal (pg_waldump reads the same
 * records: test/integration/pg-wal-reader.test.ts checks them field for field, and predict's own
 * test counts them against pg_waldump --stats), else pg_walinspect on the primary.
 */
async function rangeReader(
  primary: pg.Client | null,
  input: PredictInput,
  st: StandbyState,
  walDir: string | null,
  from: string,
  to: string,
): Promise<ReadRange> {
  if (walDir === null && primary === null)
    throw new WalsimError(
      'invalid_input',
      `no way to read the WAL range ${from} → ${to} of ${st.url}: pass --pgdata DIR (the standby's data directory, for pg_waldump) or --primary URL (a primary with CREATE EXTENSION pg_walinspect)`,
    );
  if (walDir === null && !(await hasWalinspect(primary!)))
    throw new WalsimError(
      'invalid_input',
      `the primary ${redactUrl(input.primary!)} has no pg_walinspect in its database, and no --pgdata was given: run CREATE EXTENSION pg_walinspect on the primary (predict never writes to a server) or pass --pgdata`,
    );
  const history = walDir !== null ? walDirTimelineHistory(walDir, st.timeline) : [];
  const remedy =
    walDir === null
      ? "; pass --pgdata DIR, the standby's data directory (its pg_wal keeps the WAL it received until its next restartpoint)"
      : input.primary === undefined
        ? '; pass --primary URL to read the range from a primary that still has it (with pg_walinspect)'
        : "; --primary is read only without --pgdata: leave --pgdata out to read the range with the primary's pg_walinspect";
  return async (a, b, onRecord) => {
    try {
      return walDir !== null
        ? await pgWalRecords(walDir, history, a, b, onRecord, standbyMajor(st))
        : await walinspectRecords(primary!, redactUrl(input.primary!), a, b, onRecord);
    } catch (e) {
      if (e instanceof MissingWalError) throw new MissingWalError(e.message + remedy);
      throw e;
    }
  };
}

/** Where a recovery target stopped (or will stop) replay: before or after which record. */
interface ReachedStop {
  when: 'before' | 'after';
  /** The record's start. */
  lsn: string;
  /** rmgr/type of the record. */
  what: string;
}

/** The recovery target and what it does to the range, for the answer and `--json`. */
export interface TargetBound {
  setting: string;
  /** The stop: already reached (replay paused at it), in the range, or not within the range. */
  stop: (ReachedStop & { reached: boolean }) | null;
  /** Bytes of the received range past the stop, which promotion does not replay. */
  notReplayedBytes: number;
  note: string;
}

const recordName = (r: PgWalRecord) => `${r.rmgr}/${r.type}`;

/**
 * A target by xid, time or restore point is read from each commit's or restore point's main data,
 * which only the pg-wal/ reader of --pgdata decodes (pg_walinspect's rows carry no commit time).
 */
function checkTargetReadable(st: StandbyState, walDir: string | null): void {
  const t = st.recoveryTarget;
  if (t === null || walDir !== null || t.kind === 'lsn' || t.kind === 'immediate') return;
  throw new WalsimError(
    'invalid_input',
    `${st.url} has ${describeTarget(t)}: where it stops replay is read from the records' own data, which needs --pgdata DIR (the standby's data directory)`,
  );
}

/**
 * Replay the range into the model up to where PostgreSQL's startup process stops: the recovery
 * target (recoveryStopsBefore / recoveryStopsAfter), else the end of what was received. A
 * standby that already reached its target replays nothing more: resuming or promoting it ends
 * recovery there. A standby that never streamed (receive LSN NULL) is bounded only that way.
 */
async function replayBounded(
  read: ReadRange,
  model: RecoveryModel,
  st: StandbyState,
  from: string,
  received: string,
  reached: ReachedStop | null,
): Promise<{ src: RangeRead; to: string; target: TargetBound | null }> {
  const t = st.recoveryTarget;
  if (reached === null && st.receiveLsn === null)
    throw new WalsimError(
      'invalid_input',
      `${st.url} has received no WAL by streaming (pg_last_wal_receive_lsn() is NULL) and has not reached a recovery target${t === null ? '' : ` (${describeTarget(t)})`}: the WAL it would replay from pg_wal past ${from} has no known end — let it stream from its primary first`,
    );
  if (t === null)
    return { src: await read(from, received, (r) => model.replay(r)), to: received, target: null };
  const setting = describeTarget(t);
  const bytesPast = (lsn: string) => Math.max(0, parseLsn(received) - parseLsn(lsn));
  if (reached !== null) {
    const src = await read(from, from, () => {});
    const note = `a recovery target bounds the range: ${setting} was reached ${reached.when} ${reached.what} at ${reached.lsn} and replay is paused there; promotion (or pg_wal_replay_resume()) ends recovery without replaying the ${bytesPast(from)} bytes received past ${from}`;
    return {
      src,
      to: from,
      target: {
        setting,
        stop: { ...reached, reached: true },
        notReplayedBytes: bytesPast(from),
        note,
      },
    };
  }
  let stop: ReachedStop | null = null;
  let to = received;
  const src = await read(from, received, (r) => {
    if (stop !== null) return;
    const s = stopOf(t, r);
    if (s !== 'before') model.replay(r);
    if (s === null) return;
    stop = { when: s, lsn: formatLsn(r.lsn), what: recordName(r) };
    to = s === 'before' ? formatLsn(r.lsn) : formatLsn(r.endLsn ?? r.lsn + r.totalLength);
  });
  const found = stop as ReachedStop | null;
  const note =
    found === null
      ? `a recovery target is set (${setting}) and is not reached within the range: all of it is replayed`
      : `a recovery target bounds the range: ${setting} stops replay ${found.when} ${found.what} at ${found.lsn}; the ${bytesPast(to)} bytes received past ${to} are not replayed`;
  const bound = {
    setting,
    stop: found === null ? null : { ...found, reached: false },
    notReplayedBytes: bytesPast(to),
    note,
  };
  return { src, to, target: bound };
}

/** The standby's major, for the WAL reader (readStandbyState accepted only 13–18). */
function standbyMajor(st: StandbyState): PgMajor {
  return Math.floor(st.versionNum / 10000) as PgMajor;
}

/**
 * What the startup process has cached: the WAL it replayed since the redo point it started from.
 * pg_control's last restartpoint redo is at or after that point (an earlier touch is missed: the
 * relation is then predicted uncached, i.e. a full scan). Returns the records read.
 */
export async function learnCachedSizes(
  read: ReadRange,
  model: RecoveryModel,
  learnFrom: string,
  from: string,
  seen: (r: PgWalRecord) => void = () => {},
): Promise<number> {
  let learned = 0;
  if (parseLsn(learnFrom) < parseLsn(from)) {
    try {
      await read(learnFrom, from, (r) => {
        learned += 1;
        model.learn(r);
        seen(r);
      });
    } catch (e) {
      throw new WalsimError(
        'invalid_input',
        `cannot read the WAL replayed since the last restartpoint (${learnFrom} → ${from}), which says which relation sizes replay has cached: ${(e as Error).message}`,
      );
    }
  }
  return learned;
}

/**
 * A recovery target's first stop among records already replayed, as `learnCachedSizes`' `seen`
 * sees them: one means the standby reached its target (and is paused there).
 */
function stopFinder(target: RecoveryTarget | null): {
  seen: (r: PgWalRecord) => void;
  reached: () => ReachedStop | null;
} {
  let reached: ReachedStop | null = null;
  return {
    seen: (r) => {
      const stop = target === null || reached !== null ? null : stopOf(target, r);
      if (stop !== null) reached = { when: stop, lsn: formatLsn(r.lsn), what: recordName(r) };
    },
    reached: () => reached,
  };
}

/**
 * The prediction's seconds from its counts: the profile's price of the counts plus, in the replay
 * phase, the generic per-record cost of the records whose type has no constant of its own. Pure:
 * a stored prediction's counts can be priced again with another profile (predict-bench).
 */
export function predictedSeconds(
  counts: FailoverCounts,
  genericRecords: number,
  nBuffers: number,
  profile: CostProfile,
): {
  m: ReturnType<typeof price>;
  genericS: number;
  phases: { replayS: number; endOfRecoveryS: number; openForWritesS: number };
  writableS: number;
} {
  const m = price({ counts, nBuffers }, profile);
  const genericS = genericRecords * genericRecordSeconds(profile);
  const phases = { ...m.phases, replayS: m.phases.replayS + genericS };
  return {
    m,
    genericS,
    phases,
    writableS: phases.replayS + phases.endOfRecoveryS + phases.openForWritesS,
  };
}

/** The modeled replay priced with the profile: phases, per record type and rmgr, the drops. */
function pricePrediction(
  rp: ReplayPrediction,
  walSegmentPreallocs: number,
  nBuffers: number,
  profile: CostProfile,
): Pick<Prediction, 'counts' | 'drops' | 'predicted'> & {
  byType: Prediction['records']['byType'];
} {
  const counts: FailoverCounts = {
    replay: rp.counts,
    ...promotionStepCounts(walSegmentPreallocs),
  };
  const { m, genericS, phases, writableS } = predictedSeconds(
    counts,
    rp.genericRecords,
    nBuffers,
    profile,
  );
  const generic = genericRecordSeconds(profile);
  const perType = (t: RecordTypeCount) =>
    t.count * (t.kind === null ? generic : profile.constants[`record.${t.kind}`].seconds);
  // A total order (ties by name): the exporter's counts by type come in no first-seen order.
  const byType = rp.types
    .map((t) => ({ ...t, seconds: perType(t) }))
    .sort(
      (a, b) =>
        b.seconds - a.seconds ||
        b.count - a.count ||
        (a.rmgr < b.rmgr
          ? -1
          : a.rmgr > b.rmgr
            ? 1
            : a.type < b.type
              ? -1
              : a.type > b.type
                ? 1
                : 0),
    );
  const rmgrs = new Map<string, { rmgr: string; records: number; seconds: number }>();
  for (const t of byType) {
    const x = rmgrs.get(t.rmgr) ?? { rmgr: t.rmgr, records: 0, seconds: 0 };
    x.records += t.count;
    x.seconds += t.seconds;
    rmgrs.set(t.rmgr, x);
  }
  const d = rp.counts.drops;
  const drops: Prediction['drops'] = {
    calls: { fullScan: d.drops['full-scan'], lookup: d.drops['cached-lookup'] },
    descriptorsScanned:
      d.scannedByMatcher.single + d.scannedByMatcher.linear + d.scannedByMatcher.bsearch,
    probes: d.probes,
    invalidated: d.invalidated,
    list: rp.drops,
  };
  const predicted: Prediction['predicted'] = {
    writableS,
    phases,
    replay: { ...m.replay, genericRecordsS: genericS },
    byRmgr: [...rmgrs.values()].sort((a, b) => b.seconds - a.seconds),
  };
  return { counts, byType, drops, predicted };
}

/** What the reader of a prediction should know about the standby's state. */
function predictionNotes(st: StandbyState, from: string, to: string): string[] {
  const notes: string[] = [];
  if (st.pauseState !== 'not paused')
    notes.push(
      `replay is ${st.pauseState}: the time counts from pg_wal_replay_resume() (promotion does not resume a paused standby)`,
    );
  if (st.walreceiver === null)
    notes.push(
      'no walreceiver is running (primary gone or disconnected): the range ends at the WAL received so far',
    );
  if (to === from)
    notes.push('nothing is left to replay: the prediction is the end of recovery only');
  return notes;
}

function dominates(
  p: Prediction['predicted'],
  drops: Prediction['drops'],
  nBuffers: number,
  byType: Array<RecordTypeCount & { seconds: number }>,
): string {
  const total = p.writableS;
  const share = (s: number) => `${s.toFixed(3)} s of ${total.toFixed(3)} s`;
  const parts: Array<[number, string]> = [
    [
      p.replay.recordsS + p.replay.genericRecordsS,
      `Replaying records dominates (${share(p.replay.recordsS + p.replay.genericRecordsS)})${
        byType[0]
          ? `, most of it ${byType[0].rmgr}/${byType[0].type} × ${fmtInt(byType[0].count)}`
          : ''
      }.`,
    ],
    [
      p.replay.dropsS,
      drops.calls.fullScan > 0
        ? `Buffer drops dominate (${share(p.replay.dropsS)}): ${fmtInt(drops.calls.fullScan)} full scan${drops.calls.fullScan === 1 ? '' : 's'} of all ${fmtInt(nBuffers)} descriptors${
            drops.list.find((x) => x.path === 'full-scan')
              ? ` (first: ${drops.list.find((x) => x.path === 'full-scan')!.why})`
              : ''
          }.`
        : `Buffer drops dominate (${share(p.replay.dropsS)}): ${fmtInt(drops.calls.lookup)} lookups, ${fmtInt(drops.probes)} probes.`,
    ],
    [
      p.replay.controlFileS,
      `pg_control rewrites dominate (${share(p.replay.controlFileS)}): one per replayed truncation or relation-dropping commit.`,
    ],
    [
      p.replay.smgrS,
      `File operations dominate (${share(p.replay.smgrS)}): creating, truncating and unlinking relation forks.`,
    ],
    [
      p.phases.endOfRecoveryS + p.phases.openForWritesS,
      `Ending recovery dominates (${share(p.phases.endOfRecoveryS + p.phases.openForWritesS)}): timeline history file, new segment, end-of-recovery record and pg_control; the backlog itself is small.`,
    ],
  ];
  parts.sort((a, b) => b[0] - a[0]);
  return parts[0]![1];
}

export interface Ranked {
  standby: string;
  writableS: number;
  paused: boolean;
  walNotReceivedBytes: number;
  replayBacklogBytes: number;
  patroniLagBytes: number;
  patroniEligible: boolean;
}

/**
 * Rank standbys by predicted time to writable, and say which one Patroni's defaults would promote:
 * lag = leader position − max(received, replayed) ≤ maximum_lag_on_failover (1 MB); among those
 * the furthest ahead. The leader position is the primary's current LSN when reachable, else the
 * furthest standby's position.
 */
export function rankStandbys(ps: Prediction[]): {
  rows: Ranked[];
  leaderPosition: string;
  leaderFrom: string;
  /** Patroni's pick; null when none is eligible or on a tie. */
  patroniPick: string | null;
  /**
   * Eligible standbys at the same furthest position, by name: Patroni's members race for the
   * leader key and any may win, so no definite pick is named. null without a tie.
   */
  patroniTie: string[] | null;
  writableFirst: string;
} {
  const prim = ps
    .map((p) => p.primary)
    .find(
      (x): x is { url: string; currentLsn: string; walNotReceivedBytes: number } =>
        x !== null && 'currentLsn' in x,
    );
  const positions = ps.map((p) => parseLsn(p.patroniPosition));
  const leader = prim !== undefined ? parseLsn(prim.currentLsn) : Math.max(...positions);
  const rows: Ranked[] = ps.map((p, i) => {
    const lag = Math.max(0, leader - positions[i]!);
    return {
      standby: p.standby,
      writableS: p.predicted.writableS,
      paused: p.paused,
      walNotReceivedBytes: Math.max(0, leader - parseLsn(p.state.receiveLsn ?? p.range.from)),
      replayBacklogBytes: p.range.bytes,
      patroniLagBytes: lag,
      patroniEligible: lag <= PATRONI_MAXIMUM_LAG_ON_FAILOVER,
    };
  });
  const eligible = rows.map((_, i) => i).filter((i) => rows[i]!.patroniEligible);
  const best = Math.max(...eligible.map((i) => positions[i]!));
  const top = eligible.filter((i) => positions[i] === best);
  const pick = top.length === 1 ? top[0]! : null;
  const tie = top.length > 1 ? top.map((i) => rows[i]!.standby).sort() : null;
  const first = rows.reduce((b, r, i) => (r.writableS < rows[b]!.writableS ? i : b), 0);
  return {
    rows: [...rows].sort((a, b) => a.writableS - b.writableS),
    leaderPosition: prim?.currentLsn ?? ps[positions.indexOf(leader)]!.patroniPosition,
    leaderFrom:
      prim !== undefined
        ? `the primary's pg_current_wal_lsn()`
        : 'the furthest standby (no primary reachable)',
    patroniPick: pick === null ? null : rows[pick]!.standby,
    patroniTie: tie,
    writableFirst: rows[first]!.standby,
  };
}
