/** Micro-benchmark of the WAL record codec (frame encode and validate+decode), called by `npm run bench`. */
import { ByteBuffer } from '../../wal/byte-buffer.ts';
import { decodeRecord, RecordEncoder } from '../../wal/codec.ts';
import type { WalRecordBody } from '../../wal/records.ts';
import { TUPLES_PER_PAGE } from '../../wal/records.ts';

export interface WalCodecBenchOptions {
  /** Records per batch (one ByteBuffer of frames). Default 256. */
  batchRecords?: number;
  /** Batches per timed run. Default 400. */
  batches?: number;
  /** Timed runs; the median is reported. Default 5. */
  runs?: number;
}

export interface WalCodecBenchResult {
  walEncodeRecordsPerSec: number;
  walDecodeRecordsPerSec: number;
}

/**
 * The mix of a bulk-load-then-vacuum experiment: mostly HEAP2_MULTI_INSERT (one per heap page),
 * then HEAP_DELETE and HEAP2_PRUNE pages, a commit every 32 records.
 */
export function realisticRecordMix(count: number, rel = 16384): WalRecordBody[] {
  const out: WalRecordBody[] = [];
  for (let i = 0; i < count; i++) {
    const r = i % 32;
    if (r === 31) {
      out.push({ kind: 'XACT_COMMIT', xactTime: 1_700_000_000_000 + i, droppedRels: [] });
    } else if (r < 22) {
      out.push({
        kind: 'HEAP2_MULTI_INSERT',
        rel,
        block: i,
        firstOffset: 1,
        runs: [i * TUPLES_PER_PAGE + 1, TUPLES_PER_PAGE],
        initPage: true,
      });
    } else if (r < 27) {
      out.push({ kind: 'HEAP_DELETE', rel, block: i, offsets: [1, 113] });
    } else {
      out.push({
        kind: 'HEAP2_PRUNE',
        rel,
        block: i,
        latestRemovedXid: 1000 + i,
        offsets: [1, 113],
      });
    }
  }
  return out;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** Encode and decode `batches` batches of `batchRecords` records per run; median records/s of `runs` runs. */
export function measureWalCodec(opts: WalCodecBenchOptions = {}): WalCodecBenchResult {
  const batchRecords = opts.batchRecords ?? 256;
  const batches = opts.batches ?? 400;
  const runs = opts.runs ?? 5;
  const bodies = realisticRecordMix(batchRecords);
  const encoder = new RecordEncoder();
  const out = new ByteBuffer(1 << 16);
  const baseLsn = 0x0100_0028;

  const encodeBatch = (): void => {
    out.clear();
    let prev = 0;
    for (let i = 0; i < bodies.length; i++) {
      const lsn = baseLsn + out.length;
      encoder.append(out, bodies[i]!, 1000 + i, prev);
      prev = lsn;
    }
  };
  const decodeBatch = (): number => {
    let offset = 0;
    let prev = 0;
    let n = 0;
    while (offset < out.length) {
      const rec = decodeRecord(out.bytes, offset, baseLsn + offset, prev, out.length);
      prev = rec.lsn;
      offset = rec.endLsn - baseLsn;
      n++;
    }
    return n;
  };

  // Warm up both paths so the JIT has settled before timing.
  for (let i = 0; i < 50; i++) {
    encodeBatch();
    decodeBatch();
  }
  const encodeRates: number[] = [];
  const decodeRates: number[] = [];
  for (let run = 0; run < runs; run++) {
    let t0 = performance.now();
    for (let b = 0; b < batches; b++) encodeBatch();
    encodeRates.push((batches * batchRecords) / ((performance.now() - t0) / 1000));
    t0 = performance.now();
    let decoded = 0;
    for (let b = 0; b < batches; b++) decoded += decodeBatch();
    decodeRates.push(decoded / ((performance.now() - t0) / 1000));
  }
  return {
    walEncodeRecordsPerSec: Math.round(median(encodeRates)),
    walDecodeRecordsPerSec: Math.round(median(decodeRates)),
  };
}
