/** Shared fixtures for the wal tests: one body of every record kind, and temp data directories. */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { WalRecordBody, WalRecordKind } from '../../wal/records.ts';

/** One example body per kind (the Record type makes this fail to compile when a kind is added). */
export const SAMPLE_BODIES: { [K in WalRecordKind]: Extract<WalRecordBody, { kind: K }> } = {
  CHECKPOINT_SHUTDOWN: {
    kind: 'CHECKPOINT_SHUTDOWN',
    redo: 0x1_0000_0028,
    timeline: 1,
    prevTimeline: 1,
    nextXid: 3,
    nextRelFileNumber: 16384,
    time: 1_700_000_000_000,
  },
  CHECKPOINT_ONLINE: {
    kind: 'CHECKPOINT_ONLINE',
    redo: 0x0100_0028,
    timeline: 2,
    prevTimeline: 1,
    nextXid: 900,
    nextRelFileNumber: 16390,
    time: 1_700_000_000_123,
  },
  END_OF_RECOVERY: {
    kind: 'END_OF_RECOVERY',
    newTimeline: 2,
    prevTimeline: 1,
    time: 1_700_000_000_999,
  },
  NOOP: { kind: 'NOOP' },
  FPI: { kind: 'FPI', rel: 16385, fork: 0, block: 0 },
  XACT_COMMIT: { kind: 'XACT_COMMIT', xactTime: 1_700_000_000_001, droppedRels: [16384, 16385] },
  XACT_ABORT: { kind: 'XACT_ABORT', xactTime: 1_700_000_000_002, droppedRels: [] },
  SMGR_CREATE: { kind: 'SMGR_CREATE', rel: 16384, fork: 0 },
  SMGR_TRUNCATE: { kind: 'SMGR_TRUNCATE', rel: 16384, blkno: 10, flags: 7 },
  CATALOG_UPDATE: { kind: 'CATALOG_UPDATE', relname: 'pgbench_accounts', rel: 16386 },
  STANDBY_LOCK: { kind: 'STANDBY_LOCK', rel: 16384 },
  HEAP_INSERT: { kind: 'HEAP_INSERT', rel: 16384, block: 0, offset: 1, value: -42, initPage: true },
  HEAP_DELETE: { kind: 'HEAP_DELETE', rel: 16384, block: 3, offsets: [1, 226] },
  HEAP2_MULTI_INSERT: {
    kind: 'HEAP2_MULTI_INSERT',
    rel: 16384,
    block: 7,
    firstOffset: 1,
    runs: [1583, 226],
    initPage: false,
  },
  HEAP2_PRUNE: {
    kind: 'HEAP2_PRUNE',
    rel: 16384,
    block: 3,
    latestRemovedXid: 1000,
    offsets: [1, 100, 150, 2],
  },
  HEAP2_VISIBLE: { kind: 'HEAP2_VISIBLE', rel: 16384, block: 3 },
};

export const ALL_BODIES: WalRecordBody[] = Object.values(SAMPLE_BODIES);

export function tempDataDir(prefix = 'walsim-wal-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export function removeDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
}
