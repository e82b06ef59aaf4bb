/**
 * A record in `pg_waldump`'s words (XLogDumpDisplayRecord, XLogRecGetBlockRefInfo): the line
 * prefix and the block references, without the rmgr's description (which this reader does not
 * reproduce). What the record-for-record tests compare, and what a person reads when the reader
 * and pg_waldump disagree.
 *
 * Entry points: `waldumpPrefix`, `waldumpBlockRefs`, `relPath`.
 */
import type { PgWalRecord, RelFileNode } from './record.ts';

const FORK_NAMES = ['main', 'fsm', 'vm', 'init'];

/** %X/%08X, as pg_waldump prints record LSNs. */
function lsn08(lsn: number): string {
  const hi = Math.floor(lsn / 0x1_0000_0000);
  const lo = lsn - hi * 0x1_0000_0000;
  return `${hi.toString(16).toUpperCase()}/${lo.toString(16).toUpperCase().padStart(8, '0')}`;
}

/** `rmgr: %-11s len (rec/tot): %6u/%6u, tx: %10u, lsn: %X/%08X, prev %X/%08X, desc: TYPE`. */
export function waldumpPrefix(r: PgWalRecord): string {
  return (
    `rmgr: ${r.rmgr.padEnd(11)} len (rec/tot): ${String(r.recordLength).padStart(6)}/` +
    `${String(r.totalLength).padStart(6)}, tx: ${String(r.xid).padStart(10)}, ` +
    `lsn: ${lsn08(r.lsn)}, prev ${lsn08(r.prev)}, desc: ${r.type}`
  );
}

/** `, blkref #N: rel S/D/R [fork F ]blk B[ FPW[ for WAL verification]]` for each block. */
export function waldumpBlockRefs(r: PgWalRecord): string {
  let s = '';
  for (const b of r.blocks) {
    const n = b.node;
    const fork = b.fork === 0 ? '' : ` fork ${FORK_NAMES[b.fork] ?? b.fork}`;
    s += `, blkref #${b.id}: rel ${n.spc}/${n.db}/${n.rel}${fork} blk ${b.block}`;
    if (b.image !== null) s += b.image.apply ? ' FPW' : ' FPW for WAL verification';
  }
  return s;
}

/** relpathperm(node, MAIN_FORKNUM) for the default and global tablespaces; others by OID. */
export function relPath(n: RelFileNode, major: number): string {
  if (n.spc === 1664) return `global/${n.rel}`;
  if (n.spc === 1663) return `base/${n.db}/${n.rel}`;
  return `pg_tblspc/${n.spc}/PG_${major}_*/${n.db}/${n.rel}`;
}
