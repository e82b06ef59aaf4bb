/**
 * Cost profiles: the constants that turn event counts into modeled PostgreSQL seconds, as JSON
 * (format `walsim-cost-profile/1`, documented in cost-model/README.md), and their loader.
 *
 * Entry points: `CostProfile`, `COST_CONSTANT_NAMES`, `CostConstantName`, `parseProfile(json, origin)`,
 * `loadProfile(nameOrFile)` (no argument: the default, decided here only), `profilePath(nameOrFile)`, `builtinProfileNames()`, `DEFAULT_PROFILE`, `profileToJson`.
 *
 * Every constant is seconds per one event of one counter; `per` names the event and `source` says
 * where the value came from (a fit, a measurement, or why it is zero). A profile missing a constant,
 * carrying an unknown one, or with a negative or non-finite value is refused with an error naming it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { WalsimError } from '../common/errors.ts';
import { PG_RECORD_KINDS, type PgRecordKind } from '../storage/replay-counts.ts';

export const PROFILE_FORMAT = 'walsim-cost-profile/1';
export const DEFAULT_PROFILE = 'seed-001';

/** Constants that are not per-record, with the event each is per. */
export const OTHER_CONSTANTS = {
  walByte: 'byte of walsim WAL replayed',
  'scan.single.cache':
    'descriptor visited by DropRelFileNodeBuffers, descriptor array within the last-level cache',
  'scan.single.memory':
    'descriptor visited by DropRelFileNodeBuffers, descriptor array larger than the last-level cache',
  'scan.multi.cache':
    'descriptor visited by DropRelFileNodesAllBuffers, descriptor array within the last-level cache',
  'scan.multi.memory':
    'descriptor visited by DropRelFileNodesAllBuffers, descriptor array larger than the last-level cache',
  'scan.preCheckHit': 'full-scan pre-check hit (buffer header lock + re-check)',
  'lookup.probe':
    'mapping-table probe of the lookup path (BufTableHashCode + partition lock + BufTableLookup)',
  'lookup.hit': 'probe that found a buffer (buffer header lock + re-check)',
  invalidate: 'buffer invalidated (InvalidateBuffer: mapping delete, freelist)',
  'dropCall.fullScan': 'drop call that took the full scan (per call)',
  'dropCall.lookup': 'drop call that took the lookup path (per call)',
  'dropCall.relList': 'drop call that walked a relation list (rel-list strategy, per call)',
  'dropCall.recoveryHash':
    'drop call that used the recovery hash (recovery-hash strategy, per call)',
  'list.step': 'relation-list element walked by rel-list / recovery-hash (header lock + re-check)',
  'scan.hashBuild.cache':
    'descriptor visited by the recovery hash build, descriptor array within the last-level cache',
  'scan.hashBuild.memory':
    'descriptor visited by the recovery hash build, descriptor array larger than the last-level cache',
  'hashBuild.insert': 'buffer inserted into the recovery hash by its build',
  'scan.descriptorPageMapped':
    "4 KiB page of the buffer descriptor array mapped into the startup process by its first full scan (a new process's first touch of a shared page)",
  'smgr.create': 'fork file created (mdcreate)',
  'smgr.extend': 'block appended (mdextend)',
  'smgr.truncate': 'fork file truncated (mdtruncate)',
  'smgr.unlink': 'fork file removed (mdunlink)',
  'smgr.unlinkNonEmpty':
    'fork file removed that held blocks, beyond smgr.unlink (mdunlinkfork truncates it to 0 first: its extents freed, a synchronous discard each on a discard mount)',
  'smgr.nblocks': 'fork size asked of the file (mdnblocks: lseek)',
  'smgr.segmentOpenFailed':
    'size query of a fork of whole 1 GB segments, beyond smgr.nblocks (mdnblocks finds its last segment full and fails to open the next: openat, ENOENT)',
  'fsm.update':
    'FSM update by redo (XLogRecordPageWithFreeSpace: FSM page read, locked, slot set) — PRUNE, VACUUM, and INSERT / MULTI_INSERT leaving < BLCKSZ/5 free',
  'multiInsert.tuple':
    'tuple placed by a HEAP2_MULTI_INSERT record (COPY: heap_xlog_multi_insert copies and PageAddItems each)',
  'controlFile.update':
    'pg_control rewrite + fsync (minRecoveryPoint during replay; DB_IN_PRODUCTION at promotion)',
  'endOfRecovery.timelineHistoryFile': 'timeline history file written + fsynced',
  'endOfRecovery.walSegmentInit':
    'WAL segment initialised on the new timeline (XLogInitNewTimeline copy)',
  'endOfRecovery.record': 'record written at end of recovery (XLOG_END_OF_RECOVERY)',
  'endOfRecovery.walFlush': 'WAL flush at end of recovery',
  'walSegment.prealloc':
    'WAL segment of the new timeline preallocated as recovery ends (PreallocXlogFiles: created, zero-filled, fsynced when the end of WAL lies in the last quarter of its segment)',
} as const;

export type RecordConstantName = `record.${PgRecordKind}`;
export type CostConstantName = RecordConstantName | keyof typeof OTHER_CONSTANTS;

export const COST_CONSTANT_NAMES: readonly CostConstantName[] = [
  ...PG_RECORD_KINDS.map((k) => `record.${k}` as const),
  ...(Object.keys(OTHER_CONSTANTS) as Array<keyof typeof OTHER_CONSTANTS>),
];

/** What one constant is per (for the docs and the profile's `per` field). */
export function constantPer(name: CostConstantName): string {
  return name.startsWith('record.')
    ? `PostgreSQL ${name.slice(7)} record replayed`
    : OTHER_CONSTANTS[name as keyof typeof OTHER_CONSTANTS];
}

export interface CostConstant {
  /** Seconds per event. */
  seconds: number;
  /** The event (one unit of the counter it multiplies). */
  per: string;
  /** Where the value came from. */
  source: string;
}

export interface CostProfile {
  format: typeof PROFILE_FORMAT;
  name: string;
  description: string;
  /**
   * Which per-descriptor scan cost applies: `.cache` while NBuffers × descriptorBytes fits in
   * llcBytes, `.memory` beyond (a full scan streams the descriptor array from memory).
   */
  cache: { llcBytes: number; descriptorBytes: number; source: string };
  /**
   * How the reference measured a failover: by polling for the end of recovery every `quantumS`
   * (pg_ctl promote's 100 ms), plus a fixed `offsetS` of its own. null: report the modeled time only.
   */
  promotionPoll: { quantumS: number; offsetS: number; source: string } | null;
  constants: Record<CostConstantName, CostConstant>;
  /**
   * The held-out error band of the fit the profile file carries (`fit.cells[].leaveOneOutPct`, the
   * leave-one-out predictions of `npm run calibrate`), read once with the profile; null when none.
   */
  fitBand: ProfileBand | null;
  /**
   * The PostgreSQL major the profile was fitted on: `pgMajor` in the file, else the major of
   * `fit.postgres` (the server `npm run calibrate` measured); null when the file names none.
   */
  pgMajor: number | null;
  /**
   * The probe `npm run calibrate` measured on the calibration machine (`fit.probe`), which predict
   * scales the I/O and memory terms from (machine-scale.ts); absent or null: none stored.
   */
  machineProbe?: MachineProbe | null;
}

/** One machine probe's figures, seconds per operation (machine-scale.ts scales by them). */
export interface MachineProbe {
  /** write 8 KiB + fsync of one small file, median. */
  fsyncS: number;
  /**
   * How `fsyncS` was measured: 'overwrite' — an allocated 8 KiB file opened read-write, its 8 KiB
   * overwritten at offset 0 and fsynced, as UpdateControlFile writes pg_control; absent — the
   * first probe's way (opened with truncation: the block freed and allocated again every round,
   * which on a `discard` mount adds a discard pg_control never pays). Only like is scaled by like.
   */
  fsyncMethod?: 'overwrite';
  /** create + unlink of one empty file, median per pair. */
  createUnlinkS: number;
  /** one 64-byte descriptor read in a scan of an array sized like the pool, per descriptor. */
  scanPerDescriptorS: number;
  /** The descriptors the scan covered (the pool it was sized like). */
  scanDescriptors: number;
}

export interface ProfileBand {
  /** Held-out cells in the profile's fit. */
  cells: number;
  medianAbsErrorPct: number;
  minErrorPct: number;
  maxErrorPct: number;
  within25Pct: number;
}

/** The calibration machine's probe of a profile JSON's `fit.probe`, null when absent or malformed. */
function probeOf(fit: unknown): MachineProbe | null {
  const p = isObject(fit) ? fit.probe : undefined;
  if (!isObject(p)) return null;
  const keys = ['fsyncS', 'createUnlinkS', 'scanPerDescriptorS', 'scanDescriptors'] as const;
  if (!keys.every((k) => typeof p[k] === 'number' && Number.isFinite(p[k]))) return null;
  const probe = Object.fromEntries(keys.map((k) => [k, p[k]])) as unknown as MachineProbe;
  return p.fsyncMethod === 'overwrite' ? { ...probe, fsyncMethod: 'overwrite' } : probe;
}

/** The band of a profile JSON's `fit.cells[].leaveOneOutPct` (a fraction), null when none. */
function fitBandOf(fit: unknown): ProfileBand | null {
  const cells = isObject(fit) ? fit.cells : undefined;
  if (!Array.isArray(cells)) return null;
  const errs = cells
    .map((c) => Number((c as { leaveOneOutPct?: unknown }).leaveOneOutPct) * 100)
    .filter(Number.isFinite)
    .sort((a, b) => a - b);
  if (errs.length === 0) return null;
  const abs = errs.map(Math.abs).sort((a, b) => a - b);
  const mid = abs.length >> 1;
  return {
    cells: errs.length,
    medianAbsErrorPct: abs.length % 2 ? abs[mid]! : (abs[mid - 1]! + abs[mid]!) / 2,
    minErrorPct: errs[0]!,
    maxErrorPct: errs[errs.length - 1]!,
    within25Pct: abs.filter((e) => e <= 25).length,
  };
}

function bad(origin: string, what: string): WalsimError {
  return new WalsimError('invalid_input', `cost profile ${origin}: ${what}`);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Upper bounds no real machine comes near: a profile past them (1e308 s per record) would price a
 * failover at Infinity s. Seconds per event ≤ 60; bytes ≤ 1 TiB.
 */
const MAX_SECONDS = 60;
const MAX_BYTES = 2 ** 40;

function num(
  origin: string,
  v: unknown,
  where: string,
  positive = false,
  max = MAX_SECONDS,
): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || (positive && v === 0) || v > max) {
    throw bad(
      origin,
      `${where} must be a ${positive ? 'positive' : 'non-negative'} finite number of at most ${max}, got ${JSON.stringify(v)}`,
    );
  }
  return v;
}

function str(origin: string, v: unknown, where: string): string {
  if (typeof v !== 'string')
    throw bad(origin, `${where} must be a string, got ${JSON.stringify(v)}`);
  return v;
}

/**
 * Constants added after profiles were written: a file without one priced its event at 0 (the
 * counter did not exist), and is read so.
 */
const LATER_CONSTANTS: Partial<Record<CostConstantName, CostConstant>> = {
  'scan.descriptorPageMapped': {
    seconds: 0,
    per: constantPer('scan.descriptorPageMapped'),
    source: 'absent from the file (written before the constant existed): 0',
  },
  'smgr.unlinkNonEmpty': {
    seconds: 0,
    per: constantPer('smgr.unlinkNonEmpty'),
    source: 'absent from the file (written before the constant existed): 0',
  },
  'smgr.segmentOpenFailed': {
    seconds: 0,
    per: constantPer('smgr.segmentOpenFailed'),
    source: 'absent from the file (written before the constant existed): 0',
  },
  'walSegment.prealloc': {
    seconds: 0,
    per: constantPer('walSegment.prealloc'),
    source: 'absent from the file (written before the constant existed): 0',
  },
};

/** Validate a parsed profile; `origin` names it in errors (a file path or profile name). */
export function parseProfile(json: unknown, origin: string): CostProfile {
  if (!isObject(json)) throw bad(origin, 'must be a JSON object');
  if (json.format !== PROFILE_FORMAT)
    throw bad(origin, `"format" must be "${PROFILE_FORMAT}", got ${JSON.stringify(json.format)}`);
  const known = new Set([
    'format',
    'name',
    'description',
    'cache',
    'promotionPoll',
    'constants',
    'fit',
    'pgMajor',
  ]);
  for (const k of Object.keys(json)) if (!known.has(k)) throw bad(origin, `unknown field "${k}"`);
  const name = str(origin, json.name, '"name"');
  if (!/^[A-Za-z0-9._-]+$/.test(name))
    throw bad(
      origin,
      `"name" must be letters, digits, ".", "_" or "-", got ${JSON.stringify(name)}`,
    );
  const cache = json.cache;
  if (!isObject(cache))
    throw bad(origin, '"cache" must be an object {llcBytes, descriptorBytes, source}');
  const poll = json.promotionPoll;
  if (poll !== null && !isObject(poll))
    throw bad(origin, '"promotionPoll" must be null or an object {quantumS, offsetS, source}');
  const constants = json.constants;
  if (!isObject(constants)) throw bad(origin, '"constants" must be an object');
  const names = new Set<string>(COST_CONSTANT_NAMES);
  for (const k of Object.keys(constants))
    if (!names.has(k))
      throw bad(origin, `unknown constant "${k}" (known: ${COST_CONSTANT_NAMES.join(', ')})`);
  const out = {} as Record<CostConstantName, CostConstant>;
  for (const k of COST_CONSTANT_NAMES) {
    const c = constants[k] ?? LATER_CONSTANTS[k];
    if (c === undefined) throw bad(origin, `constant "${k}" is missing`);
    if (!isObject(c)) throw bad(origin, `constant "${k}" must be an object {seconds, per, source}`);
    out[k] = {
      seconds: num(origin, c.seconds, `constants["${k}"].seconds`),
      per: str(origin, c.per ?? constantPer(k), `constants["${k}"].per`),
      source: str(origin, c.source, `constants["${k}"].source`),
    };
  }
  return {
    format: PROFILE_FORMAT,
    name,
    description: str(origin, json.description ?? '', '"description"'),
    cache: {
      llcBytes: num(origin, cache.llcBytes, 'cache.llcBytes', false, MAX_BYTES),
      descriptorBytes: num(origin, cache.descriptorBytes, 'cache.descriptorBytes', true, MAX_BYTES),
      source: str(origin, cache.source ?? '', 'cache.source'),
    },
    promotionPoll:
      poll === null || poll === undefined
        ? null
        : {
            quantumS: num(origin, poll.quantumS, 'promotionPoll.quantumS', true, 3600),
            offsetS: num(origin, poll.offsetS, 'promotionPoll.offsetS', false, 3600),
            source: str(origin, poll.source ?? '', 'promotionPoll.source'),
          },
    constants: out,
    fitBand: fitBandOf(json.fit),
    pgMajor: pgMajorOf(origin, json.pgMajor, json.fit),
    machineProbe: probeOf(json.fit),
  };
}

/** `pgMajor`, else the major in `fit.postgres` ("postgres (PostgreSQL) 15.18 …"), else null. */
function pgMajorOf(origin: string, v: unknown, fit: unknown): number | null {
  if (v !== undefined && v !== null) {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 10 || v > 99)
      throw bad(
        origin,
        `"pgMajor" must be a PostgreSQL major such as 15, got ${JSON.stringify(v)}`,
      );
    return v;
  }
  return pgMajorOfServer(isObject(fit) && typeof fit.postgres === 'string' ? fit.postgres : '');
}

/** The major in a server's version text ("postgres (PostgreSQL) 15.18 (Debian …)"), else null. */
export function pgMajorOfServer(text: string): number | null {
  const m = /PostgreSQL\)?\s+(\d+)(?:\.|beta|rc|devel)/.exec(text);
  return m === null ? null : Number(m[1]);
}

/** The folder of the shipped profiles. */
export const PROFILES_DIR = path.join(import.meta.dirname, 'profiles');

export function builtinProfileNames(): string[] {
  return fs
    .readdirSync(PROFILES_DIR)
    .filter((f) => f.endsWith('.json'))
    .map((f) => f.slice(0, -5))
    .sort();
}

/**
 * The file of a shipped profile name (`seed-001`) or of a path (anything containing a `/` or ending
 * in `.json`); an unknown name is refused, naming the shipped ones.
 */
export function profilePath(nameOrFile: string): { file: string; isFile: boolean } {
  const isFile =
    nameOrFile.includes('/') || nameOrFile.includes(path.sep) || nameOrFile.endsWith('.json');
  if (isFile) return { file: path.resolve(nameOrFile), isFile };
  if (!builtinProfileNames().includes(nameOrFile)) {
    throw new WalsimError(
      'invalid_input',
      `unknown cost profile "${nameOrFile}" (shipped: ${builtinProfileNames().join(', ')}; or give a file path)`,
    );
  }
  return { file: path.join(PROFILES_DIR, `${nameOrFile}.json`), isFile };
}

/**
 * A shipped profile by name (`seed-001`) or a profile file by path (anything containing a `/` or
 * ending in `.json`).
 */
export function loadProfile(nameOrFile?: string): CostProfile {
  if (nameOrFile === undefined) return defaultCostProfile();
  const { file, isFile } = profilePath(nameOrFile);
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new WalsimError(
      'invalid_input',
      `cannot read cost profile "${nameOrFile}": ${(e as Error).message}`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    // Not the parser's message: it quotes the file's start (`--profile /etc/passwd`).
    const at = /position (\d+)/.exec((e as Error).message)?.[1];
    throw new WalsimError(
      'invalid_input',
      `cost profile "${nameOrFile}" is not valid JSON${at === undefined ? '' : ` (at byte ${at})`}: give a profile file written by npm run calibrate, or a shipped name (${builtinProfileNames().join(', ')})`,
    );
  }
  return parseProfile(json, isFile ? file : nameOrFile);
}

/** Stable, readable JSON of a profile (constants in COST_CONSTANT_NAMES order), with optional fit report. */
export function profileToJson(p: CostProfile, fit?: unknown): string {
  const constants: Record<string, CostConstant> = {};
  for (const k of COST_CONSTANT_NAMES) constants[k] = p.constants[k];
  return (
    JSON.stringify(
      {
        format: p.format,
        name: p.name,
        description: p.description,
        cache: p.cache,
        promotionPoll: p.promotionPoll,
        ...(p.pgMajor === null ? {} : { pgMajor: p.pgMajor }),
        constants,
        ...(fit === undefined ? {} : { fit }),
      },
      null,
      2,
    ) + '\n'
  );
}

let defaultProfile: CostProfile | undefined;

/** The shipped default profile (DEFAULT_PROFILE), loaded once. */
export function defaultCostProfile(): CostProfile {
  defaultProfile ??= loadProfile(DEFAULT_PROFILE);
  return defaultProfile;
}
