/**
 * PostgreSQL major (and minor) → the rules replay follows when it drops relation buffers: which
 * functions it calls, whether the cached-size lookup path exists, when a fork's size is cached at
 * the drop, and which records make the startup process forget every cached size. One table, read
 * by everything that needs a version's rules (predict's replay model, walsim nodes following a
 * chosen major, the drop-tracing tests); no I/O.
 *
 * Each rule, with its PostgreSQL source (bufmgr.c, smgr.c, catalog/storage.c smgr_redo,
 * commands/dbcommands.c dbase_redo, xlogutils.c XLogDropDatabase) and the binaries' symbols:
 *
 * 1. 13 has no size cache (no smgrnblocks_cached, no FindAndDrop*: never backpatched):
 *    DropRelFileNodeBuffers and DropRelFileNodesAllBuffers always scan all NBuffers descriptors.
 * 2. 14 added the lookup (FindAndDropRelFileNodeBuffers): when every fork's size is cached
 *    (smgrnblocks_cached, valid only InRecovery) and the blocks to drop are < NBuffers/32
 *    (BUF_DROP_FULL_SCAN_THRESHOLD), one mapping lookup per block; else the full scan.
 * 3. 16 renamed RelFileNode to RelFileLocator and the functions with it: DropRelationBuffers,
 *    DropRelationsAllBuffers, FindAndDropRelationBuffers. The algorithm is unchanged (14–18 bodies
 *    identical but for names; RELS_BSEARCH_THRESHOLD 20 throughout).
 * 4. DropDatabaseBuffers is a full scan in every major.
 * 5. Database DROP redo forgets every cached size: XLogDropDatabase → smgrcloseall (13–16;
 *    smgrdestroyall from 17), for every database, not only the dropped one; 15+ also waits for
 *    the SMGRRELEASE procsignal barrier (smgrreleaseall) first.
 * 6. 15+: Database CREATE_FILE_COPY and Tablespace DROP redo wait for the same SMGRRELEASE
 *    barrier, so they too forget every cached size; 13/14's Database CREATE and Tablespace DROP
 *    redo do not touch the smgr cache.
 * 7. The January 2025 minors (13.19, 14.16, 15.11, 16.7, 17.3; 18.0 from the start) made
 *    truncation replay ask smgrnblocks of each fork it truncates before smgrtruncate (smgrtruncate2
 *    in 13–17, smgrtruncate's old_nblocks in 18), so in recovery every truncated fork's size is
 *    cached when the truncate drop runs. Before them only FSM and VM were (their
 *    prepare-truncate functions ask smgrnblocks); the main fork only if replay had read it.
 * 8. smgrnblocks in recovery: 14+ answer from the size cached in the SMgrRelation
 *    (smgrnblocks_cached) and ask the file (mdnblocks: an lseek) only when none is cached; 13's
 *    smgrnblocks is mdnblocks, so every block a replayed record reads (XLogReadBufferExtended)
 *    asks the kernel the fork's size (`smgrnblocksAsksFile`).
 * 9. mdnblocks (md.c, every major) starts at the fork's last open segment file; when that segment
 *    is exactly RELSEG_SIZE blocks it tries to open the next one (_mdfd_openseg without O_CREAT),
 *    which does not exist, and returns. Nothing remembers the failure, so every size query that
 *    reaches the file of a fork of a whole number of 1 GB segments makes one failed openat
 *    (`mdnblocksOpensNextSegment`): under 13's rules 3 a Test A page at 8GB NB/8 (131,072 pages;
 *    perf stat on a 13.23 startup process: 393,270 openat); under 14+ only the fork's first,
 *    uncached, size query.
 */

/** The majors whose rules are known. */
export const PG_RULE_MAJORS = [13, 14, 15, 16, 17, 18] as const;
export type PgRuleMajor = (typeof PG_RULE_MAJORS)[number];

/** The January 2025 minor of each major from which truncation replay caches the forks' sizes. */
export const TRUNCATE_CACHES_SIZES_FROM: Readonly<Record<PgRuleMajor, number>> = Object.freeze({
  13: 19,
  14: 16,
  15: 11,
  16: 7,
  17: 3,
  18: 0,
});

/** A PostgreSQL version: major, and minor when known (null: the newest minor is assumed). */
export interface PgVersion {
  major: number;
  minor: number | null;
}

export type TruncateDropFn = 'DropRelFileNodeBuffers' | 'DropRelationBuffers';
export type DropAllFn = 'DropRelFileNodesAllBuffers' | 'DropRelationsAllBuffers';
export type LookupFn = 'FindAndDropRelFileNodeBuffers' | 'FindAndDropRelationBuffers';

export interface PgDropRules {
  major: PgRuleMajor;
  /** The minor the rules were chosen for; null when unknown (the newest minor assumed). */
  minor: number | null;
  /** "15.18", or "15" when the minor is unknown. */
  version: string;
  /** The functions replay calls (rules 1, 3, 4). */
  fn: {
    truncate: TruncateDropFn;
    dropRelations: DropAllFn;
    dropDatabase: 'DropDatabaseBuffers';
    /** The static per-block helper of the lookup path; null in 13 (rule 1). */
    lookup: LookupFn | null;
  };
  /** What the WAL and the drop functions call a relation's storage (rule 3). */
  relationId: 'RelFileNode' | 'RelFileLocator';
  /** The cached-size lookup path exists (14+, rule 2); 13 scans every descriptor every time. */
  cachedLookup: boolean;
  /** BUF_DROP_FULL_SCAN_THRESHOLD = NBuffers / this; null where there is no lookup path. */
  thresholdDivisor: 32 | null;
  /** Truncation replay caches each truncated fork's size before dropping (rule 7). */
  truncateCachesSizes: boolean;
  /** How the startup process forgets every cached size at Database DROP redo (rule 5). */
  dropDatabaseForgets: string;
  /** One sentence per rule, for reports. */
  summary: string[];
}

export function isRuleMajor(major: number): major is PgRuleMajor {
  return (PG_RULE_MAJORS as readonly number[]).includes(major);
}

/** The version in `server_version_num` (150018 → 15.18); before 10 the major is 9 (9.6 → 9). */
export function pgVersionOfNum(num: number): PgVersion {
  if (!Number.isInteger(num) || num < 10000 || num > 999999)
    throw new RangeError(`server_version_num ${num} is not a PostgreSQL version number`);
  return num >= 100000
    ? { major: Math.floor(num / 10000), minor: num % 10000 }
    : { major: Math.floor(num / 10000), minor: num % 100 };
}

/** The rules of `v`; a major outside 13–18 is refused with the majors that are known. */
export function pgDropRules(v: PgVersion): PgDropRules {
  const { major, minor } = v;
  if (!isRuleMajor(major))
    throw new RangeError(
      `PostgreSQL ${major}: its replay drop rules are not known (known: ${PG_RULE_MAJORS.join(', ')})`,
    );
  if (minor !== null && (!Number.isInteger(minor) || minor < 0))
    throw new RangeError(`PostgreSQL ${major} minor ${minor} is not a minor version number`);
  const locator = major >= 16;
  const cachedLookup = major >= 14;
  const truncateCachesSizes = minor === null || minor >= TRUNCATE_CACHES_SIZES_FROM[major];
  const closeAll = major >= 17 ? 'smgrdestroyall' : 'smgrcloseall';
  const dropDatabaseForgets = !cachedLookup
    ? `nothing to forget (13 caches no sizes; XLogDropDatabase still runs ${closeAll})`
    : `every cached size, of every database: XLogDropDatabase → ${closeAll}${
        major >= 15 ? ', after the SMGRRELEASE barrier (smgrreleaseall)' : ''
      }`;
  const fn = {
    truncate: locator ? ('DropRelationBuffers' as const) : ('DropRelFileNodeBuffers' as const),
    dropRelations: locator
      ? ('DropRelationsAllBuffers' as const)
      : ('DropRelFileNodesAllBuffers' as const),
    dropDatabase: 'DropDatabaseBuffers' as const,
    lookup: !cachedLookup
      ? null
      : locator
        ? ('FindAndDropRelationBuffers' as const)
        : ('FindAndDropRelFileNodeBuffers' as const),
  };
  const version = minor === null ? `${major}` : `${major}.${minor}`;
  return {
    major,
    minor,
    version,
    fn,
    relationId: locator ? 'RelFileLocator' : 'RelFileNode',
    cachedLookup,
    thresholdDivisor: cachedLookup ? 32 : null,
    truncateCachesSizes,
    dropDatabaseForgets,
    summary: summaryOf(major, minor, fn, truncateCachesSizes, dropDatabaseForgets),
  };
}

function summaryOf(
  major: PgRuleMajor,
  minor: number | null,
  fn: PgDropRules['fn'],
  truncateCaches: boolean,
  dbForgets: string,
): string[] {
  const fix = `${major}.${TRUNCATE_CACHES_SIZES_FROM[major]}`;
  const out = [
    fn.lookup === null
      ? `PostgreSQL ${major}: ${fn.truncate} and ${fn.dropRelations} always scan all NBuffers descriptors (no cached sizes, no lookup path)`
      : `PostgreSQL ${major}: ${fn.truncate} / ${fn.dropRelations} look each block up (${fn.lookup}) when every fork's size is cached and fewer than NBuffers/32 blocks go; else they scan all NBuffers descriptors`,
    `${fn.dropDatabase} scans all NBuffers descriptors; Database DROP redo forgets ${dbForgets}`,
  ];
  if (major >= 15)
    out.push(
      'Database CREATE_FILE_COPY and Tablespace DROP redo forget every cached size (SMGRRELEASE barrier)',
    );
  if (fn.lookup !== null)
    out.push(
      truncateCaches
        ? `truncation replay caches each truncated fork's size first (${fix}+${minor === null ? '; minor unknown, a current minor assumed' : ''})`
        : `truncation replay before ${fix}: the main fork's size is cached only if replay read it since the startup process began`,
    );
  return out;
}

/**
 * Rule 8, the one implementation walsim's storage manager and predict's replay model both call:
 * does this smgrnblocks ask the file (mdnblocks, an lseek) rather than answer from the cache?
 * `cached`: a size is cached and usable (in recovery). `rules` undefined: a walsim node that
 * follows no major (the cache answers, as in 14+).
 */
export function smgrnblocksAsksFile(rules: PgDropRules | undefined, cached: boolean): boolean {
  return !cached || (rules !== undefined && !rules.cachedLookup);
}

/** RELSEG_SIZE: the blocks of one segment file of a fork (1 GB of 8 KiB blocks, the default build). */
export const RELSEG_SIZE = 131072;

/**
 * Rule 9, the one implementation walsim's storage manager and predict's replay model both call:
 * does an mdnblocks of a fork of `blocks` blocks also fail to open a next segment file? Yes when the
 * fork is a positive whole number of segments (its last open segment is full).
 */
export function mdnblocksOpensNextSegment(blocks: number): boolean {
  return blocks > 0 && blocks % RELSEG_SIZE === 0;
}

/**
 * Whether replaying `rmgr`/`type` (pg_waldump's names) makes the startup process forget every
 * cached relation size under `rules`, and why; null when it does not (rules 5 and 6).
 */
export function forgetsCachedSizes(rules: PgDropRules, rmgr: string, type: string): string | null {
  if (!rules.cachedLookup) return null;
  if (rmgr === 'Database' && type === 'DROP') return rules.dropDatabaseForgets;
  if (rules.major >= 15 && rmgr === 'Database' && type === 'CREATE_FILE_COPY')
    return 'the SMGRRELEASE barrier of CREATE DATABASE … STRATEGY FILE_COPY redo';
  if (rules.major >= 15 && rmgr === 'Tablespace' && type === 'DROP')
    return 'the SMGRRELEASE barrier of DROP TABLESPACE redo';
  return null;
}
