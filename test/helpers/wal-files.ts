/**
 * Test helpers that read or damage a node's WAL files directly (the way a disk would): find
 * records, count records in an LSN range, flip a byte inside a chosen record.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { nodeDisk } from '../../common/node-disk.ts';
import { readWal } from '../../wal/wal-reader.ts';
import { segmentFileName, segmentOf, segmentOffset, walDir } from '../../wal/segment.ts';
import type { Lsn, TimeLineId } from '../../wal/lsn.ts';
import type { WalRecord } from '../../wal/records.ts';

export interface WalFileOptions {
  timeline: TimeLineId;
  segmentSize: number;
}

/** The valid records of `dataDir` from `fromLsn` (a record boundary) up to `toLsn` (exclusive end). */
export function recordsIn(
  dataDir: string,
  fromLsn: Lsn,
  toLsn: Lsn,
  opts: WalFileOptions,
): WalRecord[] {
  const out: WalRecord[] = [];
  for (const rec of readWal(dataDir, fromLsn, { ...opts, stopLsn: toLsn, disk: nodeDisk }))
    out.push(rec);
  return out;
}

/**
 * Flip one byte of `rec`'s payload in its segment file on disk (its CRC no longer matches).
 * Returns the segment file's name.
 */
export function flipByteIn(dataDir: string, rec: WalRecord, opts: WalFileOptions): string {
  const at = rec.lsn + 24 + 1; // inside the msgpack payload, after the 24-byte header
  const name = segmentFileName(opts.timeline, segmentOf(at, opts.segmentSize), opts.segmentSize);
  const file = path.join(walDir(dataDir), name);
  const fd = fs.openSync(file, 'r+');
  try {
    const b = Buffer.alloc(1);
    const off = segmentOffset(at, opts.segmentSize);
    fs.readSync(fd, b, 0, 1, off);
    b[0] = b[0]! ^ 0x5a;
    fs.writeSync(fd, b, 0, 1, off);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  return name;
}
