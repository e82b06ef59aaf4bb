/**
 * The simulator's faults (sim/README rule 2, the fault atlas): connection cuts, partitions, a
 * full pg_wal, a slow disk, wall-clock jumps — each healing on its own timer — and media
 * corruption, a flipped byte in a WAL record of either node, with what the operator does about it.
 */
import { formatLsn, type Lsn } from '../wal/lsn.ts';
import { listSegmentFiles, segmentOf, segmentOffset, walDir } from '../wal/segment.ts';
import { readWal } from '../wal/wal-reader.ts';
import type { WalRecord } from '../wal/records.ts';
import { readDataImageRedoLsn } from '../storage/data-image-read.ts';
import { SIZE_OF_XLOG_RECORD } from '../wal/codec.ts';
import { DATA_DIR, type Host, type SimCluster } from './cluster.ts';
import { guaranteedAfterPrimaryCrash, type Ledger } from './checkers/ledger.ts';
import { checkRecoveryEnd } from './checkers/recovery.ts';
import type { Operator } from './operator.ts';
import type { SimCommand } from './scenario.ts';

type FaultCommand = Extract<
  SimCommand,
  { op: 'cut' | 'partition' | 'diskFull' | 'slowDisk' | 'clockJump' }
>;

/** The faults that heal on their own timers. */
export function injectFault(cluster: SimCluster, c: FaultCommand): void {
  switch (c.op) {
    case 'cut': {
      cluster.countFault('connection cut');
      const s = cluster.standbyAt(c.target);
      cluster.net.cutBetween((s.upstream ?? cluster.primary).name, s.name, 'cut');
      return;
    }
    case 'partition': {
      cluster.countFault(partitionKind(cluster, c.split));
      const nodes = cluster.roleOrder();
      const side = (i: number) => (c.split === undefined ? i : (c.split[i] ?? 0));
      const pairs: Array<[string, string]> = [];
      for (let i = 0; i < nodes.length; i++)
        for (let j = i + 1; j < nodes.length; j++)
          if (side(i) !== side(j)) pairs.push([nodes[i]!.name, nodes[j]!.name]);
      for (const [a, b] of pairs) cluster.net.partition(a, b);
      cluster.sched.at(c.ms, 'sim', 'heal partition', () => {
        for (const [a, b] of pairs) cluster.net.heal(a, b);
      });
      return;
    }
    case 'diskFull': {
      const h = cluster.hostOf(c.node, c.target);
      cluster.countFault(`disk full (${c.node} pg_wal)`);
      const disk = h.disk;
      const prefix = `${DATA_DIR}/pg_wal`;
      disk.fullPrefixes.add(prefix);
      h.fullUntil = Math.max(h.fullUntil, cluster.sched.now + c.ms);
      h.walTrouble.push({ from: cluster.sched.now, to: cluster.sched.now + c.ms });
      cluster.sched.at(c.ms, 'sim', 'disk space freed', () => disk.fullPrefixes.delete(prefix));
      return;
    }
    case 'slowDisk': {
      cluster.countFault(`slow disk (${c.node})`);
      const h = cluster.hostOf(c.node, c.target);
      // A synchronous write or fsync on the slow machine advances simulated time for the whole
      // simulation (rule 2's simplification), so every machine's WAL writer may miss its cycles
      // meanwhile, not only this one's (seed 3100017703: a standby's slow fsyncs held time still
      // while the primary's asynchronous commit waited for its WAL writer).
      for (const x of cluster.hosts)
        x.walTrouble.push({ from: cluster.sched.now, to: cluster.sched.now + c.ms });
      // The hold runs on simulated time; it ends by itself (DiskLatency checks the clock).
      h.latency.set(c.writeMs, c.latencyMs, c.ms, cluster.sched.now);
      return;
    }
    case 'clockJump':
      cluster.countFault(`clock jump (${c.node})`);
      cluster.sched.jumpWallClock(cluster.hostOf(c.node, c.target).owner, c.ms);
      return;
  }
}

/**
 * Arm a fault inside the next drop of a node's running process (storage/smgr.ts DropFault). It
 * fires when a drop reaches its point — on a standby, in replay — and ends the process (the
 * truncation's critical section PANICs; a failed replay is FATAL; a crash is a crash): the
 * operator restarts it, crash recovery or replay redoes the drop (cluster.ts counts it fired).
 */
export function armDropFault(
  cluster: SimCluster,
  c: Extract<SimCommand, { op: 'dropFault' }>,
): void {
  const h = cluster.hostOf(c.node, c.target);
  if (h.node === null) return;
  cluster.countFault(`drop fault armed (${c.node})`);
  h.node.storage.smgr.dropFault = { kind: c.kind, where: c.where, fork: c.fork };
}

/** A partition's kind for the fault counts: who is cut off from whom. */
function partitionKind(cluster: SimCluster, split: number[] | undefined): string {
  if (split === undefined) return 'partition';
  const withPrimary = split.filter((x) => x === 0).length;
  if (withPrimary === 1) return 'partition (primary isolated)';
  if (withPrimary === 2) return 'partition (primary with one standby)';
  return `partition (${withPrimary} | ${cluster.hosts.length - withPrimary})`;
}

/**
 * Flip one byte inside one of `recs` (drawn from the disk stream) in the newest segment file of
 * `h` that holds it on timeline ≤ `tli`; the start LSN of the damaged record, or null if none fits.
 */
function flipByteInRecord(
  cluster: SimCluster,
  h: Host,
  tli: number,
  recs: readonly WalRecord[],
  kind: string,
): Lsn | null {
  if (recs.length === 0) return null;
  const rng = cluster.faultRng;
  const rec = recs[rng.int(0, recs.length - 1)]!;
  const size = rec.endLsn - rec.lsn;
  if (size <= SIZE_OF_XLOG_RECORD) return null;
  const at = rec.lsn + SIZE_OF_XLOG_RECORD + rng.int(0, size - SIZE_OF_XLOG_RECORD - 1);
  const segSize = cluster.scenario.options.walSegmentSize;
  const files = listSegmentFiles(DATA_DIR, segSize, h.disk).filter(
    (f) => f.segno === segmentOf(at, segSize) && f.tli <= tli,
  );
  const file = files[files.length - 1];
  if (file === undefined) return null;
  cluster.countFault(kind);
  h.disk.flipByte(
    `${walDir(DATA_DIR)}/${file.name}`,
    segmentOffset(at, segSize),
    1 << rng.int(0, 7),
  );
  cluster.record(
    cluster.sched.now,
    'sim',
    `flipped a byte at ${formatLsn(at)} in the record at ${formatLsn(rec.lsn)} (${file.name} on ${h.name})`,
  );
  return rec.lsn;
}

/**
 * Media corruption on the standby: flip one byte inside a record it has flushed but not replayed.
 * Replay must stop at that record and never apply it (checked after every step); the standby is
 * restarted at the next step (crash recovery ends local WAL there and streaming fetches it again).
 */
export function corruptStandby(cluster: SimCluster, ledger: Ledger, target?: number): void {
  const h = cluster.standbyAt(target);
  const n = h.node;
  if (n === null || !n.inRecovery || n.startup === null) return;
  const from = n.startup.nextLsn;
  const to = n.wal.flushLsn;
  if (from >= to) return;
  // Only records the running startup process will still read from disk: bytes it already holds
  // in memory replay intact, so the damage would not be seen before the next restart.
  const readAhead = n.startup.readAheadLsn();
  const recs = [...readWal(DATA_DIR, from, { ...n.readOptions(), stopLsn: to })].filter(
    (r) => r.lsn >= readAhead,
  );
  const lsn = flipByteInRecord(cluster, h, n.timeline, recs, 'corruption (standby WAL)');
  if (lsn === null) return;
  h.corruptLsn = lsn;
  h.corruptOwner = h.owner;
  ledger.copiesDamaged(h.disk, lsn);
  h.restartAt = cluster.sched.now; // healed by a restart at the next step boundary
  cluster.newUpstreamData(h); // its crash recovery may end its WAL below what it sent on
}

/**
 * Media corruption on the primary: flip one byte inside a flushed WAL record that crash recovery
 * will read (after the data image's REDO record), crash the primary at once (a process crash:
 * nothing else is lost) and restart it after downMs. Like PostgreSQL, crash recovery takes the
 * bad record for the end of WAL (SIM-1b, checkers/recovery.ts: it replays nothing at or past
 * it), so every commit at or past that record is gone from the primary although it was
 * acknowledged — media corruption, beyond the durability promise: such facts count as
 * `lostToCorruption`; a fact whose commit ended before the record must still hold. A standby
 * that received WAL past the record holds a history the primary's new WAL contradicts
 * (PostgreSQL would need pg_rewind or a new base backup): the operator stops it before
 * restarting the primary and re-clones it afterwards.
 */
export async function corruptPrimary(
  cluster: SimCluster,
  ledger: Ledger,
  operator: Operator,
  downMs: number,
): Promise<void> {
  const h = cluster.primary;
  const n = h.node;
  if (n === null || n.inRecovery) return;
  // The header only: the primary is running and its image writer may be mid-image (a CHECKPOINT on
  // a slow disk); loading the image would remove that image's files as leftovers (seed 3000340).
  const redo = readDataImageRedoLsn(DATA_DIR, h.disk);
  if (redo >= n.wal.flushLsn) return;
  // Not before the point where the primary's own timeline branched (its segment file holds the
  // parent's WAL up to there): crash recovery ending there would leave a timeline whose history
  // names a branch point past its WAL, a state the fault atlas excludes (seed 3700034318).
  const hist = n.history();
  const branch = hist.length > 1 ? (hist[hist.length - 2]!.endLsn ?? 0) : 0;
  const recs = [...readWal(DATA_DIR, redo, { ...n.readOptions(), stopLsn: n.wal.flushLsn })].filter(
    (r) => r.lsn > redo && r.lsn >= branch,
  );
  const bad = flipByteInRecord(cluster, h, n.timeline, recs, 'corruption (primary WAL)');
  if (bad === null) return;
  const crashAt = cluster.sched.now;
  cluster.kill(h, false);
  h.restartAt = null;
  // Received past the bad record, or unknown (down: its disk may hold anything the primary sent).
  const past = (s: Host): boolean => {
    const sn = s.node;
    return sn === null || !sn.inRecovery || Math.max(sn.wal.writeLsn, sn.wal.flushLsn) > bad;
  };
  // A cascaded standby below one of those may still receive its WAL until that one stops (seed
  // 3700010935): it counts as diverged too.
  const below = (s: Host): boolean => {
    let hops = 0;
    for (let u = s.upstream; u !== null && u !== h && hops++ < cluster.hosts.length; u = u.upstream)
      if (past(u)) return true;
    return false;
  };
  const diverged = cluster.standbys.filter((s) => past(s) || below(s));
  for (const s of diverged) {
    if (s.node !== null) await cluster.stop(s, 'fast');
    s.restartAt = null;
  }
  await cluster.sched.runFor(downMs);
  await cluster.waitForSpace(h);
  await cluster.start(h);
  if (h.node === null) return;
  checkRecoveryEnd(cluster, h, bad);
  await ledger.check(h, 'primary restart after WAL corruption', (f) =>
    f.commitEndMax > bad
      ? 'corruption'
      : guaranteedAfterPrimaryCrash(f, crashAt, h)
        ? 'must'
        : 'may',
  );
  for (const s of diverged) await operator.rebuildStandby(s);
}
