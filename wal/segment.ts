/**
 * WAL segment geometry and file names (PostgreSQL's xlog_internal.h), and timeline history files.
 *
 * Entry points: `walDir`, `walFilePath`, `segmentFileName`, `parseSegmentFileName`, `segmentOf`,
 * `segmentStartLsn`, `firstRecordLsn`, `checkSegmentSize`, `parseSegmentSize`,
 * `readTimelineHistory`, `writeTimelineHistory`, `timelineHistoryFileName`, `listSegmentFiles`.
 */
import * as path from 'node:path';
import { assert, fail } from '../common/assert.ts';
import { BoundedMemo } from '../common/bounded-memo.ts';
import { WalsimError } from '../common/errors.ts';
import { formatLsn, parseLsn, type Lsn, type TimeLineId } from './lsn.ts';
import { fsyncDir, makeDir, writeFileAtomic } from '../common/durable-file.ts';
import { isErrnoCode, readTextFile, type Disk } from '../common/disk.ts';
export { fsyncDir };

export const DEFAULT_SEGMENT_SIZE = 16 * 1024 * 1024;
/** walsim allows segments down to 64 kB so tests cross segment boundaries cheaply (PostgreSQL: 1 MB). */
export const MIN_SEGMENT_SIZE = 64 * 1024;
export const MAX_SEGMENT_SIZE = 1024 * 1024 * 1024;
/**
 * SizeOfXLogLongPHD. walsim writes no page headers, but the first record of a fresh cluster starts
 * this far into segment 1 (as after initdb: 0/1000028 with 16 MB segments), so LSN 0 stays invalid.
 */
export const LONG_PAGE_HEADER_BYTES = 40;

const TWO_32 = 0x1_0000_0000;

/** `walDir` by data directory (a process has one or a few; asked at every WAL read). */
const walDirs = new BoundedMemo<string, string>(64);

const pgWalOf = (dataDir: string): string => path.join(dataDir, 'pg_wal');

/** `<dataDir>/pg_wal`. */
export function walDir(dataDir: string): string {
  return walDirs.get(dataDir, pgWalOf);
}

/** `walFilePath` by pg_wal directory and file name (at most WAL_PATHS_MAX of them). */
const walPaths = new Map<string, Map<string, string>>();
let walPathCount = 0;
/** A bound, not a tuning: a process reads and writes a few hundred segment files at most. */
const WAL_PATHS_MAX = 4096;

/**
 * `<dataDir>/pg_wal/<name>`, the same string every time: it is built at every WAL read and
 * write (path.join normalises the whole path each time), and a disk keyed by path finds a string
 * it has seen without hashing it again.
 */
export function walFilePath(dataDir: string, name: string): string {
  const dir = walDir(dataDir);
  let byName = walPaths.get(dir);
  if (byName === undefined) {
    byName = new Map();
    walPaths.set(dir, byName);
  }
  let p = byName.get(name);
  if (p === undefined) {
    if (walPathCount >= WAL_PATHS_MAX) {
      walPaths.clear();
      walPathCount = 0;
      return walFilePath(dataDir, name);
    }
    p = path.join(dir, name);
    byName.set(name, p);
    walPathCount++;
  }
  return p;
}

const SEGMENT_SIZE_UNITS: Readonly<Record<string, number>> = {
  B: 1,
  kB: 1024,
  MB: 1024 ** 2,
  GB: 1024 ** 3,
};

/**
 * A wal_segment_size value as SHOW prints it and as the cluster CLI takes it: a whole number of
 * bytes, or of a case-sensitive memory unit B, kB, MB, GB (GUC_UNIT_BYTE, multiples of 1024),
 * e.g. `16MB`; then the power-of-two range `checkSegmentSize` enforces. Errors name the parameter.
 */
export function parseSegmentSize(text: string): number {
  const m = /^\s*([0-9]+)\s*([A-Za-z]*)\s*$/.exec(text);
  const unit = m === null ? undefined : SEGMENT_SIZE_UNITS[m[2] === '' ? 'B' : m[2]!];
  if (m === null || unit === undefined)
    throw new WalsimError(
      'invalid_input',
      `invalid value for parameter "wal_segment_size": "${text}": expected a whole number of bytes or of "B", "kB", "MB", "GB" (e.g. 16MB)`,
    );
  const bytes = Number(m[1]) * unit;
  checkSegmentSize(bytes);
  return bytes;
}

/** Throws WalsimError('invalid_input') unless a power of two in [64 kB, 1 GB]. */
export function checkSegmentSize(segmentSize: number): void {
  const ok =
    Number.isSafeInteger(segmentSize) &&
    segmentSize >= MIN_SEGMENT_SIZE &&
    segmentSize <= MAX_SEGMENT_SIZE &&
    (segmentSize & (segmentSize - 1)) === 0;
  if (!ok) {
    throw new WalsimError(
      'invalid_input',
      `WAL segment size must be a power of two between ${MIN_SEGMENT_SIZE} and ${MAX_SEGMENT_SIZE} bytes, got ${segmentSize}`,
    );
  }
}

/** XLByteToSeg. */
export function segmentOf(lsn: Lsn, segmentSize: number): number {
  return Math.floor(lsn / segmentSize);
}

/** XLogSegmentOffset. */
export function segmentOffset(lsn: Lsn, segmentSize: number): number {
  return lsn % segmentSize;
}

export function segmentStartLsn(segno: number, segmentSize: number): Lsn {
  return segno * segmentSize;
}

/** Where the first record of a fresh cluster goes: segment 1, after a long page header's worth. */
export function firstRecordLsn(segmentSize: number): Lsn {
  return segmentSize + LONG_PAGE_HEADER_BYTES;
}

function hex8(n: number): string {
  return n.toString(16).toUpperCase().padStart(8, '0');
}

/** segmentFileName's names by segment size, timeline, segno: asked at every WAL read and write. */
const segmentNames = new Map<number, Map<number, Map<number, string>>>();
const SEGMENT_NAMES_MAX = 4096;

function segmentNamesOf(segmentSize: number, tli: TimeLineId): Map<number, string> {
  let byTli = segmentNames.get(segmentSize);
  if (byTli === undefined) {
    byTli = new Map();
    segmentNames.set(segmentSize, byTli);
  }
  let names = byTli.get(tli);
  if (names === undefined) {
    if (byTli.size >= 64) byTli.clear(); // a bound, not a tuning
    names = new Map();
    byTli.set(tli, names);
  }
  return names;
}

/** XLogFileName: `%08X%08X%08X` of (TLI, segno / segsPerXlogId, segno % segsPerXlogId). */
export function segmentFileName(tli: TimeLineId, segno: number, segmentSize: number): string {
  if (!(Number.isSafeInteger(segno) && segno >= 0)) fail(`INV-WAL-8: bad segment number ${segno}`);
  if (!(tli >>> 0 === tli && tli >= 1)) fail(`INV-WAL-8: bad timeline ${tli}`);
  const names = segmentNamesOf(segmentSize, tli);
  let name = names.get(segno);
  if (name === undefined) {
    const segsPerId = TWO_32 / segmentSize;
    name = hex8(tli) + hex8(Math.floor(segno / segsPerId)) + hex8(segno % segsPerId);
    if (names.size >= SEGMENT_NAMES_MAX) names.clear(); // a bound, not a tuning
    names.set(segno, name);
  }
  return name;
}

/** XLogFromFileName: null when `name` is not a 24-hex-digit segment file name. */
export function parseSegmentFileName(
  name: string,
  segmentSize: number,
): { tli: TimeLineId; segno: number } | null {
  if (!/^[0-9A-F]{24}$/.test(name)) return null;
  const tli = parseInt(name.slice(0, 8), 16);
  const hi = parseInt(name.slice(8, 16), 16);
  const lo = parseInt(name.slice(16, 24), 16);
  const segsPerId = TWO_32 / segmentSize;
  if (tli === 0 || lo >= segsPerId) return null;
  return { tli, segno: hi * segsPerId + lo };
}

/** Segment files in `<dataDir>/pg_wal`, sorted by (segno, tli). */
export function listSegmentFiles(
  dataDir: string,
  segmentSize: number,
  disk: Disk,
): { name: string; tli: TimeLineId; segno: number }[] {
  let names: string[];
  try {
    names = disk.readdir(walDir(dataDir));
  } catch (e) {
    if (isErrnoCode(e, 'ENOENT')) return [];
    throw e;
  }
  const out: { name: string; tli: TimeLineId; segno: number }[] = [];
  for (const name of names) {
    const p = parseSegmentFileName(name, segmentSize);
    if (p) out.push({ name, ...p });
  }
  return out.sort((a, b) => a.segno - b.segno || a.tli - b.tli);
}

// ---------------------------------------------------------------------------------------------
// Timeline history (timeline.c)

/** One timeline of a history: WAL of `tli` is valid in [beginLsn, endLsn); endLsn null = open. */
export interface TimelineHistoryEntry {
  tli: TimeLineId;
  beginLsn: Lsn;
  endLsn: Lsn | null;
}

/** `%08X.history` (TLHistoryFileName). */
export function timelineHistoryFileName(tli: TimeLineId): string {
  return `${hex8(tli)}.history`;
}

/**
 * Histories parsed, by `<tli>\n<text>`: a pure function of both, and the same few files are read
 * again at every walsender start, reader, timeline switch and checker pass (the simulator spent ~1 %
 * of its time parsing them). Errors are not kept: a bad text is parsed, and reported, each time.
 * Bounded, not tuned: a run has a handful of timelines, a simulator worker runs many seeds.
 */
const parsedHistories = new BoundedMemo<string, readonly TimelineHistoryEntry[]>(1_000);

/**
 * Parse history file text (lines `parentTLI<TAB>switchpoint<TAB>reason`, '#' comments) of
 * timeline `tli`. Returns entries oldest first, ending with `tli` itself (open-ended); the caller
 * owns them (copies of the memoized ones: callers may change what they get).
 */
export function parseTimelineHistory(
  text: string,
  tli: TimeLineId,
  fileName?: string,
): TimelineHistoryEntry[] {
  const entries = parsedHistories.get(`${tli}\n${text}`, () =>
    parseHistoryText(text, tli, fileName ?? timelineHistoryFileName(tli)),
  );
  return entries.map((e) => ({ tli: e.tli, beginLsn: e.beginLsn, endLsn: e.endLsn }));
}

function parseHistoryText(text: string, tli: TimeLineId, fileName: string): TimelineHistoryEntry[] {
  const entries: TimelineHistoryEntry[] = [];
  let prevEnd = 0;
  const bad = (line: number, why: string): never => {
    throw new WalsimError(
      'invalid_wal',
      `invalid data in history file "${fileName}" line ${line}: ${why}`,
    );
  };
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === '' || line.startsWith('#')) continue;
    const fields = line.split(/\s+/);
    if (fields.length < 2) bad(i + 1, 'expected a timeline ID and a switch point');
    if (!/^\d+$/.test(fields[0]!)) bad(i + 1, `"${fields[0]}" is not a timeline ID`);
    const parent = Number(fields[0]);
    let switchLsn: Lsn = 0;
    try {
      switchLsn = parseLsn(fields[1]!);
    } catch {
      bad(i + 1, `"${fields[1]}" is not a switch point`);
    }
    const last = entries[entries.length - 1];
    if (parent < 1 || (last !== undefined && parent <= last.tli))
      bad(i + 1, 'timeline IDs must be in increasing sequence');
    if (switchLsn < prevEnd) bad(i + 1, 'switch points must be in increasing sequence');
    entries.push({ tli: parent, beginLsn: prevEnd, endLsn: switchLsn });
    prevEnd = switchLsn;
  }
  const last = entries[entries.length - 1];
  if (last !== undefined && tli <= last.tli) {
    throw new WalsimError(
      'invalid_wal',
      `invalid data in history file "${fileName}": timeline IDs must be less than child timeline's ID`,
    );
  }
  entries.push({ tli, beginLsn: prevEnd, endLsn: null });
  return entries;
}

/** The raw text of `%08X.history` for `tli`, or null if there is none. */
export function readTimelineHistoryFile(
  dataDir: string,
  tli: TimeLineId,
  disk: Disk,
): string | null {
  const p = walFilePath(dataDir, timelineHistoryFileName(tli));
  // Timeline 1 has none, and a missing file is the common case: asked first, without the error.
  if (!disk.exists(p)) return null;
  try {
    return readTextFile(disk, p);
  } catch (e) {
    if (isErrnoCode(e, 'ENOENT')) return null;
    throw e;
  }
}

/**
 * readTimeLineHistory: the history of `tli`, oldest first, ending with `tli`. Timeline 1 (or any
 * timeline without a history file) is a single open-ended entry beginning at 0.
 */
export function readTimelineHistory(
  dataDir: string,
  tli: TimeLineId,
  disk: Disk,
): TimelineHistoryEntry[] {
  const text = readTimelineHistoryFile(dataDir, tli, disk);
  if (text === null) return [{ tli, beginLsn: 0, endLsn: null }];
  return parseTimelineHistory(text, tli);
}

/** File text for a history: one line per ended timeline of `entries` (PostgreSQL's format). */
export function formatTimelineHistory(
  entries: readonly TimelineHistoryEntry[],
  reasons: readonly string[] = [],
): string {
  let text = '';
  entries.forEach((e, i) => {
    if (e.endLsn === null) return;
    text += `${e.tli}\t${formatLsn(e.endLsn)}\t${reasons[i] ?? 'no recovery target specified'}\n`;
  });
  return text;
}

/**
 * writeTimelineHistory: create `%08X.history` for `newTli`, whose parent history is
 * `parentHistory` (from readTimelineHistory of the parent) and which branched off at `switchLsn`.
 * Copies the parent's file lines, appends `parentTLI\tswitchpoint\treason`; written to a temp
 * file, fsynced and renamed into place, like PostgreSQL.
 */
export function writeTimelineHistory(
  dataDir: string,
  newTli: TimeLineId,
  parentHistory: readonly TimelineHistoryEntry[],
  switchLsn: Lsn,
  reason: string,
  disk: Disk,
): void {
  const parent = parentHistory[parentHistory.length - 1];
  assert(
    parent !== undefined && parent.endLsn === null,
    'INV-WAL-5: parent history must end with its open timeline',
  );
  if (!(newTli > parent.tli))
    fail(`INV-WAL-5: new timeline ${newTli} must be above parent ${parent.tli}`);
  if (!(switchLsn >= parent.beginLsn))
    fail(`INV-WAL-5: switch point ${formatLsn(switchLsn)} before the parent's start`);
  const parentText = readTimelineHistoryFile(dataDir, parent.tli, disk);
  const reasonLine = reason.replace(/[\r\n]+/g, ' ');
  const text =
    (parentText ?? formatTimelineHistory(parentHistory)) +
    `${parent.tli}\t${formatLsn(switchLsn)}\t${reasonLine}\n`;
  writeTimelineHistoryFile(dataDir, newTli, text, disk);
}

/** Store history file text verbatim (a standby saving what TIMELINE_HISTORY returned). Validates it first. */
export function writeTimelineHistoryFile(
  dataDir: string,
  tli: TimeLineId,
  text: string,
  disk: Disk,
): void {
  parseTimelineHistory(text, tli);
  const dir = walDir(dataDir);
  makeDir(dir, disk);
  const target = path.join(dir, timelineHistoryFileName(tli));
  writeFileAtomic(target, text, disk);
}

/**
 * Which timeline's file to read segment `segno` from: PostgreSQL's XLogFileReadAnyTLI rule. Walk
 * the history newest first; skip a timeline whose first segment (the segment of its beginLsn) is
 * after `segno`; the first timeline whose file exists wins. Returns null if none exists.
 */
export function chooseSegmentFile(
  dataDir: string,
  segno: number,
  history: readonly TimelineHistoryEntry[],
  segmentSize: number,
  exists: (name: string) => boolean,
): { name: string; tli: TimeLineId } | null {
  for (let i = history.length - 1; i >= 0; i--) {
    const h = history[i]!;
    if (segno < segmentOf(h.beginLsn, segmentSize)) continue;
    const name = segmentFileName(h.tli, segno, segmentSize);
    if (exists(name)) return { name, tli: h.tli };
  }
  return null;
}
