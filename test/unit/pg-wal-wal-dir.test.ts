/**
 * pg-wal/wal-dir.ts `WalDirectory`, the reader's source of segment files: it opens a segment on
 * the calling thread (so the reader's read ahead of the next segment starts at once) and hands
 * out reads, a descriptor and a close. Checked from files built in memory and written out: every
 * mode reads every record across segment boundaries and leaves no descriptor open (read to the
 * end, stopped at a missing segment, or abandoned after one batch); a segment of the wrong size
 * and a missing one each get their one-line answer, with the file closed.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PgWalReader } from '../../pg-wal/reader.ts';
import { WalDirectory } from '../../pg-wal/wal-dir.ts';
import { segmentFileName } from '../../wal/segment.ts';
import { buildWal, heapInsertRun, type BuildRecord } from '../helpers/pg-wal-build.ts';

const SEG = 1 << 20;
const REL = { spc: 1663, db: 5, rel: 16384 };
const HISTORY = [{ tli: 1, beginLsn: 0, endLsn: null }];

/** ~3 segments of heap inserts, some spanning pages. */
const records = (): BuildRecord[] =>
  heapInsertRun(20000, {
    node: REL,
    perBlock: 64,
    xid: () => 700,
    rel: () => REL.rel,
    fill: () => 7,
  });

const wal = buildWal(records(), { major: 16, segmentSize: SEG, startSegno: 1 });
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-waldir-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

/** A pg_wal with the built segments, `change` applied to the file of each segment number. */
function walDir(name: string, change: (segno: number, file: string) => void = () => {}): string {
  const d = path.join(root, name);
  fs.mkdirSync(d);
  for (const [segno, bytes] of wal.segments) {
    const file = path.join(d, segmentFileName(1, segno, SEG));
    fs.writeFileSync(file, bytes);
    change(segno, file);
  }
  return d;
}

const openFds = () => fs.readdirSync('/proc/self/fd').length;
const segnos = [...wal.segments.keys()].sort((a, b) => a - b);

function reader(d: string) {
  return new PgWalReader(new WalDirectory(d, SEG, HISTORY), {
    startLsn: wal.records[0]!.lsn,
    chunkBytes: 64 * 1024,
  });
}

describe('WalDirectory: segments opened and closed on the calling thread', () => {
  it('reads every record across the segments in every mode and leaves no descriptor open', async () => {
    expect(segnos.length).toBeGreaterThanOrEqual(3);
    const d = walDir('whole');
    const before = openFds();
    const r1 = reader(d);
    let n = 0;
    for await (const b of r1.records()) n += b === null ? 0 : 1;
    const r2 = reader(d);
    let cols = 0;
    for await (const c of r2.columns()) cols += c.length;
    const r3 = reader(d);
    let views = 0;
    for await (const _ of r3.views(() => views++)) void _;
    expect([n, cols, views]).toEqual([wal.records.length, wal.records.length, wal.records.length]);
    for (const r of [r1, r2, r3]) expect(r.end?.reason).toBe('invalid_record');
    // Abandoned after its first batch: the generator's return closes the file and the one
    // opened ahead.
    for await (const c of reader(d).columns(100)) {
      expect(c.length).toBe(100);
      break;
    }
    expect(openFds()).toBe(before);
  });

  it('opens the segment before open() returns: the read ahead needs no turn of the event loop', async () => {
    const d = walDir('sync-open');
    const src = new WalDirectory(d, SEG, HISTORY);
    const before = openFds();
    let opened = false;
    const opening = src.open(segnos[1]!);
    void opening.then(() => (opened = true));
    // Microtasks only: an open on the thread pool would need a turn of the event loop.
    for (let i = 0; i < 3; i++) await Promise.resolve();
    expect(opened).toBe(true);
    const f = await opening;
    expect(f?.name).toBe(segmentFileName(1, segnos[1]!, SEG));
    await f!.close();
    expect(openFds()).toBe(before);
  });

  it('a missing segment ends reading there, naming it, with every file closed', async () => {
    const gone = segnos[1]!;
    const d = walDir('missing', (segno, file) => {
      if (segno === gone) fs.rmSync(file);
    });
    const before = openFds();
    const r = reader(d);
    for await (const _ of r.views(() => {})) void _;
    expect(r.end?.reason).toBe('missing_segment');
    expect(r.end?.message).toContain(`could not find file "${segmentFileName(1, gone, SEG)}"`);
    expect(openFds()).toBe(before);
  });

  it('a segment of the wrong size is one line naming the file and both sizes, the file closed', async () => {
    const short = segnos[1]!;
    const d = walDir('short', (segno, file) => {
      if (segno === short) fs.truncateSync(file, SEG / 2);
    });
    const before = openFds();
    const r = reader(d);
    const err = await (async () => {
      for await (const _ of r.columns()) void _;
    })().catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    const msg = (err as Error).message;
    expect(msg).not.toContain('\n');
    expect(msg).toContain(
      `WAL file ${path.join(d, segmentFileName(1, short, SEG))} is ${SEG / 2} bytes, not the segment size ${SEG}`,
    );
    expect(openFds()).toBe(before);
  });
});
