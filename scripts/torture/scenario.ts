/**
 * One torture seed: a random workload on a real primary/standby pair (creates, inserts, deletes,
 * vacuums, truncates, checkpoints, pause/resume), interleaved with random faults (replication cut,
 * standby SIGKILL, standby disk full, a byte flipped in the standby's WAL), then a final crash of
 * the primary during a stream of commits and a promotion. Everything random comes from the seed.
 * `runSeed` sets up the cluster and runs a `TortureRun`: the workload with faults
 * (`workloadWithFaults`), then the crash and promotion (`crashAndPromote`); the statements are
 * scripts/torture/workload.ts, the invariant checks scripts/torture/checks.ts.
 *
 * Invariants checked (a violation throws, naming the seed):
 *  I1 no acknowledged commit is lost: after promotion the ledger holds every acknowledged value and
 *     every table holds exactly what the acknowledged statements left (the model);
 *  I2 at every convergence point the standby equals the primary at equal LSN (replay LSN = flush
 *     LSN; same tables, rows, digests and fork sizes) and both equal the model;
 *  I3 no buffer holds a dropped block (orphanBuffers is empty) on either node, ever checked;
 *  I4 every error seen is an expected, named one: invalid_wal at exactly the flipped record,
 *     ENOSPC while the disk is full, a lost connection when the primary dies; no FATAL,
 *     InvariantViolation or internal error in any server log.
 */
import { SeededRandom } from '../../common/random.ts';
import { isWalsimError } from '../../common/errors.ts';
import { maxAlign } from '../../wal/codec.ts';
import { formatLsn, parseLsn } from '../../wal/lsn.ts';
import { readWal } from '../../wal/wal-reader.ts';
import { segmentFileName, segmentOf, segmentOffset, walDir } from '../../wal/segment.ts';
import {
  DROP_STRATEGIES,
  type SynchronousCommit,
  type DropStrategy,
} from '../../server/settings.ts';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { FatalCheck, TortureCluster } from './start-cluster.ts';
import { Workload, type Statement } from './workload.ts';
import { checkConverged, checkLogs, checkPromoted, checkReplayedToFlush } from './checks.ts';
import { nodeDisk } from '../../common/node-disk.ts';

export const FAULT_KINDS = [
  'cut_replication',
  'kill_standby',
  'wal_write_fail',
  'corrupt_wal',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number] | 'crash_primary';

export interface SeedOptions {
  seed: number;
  ops: number;
  keep: boolean;
  log(line: string): void;
}

export interface SeedResult {
  seed: number;
  ok: boolean;
  level: SynchronousCommit;
  faults: Record<FaultKind, number>;
  /** Write statements acknowledged to the client. */
  acked: number;
  /** Acknowledged commits missing after promotion (ledger values + tables that differ from the model). */
  lost: number;
  /** Expected errors seen, by name. */
  expectedErrors: Record<string, number>;
  error?: string;
  dir?: string;
}

const SEGMENT_SIZE = 1 << 20;

/** The seed's settings, drawn first (in this order) from its PRNG. */
function drawSettings(rng: SeededRandom) {
  const level = rng.pick<SynchronousCommit>(['remote_write', 'on', 'remote_apply']);
  const standbySharedBuffers = rng.pick(['16MB', '128MB', '1GB']);
  // Every drop strategy, the seed debate's alternatives included: they must survive the same faults.
  const dropStrategy = rng.pick<DropStrategy>(DROP_STRATEGIES);
  return { level, standbySharedBuffers, dropStrategy };
}

function emptyResult(seed: number, level: SynchronousCommit): SeedResult {
  return {
    seed,
    ok: false,
    level,
    acked: 0,
    lost: 0,
    expectedErrors: {},
    faults: {
      cut_replication: 0,
      kill_standby: 0,
      wal_write_fail: 0,
      corrupt_wal: 0,
      crash_primary: 0,
    },
  };
}

export async function runSeed(o: SeedOptions): Promise<SeedResult> {
  const rng = new SeededRandom(o.seed);
  const { level, standbySharedBuffers, dropStrategy } = drawSettings(rng);
  const result = emptyResult(o.seed, level);
  o.log(
    `seed ${o.seed}: synchronous_commit=${level} standby shared_buffers=${standbySharedBuffers} ${dropStrategy}`,
  );
  const c = await TortureCluster.create({
    sharedBuffers: '16MB',
    standbySharedBuffers,
    synchronousCommit: level,
    dropStrategy,
    thresholdDivisor: 32,
    forceOptimized: false,
    walSegmentSize: SEGMENT_SIZE,
    listen: '127.0.0.1',
    // A killed standby reconnects from its flush LSN, at most one statement's WAL (< 1 segment)
    // behind; 2 segments of wal_keep_size keep that across a CHECKPOINT run meanwhile, as a
    // PostgreSQL standby without a slot needs. Older WAL is removed, so removal is exercised.
    wal: { walKeepSizeMb: 2 },
  });
  let failed = false;
  try {
    await c.startNode('primary');
    await c.startNode('standby');
    await c.pollUntil(
      async () => (await c.status('standby')).receiverState === 'streaming',
      'standby streaming',
    );
    const run = new TortureRun(c, rng, level, result, o);
    await run.workloadWithFaults();
    await run.crashAndPromote();
    checkLogs(c);
    result.ok = true;
    return result;
  } catch (e) {
    failed = true;
    result.error = (e as Error).message;
    result.dir = o.keep ? c.dir : undefined;
    return result;
  } finally {
    await c.destroy(failed && o.keep);
  }
}

/** One seed's run on a started, streaming pair: the workload, its faults, the final failover. */
class TortureRun {
  private readonly w: Workload;
  private paused = false;

  constructor(
    private readonly c: TortureCluster,
    private readonly rng: SeededRandom,
    private readonly level: SynchronousCommit,
    private readonly result: SeedResult,
    private readonly o: SeedOptions,
  ) {
    this.w = new Workload(rng);
  }

  private expected(name: string): void {
    this.result.expectedErrors[name] = (this.result.expectedErrors[name] ?? 0) + 1;
  }

  private async exec(st: Statement): Promise<void> {
    await this.c.sql('primary', st.sql);
    st.apply();
    this.result.acked++;
  }

  /** `o.ops` random steps (a fault, a pause toggle or a statement), converging every 12. */
  async workloadWithFaults(): Promise<void> {
    const { rng } = this;
    await this.exec(this.w.createLedger());
    for (let i = 0; i < this.o.ops; i++) {
      const r = rng.float();
      if (r < 0.2) await this.fault(rng.pick(FAULT_KINDS));
      else if (r < 0.27 && this.level !== 'remote_apply') await this.setPaused(!this.paused);
      else await this.exec(this.w.randomStatement());
      if (i % 12 === 11) await this.converge(`after op ${i + 1}`);
    }
    await this.converge('before the final crash');
  }

  private async setPaused(want: boolean): Promise<void> {
    if (want === this.paused) return;
    const c = this.c;
    await c.sql('standby', want ? 'SELECT pg_wal_replay_pause()' : 'SELECT pg_wal_replay_resume()');
    if (want)
      await c.pollUntil(
        async () =>
          (await c.scalar('standby', 'SELECT pg_get_wal_replay_pause_state()')) === 'paused',
        'pause',
      );
    this.paused = want;
  }

  /** I2 + I3: converge, then compare the nodes at equal LSN and with the model. */
  private async converge(why: string): Promise<void> {
    const c = this.c;
    await this.setPaused(false);
    await c.waitForCatchup('replay');
    const [ps, ss] = [await c.status('primary'), await c.status('standby')];
    checkReplayedToFlush(why, ps.flushLsn, ss.replayLsn);
    const p = await (await c.client('primary')).inspect();
    const s = await (await c.client('standby')).inspect();
    checkConverged(why, ps.flushLsn, p, s, this.w.model);
  }

  private async fault(kind: (typeof FAULT_KINDS)[number]): Promise<void> {
    const { c, rng } = this;
    this.result.faults[kind]++;
    this.o.log(`  fault ${kind}`);
    if (kind === 'corrupt_wal') return this.corruptWal();
    // Inject while a statement is on its way (its commit may wait for the standby).
    const st = this.w.randomStatement();
    const running = this.exec(st);
    await new Promise((r) => setTimeout(r, rng.int(0, 20)));
    const standby = await c.client('standby');
    switch (kind) {
      case 'cut_replication':
        await standby.request({ op: 'fault', fault: 'cut_replication', holdMs: rng.int(0, 300) });
        break;
      case 'wal_write_fail':
        await standby.request({ op: 'fault', fault: 'wal_write_fail', holdMs: rng.int(50, 800) });
        this.expected('ENOSPC');
        break;
      case 'kill_standby': {
        await c.kill('standby');
        await c.startNode('standby'); // over the stale postmaster.pid
        this.paused = false;
        if (!(await c.status('standby')).startupReplay.crashRecovery)
          throw new FatalCheck('kill_standby: restart did not run crash recovery');
        break;
      }
    }
    await running;
  }

  /** Flip a byte in a not yet replayed record on the standby; replay must stop exactly there. */
  private async corruptWal(): Promise<void> {
    const { c, rng } = this;
    await this.setPaused(true);
    const inFlight = [this.w.randomStatement(), this.w.ledgerInsert()];
    // Under remote_apply these commits wait for replay, which is paused: run them in the background.
    const running = (async () => {
      for (const st of inFlight) await this.exec(st);
    })();
    if (this.level === 'remote_apply') {
      // The first commit waits for an apply that cannot happen yet: its WAL is flushed.
      await c.pollUntil(
        async () => (await c.status('primary')).syncWaiters > 0,
        'a commit waiting for apply',
      );
    } else {
      await running;
    }
    const target = parseLsn((await c.status('primary')).flushLsn);
    await c.pollUntil(
      async () => parseLsn((await c.status('standby')).receiveLsn) >= target,
      'standby flush',
    );
    const ss = await c.status('standby');
    const from = maxAlign(parseLsn(ss.replayLsn));
    const recs = [
      ...readWal(c.dataDir('standby'), from, {
        timeline: 1,
        segmentSize: SEGMENT_SIZE,
        stopLsn: parseLsn(ss.receiveLsn),
        disk: nodeDisk,
      }),
    ];
    if (recs.length === 0)
      throw new FatalCheck(`corrupt_wal: no unreplayed record after ${formatLsn(from)}`);
    const rec = rng.pick(recs);
    const file = flipBitAt(c.dataDir('standby'), rec.lsn + 25, rng.int(0, 7));
    await this.setPaused(false);
    await c.pollUntil(
      async () => (await c.status('standby')).replayError !== null,
      'replay to stop at the flipped record',
    );
    const err = (await c.status('standby')).replayError as { lsn: string; message: string };
    if (err.lsn !== formatLsn(rec.lsn) || !err.message.includes(file)) {
      throw new FatalCheck(
        `I4: replay error ${JSON.stringify(err)} does not name the flipped record ${formatLsn(rec.lsn)} in ${file}`,
      );
    }
    if (parseLsn((await c.status('standby')).replayLsn) > rec.lsn)
      throw new FatalCheck('I4: replay went past the flipped record');
    this.expected('invalid_wal');
    // Heal: a restart ends local WAL at the bad record and streams it again from the primary.
    await c.stopNode('standby', 'fast');
    await c.startNode('standby');
    await running;
  }

  /**
   * The final failover: a stream of ledger commits, the primary crashes (SIGKILL or immediate
   * stop) after some of them, the standby is promoted; then I1 and I3 on the promoted node.
   */
  async crashAndPromote(): Promise<void> {
    const { c, rng, w, result } = this;
    if (this.level !== 'remote_apply' && rng.chance(0.3)) await this.setPaused(true);
    const before = w.ledgerAcked;
    const stopAfter = rng.int(3, 40);
    let writerError: unknown = null;
    const primaryClient = await c.client('primary'); // one connection, so the crash is what ends it
    const writer = (async () => {
      for (;;) {
        const st = w.ledgerInsert();
        try {
          await primaryClient.sql(st.sql);
          st.apply();
          result.acked++;
        } catch (e) {
          writerError = e;
          return;
        }
      }
    })();
    await c.pollUntil(
      async () => w.ledgerAcked >= before + stopAfter,
      `${stopAfter} ledger commits`,
    );
    result.faults.crash_primary++;
    const how = rng.pick(['kill', 'immediate'] as const);
    this.o.log(`  crash primary (${how}) after ${w.ledgerAcked} ledger commits`);
    if (how === 'kill') await c.kill('primary');
    else await c.stopNode('primary', 'immediate');
    await writer;
    if (!isWalsimError(writerError) || writerError.kind !== 'not_connected') {
      throw new FatalCheck(
        `I4: the commit in flight at the crash failed with ${String(writerError)}, expected a lost connection`,
      );
    }
    this.expected('not_connected');
    const promoted = (await (
      await c.client('standby')
    ).request({ op: 'promote', wait: true, waitSeconds: 60 })) as { promoted: boolean };
    if (!promoted.promoted) throw new FatalCheck('promotion did not finish');
    await checkPromoted(c, w, result);
    await c.sql('standby', 'INSERT INTO ledger VALUES (0)'); // the promoted node takes writes
  }
}

/** Flip bit `bit` of the WAL byte at `lsn` in its segment file (timeline 1); returns the file name. */
function flipBitAt(dataDir: string, lsn: number, bit: number): string {
  const file = segmentFileName(1, segmentOf(lsn, SEGMENT_SIZE), SEGMENT_SIZE);
  const fd = fs.openSync(path.join(walDir(dataDir), file), 'r+');
  const b = Buffer.alloc(1);
  fs.readSync(fd, b, 0, 1, segmentOffset(lsn, SEGMENT_SIZE));
  b[0] = b[0]! ^ (1 << bit);
  fs.writeSync(fd, b, 0, 1, segmentOffset(lsn, SEGMENT_SIZE));
  fs.closeSync(fd);
  return file;
}
