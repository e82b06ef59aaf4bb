/**
 * The pg-wal/ reader's CRC-32C worker thread (scan-wasm.ts `CrcWorker`): with it, a chunk read
 * ahead is read and its records' CRC-32C verdicts computed on the second thread while this one
 * scans the other window. Checked: the same records, columns and views as without it, and the
 * same end (a record with a wrong CRC in the middle of a chunk the worker checked, inside its
 * page or continued on the next one, still stops reading there, with PostgreSQL's message),
 * from segment files (the worker reads them) and from memory (it only computes verdicts); the
 * worker really did the work (its jobs counted), the jobs in flight never exceed one per window
 * and the memory never grows; a worker that fails at start or in the middle gives one clear
 * error line, and reading never hangs on it.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { WalsimError } from '../../common/errors.ts';
import { PgWalReader, type PgWalReadOptions } from '../../pg-wal/reader.ts';
import { CRC_WORKER_CODE } from '../../pg-wal/scan-wasm.ts';
import { detectSegmentSize, WalDirectory } from '../../pg-wal/wal-dir.ts';
import type { WalSegmentSource } from '../../pg-wal/wal-dir.ts';
import { segmentFileName } from '../../wal/segment.ts';
import {
  buildWal,
  heapInsertRun,
  MemorySegments,
  type BuildRecord,
} from '../helpers/pg-wal-build.ts';

const SEG = 1 << 20;
const REL = { spc: 1663, db: 5, rel: 16384 };

/** ~3 segments of heap inserts of varied lengths (some spanning pages), block refs and offsets. */
const records = (): BuildRecord[] =>
  heapInsertRun(24000, {
    node: REL,
    perBlock: 32,
    xid: (i) => 900 + (i % 7),
    rel: (i) => REL.rel + (i % 5),
    fill: (i) => i,
  });

const wal = buildWal(records(), { major: 15, segmentSize: SEG, startSegno: 1 });
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-crcw-'));
for (const [segno, bytes] of wal.segments)
  fs.writeFileSync(path.join(dir, segmentFileName(1, segno, SEG)), bytes);
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const files = (d = dir): WalSegmentSource =>
  new WalDirectory(d, detectSegmentSize(d), [{ tli: 1, beginLsn: 0, endLsn: null }]);

type Mode = 'records' | 'columns' | 'views';

/** Everything a mode hands out, as rows, and the end. */
async function read(src: WalSegmentSource, mode: Mode, opts: Partial<PgWalReadOptions>) {
  const reader = new PgWalReader(src, {
    startLsn: wal.records[0]!.lsn,
    chunkBytes: 64 * 1024,
    ...opts,
  });
  const rows: number[][] = [];
  if (mode === 'records')
    for await (const r of reader.records())
      rows.push([r.lsn, r.endLsn, r.totalLength, r.fpiLength, r.xid, r.blocks[0]?.block ?? -1]);
  else if (mode === 'columns')
    for await (const c of reader.columns())
      for (let i = 0; i < c.length; i++)
        rows.push([c.lsn[i]!, c.endLsn[i]!, c.totalLength[i]!, c.fpiLength[i]!]);
  else
    for await (const _ of reader.views((v) =>
      rows.push([v.lsn, v.endLsn, v.totalLength, v.fpiLength, v.xid, v.blockNo[0]!]),
    ));
  return { rows, end: reader.end, stats: reader.scanStats };
}

describe('the CRC-32C worker thread', () => {
  for (const mode of ['records', 'columns', 'views'] as const)
    it(`${mode}: the same records and end with it as without it, from files and from memory`, async () => {
      const off = await read(files(), mode, { crcWorker: 'off' });
      expect(off.rows.length).toBe(wal.records.length);
      expect(off.stats.worker).toBe(false);
      for (const src of [files(), new MemorySegments(wal.segments, SEG)]) {
        const on = await read(src, mode, { crcWorker: 'on' });
        expect(on.rows).toEqual(off.rows);
        expect(on.end).toEqual(off.end);
        // It did the work: from files it reads every chunk read ahead (3 segments of 16), from
        // memory it is given a chunk only when it has none unfinished; never more unfinished
        // than one per window, and the memory is what it was made with.
        expect(on.stats.worker).toBe(true);
        expect(on.stats.jobs).toBeGreaterThan(src instanceof MemorySegments ? 0 : 40);
        expect(on.stats.maxJobsInFlight).toBeLessThanOrEqual(2);
        expect(on.stats.memoryBytes).toBe(off.stats.memoryBytes);
      }
    });

  // A record inside one page, and one that continues on the next page (a byte of its second part).
  for (const [what, index, at] of [
    ['inside its page', 15000, (r: (typeof wal.records)[number]) => r.lsn + 30],
    ['continued on the next page', 14955, (r: (typeof wal.records)[number]) => r.spans[1]![0] + 50],
  ] as const)
    it(`a record with a wrong CRC-32C ${what}, in a chunk the worker checked, stops reading there`, async () => {
      const bad = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-crcw-bad-'));
      try {
        const victim = wal.records[index]!;
        expect(victim.spans.length).toBe(what === 'inside its page' ? 1 : 2);
        for (const [segno, bytes] of wal.segments) {
          const b = Buffer.from(bytes);
          const o = at(victim) - segno * SEG;
          if (o >= 0 && o < SEG) b[o]! ^= 0x10;
          fs.writeFileSync(path.join(bad, segmentFileName(1, segno, SEG)), b);
        }
        const off = await read(files(bad), 'columns', { crcWorker: 'off' });
        const on = await read(files(bad), 'columns', { crcWorker: 'on' });
        expect(off.rows.length).toBe(index);
        expect(off.end!.message).toMatch(/^incorrect resource manager data checksum in record at /);
        expect(on.rows).toEqual(off.rows);
        expect(on.end).toEqual(off.end);
        expect(on.stats.jobs).toBeGreaterThan(10);
      } finally {
        fs.rmSync(bad, { recursive: true, force: true });
      }
    });

  it('is off unless asked for', async () => {
    const plain = await read(files(), 'columns', { endLsn: wal.end });
    expect(plain.stats.worker).toBe(false);
    expect(plain.rows.length).toBe(wal.records.length);
  });

  const failing = {
    'at start': "throw new Error('no thread for you')",
    // The real worker, which exits at its fifth message (the fourth job).
    'in the middle': `let seen = 0;
      require('node:worker_threads').parentPort.on('message', () => {
        if (++seen === 5) process.exit(3);
      });
      ${CRC_WORKER_CODE}`,
  };
  for (const [when, code] of Object.entries(failing))
    it(`a worker that fails ${when}: one clear error, no hang`, async () => {
      const err = await read(files(), 'views', { crcWorker: 'on', crcWorkerCode: code }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(WalsimError);
      const msg = (err as Error).message;
      expect(msg).not.toContain('\n');
      expect(msg).toMatch(
        /^pg-wal reader: the CRC-32C worker thread (failed: no thread for you|exited with code 3)$/,
      );
    });
});
