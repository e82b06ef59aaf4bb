/**
 * One torture seed: a random workload on a real primary/standby pair (creates, inserts, deletes,
 * vacuums, truncates, checkpoints, pause/resume), interleaved with random faults (replication cut,
 * standby SIGKILL, standby disk full, a byte flipped in the standby's WAL), then a final crash of
 * the primary during a stream of commits and a promotion. Everything random comes from the seed.
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
import { FatalCheck, TortureCluster } from './cluster.ts';
import { Model } from './model.ts';
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

interface Statement {
  sql: string;
  apply(): void;
}

export async function runSeed(o: SeedOptions): Promise<SeedResult> {
  const rng = new SeededRandom(o.seed);
  const level = rng.pick<SynchronousCommit>(['remote_write', 'on', 'remote_apply']);
  const standbySharedBuffers = rng.pick(['16MB', '128MB', '1GB']);
  // Every drop strategy, the seed debate's alternatives included: they must survive the same faults.
  const dropStrategy = rng.pick<DropStrategy>(DROP_STRATEGIES);
  const result: SeedResult = {
    seed: o.seed,
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
  const expected = (name: string) =>
    (result.expectedErrors[name] = (result.expectedErrors[name] ?? 0) + 1);
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
    const model = new Model();
    let paused = false;
    let tableNo = 0;
    let ledgerNext = 1;
    let ledgerAcked = 0;
    const userTables = () => model.names().filter((n) => n !== 'ledger');

    const exec = async (st: Statement) => {
      await c.sql('primary', st.sql);
      st.apply();
      result.acked++;
    };
    const ledgerInsert = (): Statement => {
      const n = ledgerNext++;
      return {
        sql: `INSERT INTO ledger VALUES (${n})`,
        apply: () => {
          model.insert('ledger', n, n);
          ledgerAcked = n;
        },
      };
    };
    await exec({ sql: 'CREATE TABLE ledger (c int)', apply: () => model.create('ledger') });

    /** A random write statement (never blocks on its own). */
    const randomStatement = (): Statement => {
      const tables = userTables();
      const kind =
        tables.length === 0
          ? 'create'
          : rng.weighted({
              create: tables.length < 6 ? 2 : 0,
              insert: 6,
              values: 2,
              ledger: 5,
              delete: 3,
              vacuum: 3,
              truncate: 1,
              checkpoint: 1,
            });
      const t = tables.length > 0 ? rng.pick(tables) : '';
      switch (kind) {
        case 'create': {
          const name = `t${tableNo++}`;
          return { sql: `CREATE TABLE ${name} (c int)`, apply: () => model.create(name) };
        }
        case 'insert': {
          const lo = rng.int(1, 5000);
          const hi = lo + rng.pick([1, 10, 226, 1000, 4000]) - 1;
          return {
            sql: `INSERT INTO ${t} SELECT generate_series(${lo}, ${hi})`,
            apply: () => model.insert(t, lo, hi),
          };
        }
        case 'values': {
          const vs = Array.from({ length: rng.int(1, 4) }, () => rng.int(1, 9000));
          return {
            sql: `INSERT INTO ${t} VALUES ${vs.map((v) => `(${v})`).join(', ')}`,
            apply: () => vs.forEach((v) => model.insert(t, v, v)),
          };
        }
        case 'ledger':
          return ledgerInsert();
        case 'delete': {
          const op = rng.pick(['>', '<', 'all'] as const);
          const k = rng.int(1, 6000);
          return {
            sql: `DELETE FROM ${t}${op === 'all' ? '' : ` WHERE c ${op} ${k}`}`,
            apply: () => model.delete(t, op, k),
          };
        }
        case 'vacuum':
          return { sql: rng.chance(0.3) ? 'VACUUM' : `VACUUM ${t}`, apply: () => {} };
        case 'truncate':
          return { sql: `TRUNCATE ${t}`, apply: () => model.truncate(t) };
        default:
          return { sql: 'CHECKPOINT', apply: () => {} };
      }
    };

    const setPaused = async (want: boolean) => {
      if (want === paused) return;
      await c.sql(
        'standby',
        want ? 'SELECT pg_wal_replay_pause()' : 'SELECT pg_wal_replay_resume()',
      );
      if (want)
        await c.pollUntil(
          async () =>
            (await c.scalar('standby', 'SELECT pg_get_wal_replay_pause_state()')) === 'paused',
          'pause',
        );
      paused = want;
    };

    /** I2 + I3: converge, then compare the nodes at equal LSN and with the model. */
    const converge = async (why: string) => {
      await setPaused(false);
      await c.waitForCatchup('replay');
      const [ps, ss] = [await c.status('primary'), await c.status('standby')];
      if (maxAlign(parseLsn(ss.replayLsn)) !== parseLsn(ps.flushLsn))
        throw new FatalCheck(
          `I2 (${why}): standby replayed to ${ss.replayLsn}, primary flushed ${ps.flushLsn}`,
        );
      const p = await (await c.client('primary')).inspect();
      const s = await (await c.client('standby')).inspect();
      const strip = (x: typeof p) => JSON.stringify(x.tables.map(({ buffered: _, ...t }) => t));
      if (strip(p) !== strip(s))
        throw new FatalCheck(
          `I2 (${why}): standby differs from primary at ${ps.flushLsn}:\n  primary ${strip(p)}\n  standby ${strip(s)}`,
        );
      for (const [node, x] of [
        ['primary', p],
        ['standby', s],
      ] as const) {
        if (x.orphanBuffers.length > 0)
          throw new FatalCheck(
            `I3 (${why}): ${node} buffers hold dropped blocks ${x.orphanBuffers.slice(0, 5).join(', ')}`,
          );
      }
      for (const t of p.tables) {
        if (t.rows !== model.count(t.name))
          throw new FatalCheck(
            `I2 (${why}): table ${t.name} has ${t.rows} rows, model says ${model.count(t.name)}`,
          );
      }
      if (p.tables.length !== model.names().length)
        throw new FatalCheck(
          `I2 (${why}): ${p.tables.length} tables, model has ${model.names().length}`,
        );
    };

    /** Flip a byte in a not yet replayed record on the standby; replay must stop exactly there. */
    const corruptWal = async () => {
      await setPaused(true);
      const inFlight = [randomStatement(), ledgerInsert()];
      // Under remote_apply these commits wait for replay, which is paused: run them in the background.
      const running = (async () => {
        for (const st of inFlight) await exec(st);
      })();
      if (level === 'remote_apply') {
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
      const at = rec.lsn + 25;
      const file = segmentFileName(1, segmentOf(at, SEGMENT_SIZE), SEGMENT_SIZE);
      const fd = fs.openSync(path.join(walDir(c.dataDir('standby')), file), 'r+');
      const b = Buffer.alloc(1);
      fs.readSync(fd, b, 0, 1, segmentOffset(at, SEGMENT_SIZE));
      b[0] = b[0]! ^ (1 << rng.int(0, 7));
      fs.writeSync(fd, b, 0, 1, segmentOffset(at, SEGMENT_SIZE));
      fs.closeSync(fd);
      await setPaused(false);
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
      expected('invalid_wal');
      // Heal: a restart ends local WAL at the bad record and streams it again from the primary.
      await c.stopNode('standby', 'fast');
      await c.startNode('standby');
      await running;
    };

    const fault = async (kind: (typeof FAULT_KINDS)[number]) => {
      result.faults[kind]++;
      o.log(`  fault ${kind}`);
      if (kind === 'corrupt_wal') return corruptWal();
      // Inject while a statement is on its way (its commit may wait for the standby).
      const st = randomStatement();
      const running = exec(st);
      await new Promise((r) => setTimeout(r, rng.int(0, 20)));
      const standby = await c.client('standby');
      switch (kind) {
        case 'cut_replication':
          await standby.request({ op: 'fault', fault: 'cut_replication', holdMs: rng.int(0, 300) });
          break;
        case 'wal_write_fail':
          await standby.request({ op: 'fault', fault: 'wal_write_fail', holdMs: rng.int(50, 800) });
          expected('ENOSPC');
          break;
        case 'kill_standby': {
          await c.kill('standby');
          await c.startNode('standby'); // over the stale postmaster.pid
          paused = false;
          if (!(await c.status('standby')).startupReplay.crashRecovery)
            throw new FatalCheck('kill_standby: restart did not run crash recovery');
          break;
        }
      }
      await running;
    };

    for (let i = 0; i < o.ops; i++) {
      const r = rng.float();
      if (r < 0.2) await fault(rng.pick(FAULT_KINDS));
      else if (r < 0.27 && level !== 'remote_apply') await setPaused(!paused);
      else await exec(randomStatement());
      if (i % 12 === 11) await converge(`after op ${i + 1}`);
    }
    await converge('before the final crash');

    // Final: a stream of ledger commits, the primary crashes (SIGKILL or immediate stop), promote.
    if (level !== 'remote_apply' && rng.chance(0.3)) await setPaused(true);
    const before = ledgerAcked;
    const stopAfter = rng.int(3, 40);
    let writerError: unknown = null;
    const primaryClient = await c.client('primary'); // one connection, so the crash is what ends it
    const writer = (async () => {
      for (;;) {
        const st = ledgerInsert();
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
    await c.pollUntil(async () => ledgerAcked >= before + stopAfter, `${stopAfter} ledger commits`);
    result.faults.crash_primary++;
    const how = rng.pick(['kill', 'immediate'] as const);
    o.log(`  crash primary (${how}) after ${ledgerAcked} ledger commits`);
    if (how === 'kill') await c.kill('primary');
    else await c.stopNode('primary', 'immediate');
    await writer;
    if (!isWalsimError(writerError) || writerError.kind !== 'not_connected') {
      throw new FatalCheck(
        `I4: the commit in flight at the crash failed with ${String(writerError)}, expected a lost connection`,
      );
    }
    expected('not_connected');
    const promoted = (await (
      await c.client('standby')
    ).request({ op: 'promote', wait: true, waitSeconds: 60 })) as { promoted: boolean };
    if (!promoted.promoted) throw new FatalCheck('promotion did not finish');
    // I1: every acknowledged ledger value, at most one more (the commit in flight), nothing else.
    const kept = Number(
      await c.scalar('standby', `SELECT count(*) FROM ledger WHERE c < ${ledgerAcked + 1}`),
    );
    const total = Number(await c.scalar('standby', 'SELECT count(*) FROM ledger'));
    result.lost = ledgerAcked - kept;
    if (total > kept + 1)
      throw new FatalCheck(
        `I1: ledger has ${total} rows, only ${kept} acknowledged (+1 in flight)`,
      );
    const s = await (await c.client('standby')).inspect();
    for (const t of s.tables) {
      const want = model.count(t.name) + (t.name === 'ledger' ? total - kept : 0);
      if (t.rows !== want) {
        result.lost += t.name === 'ledger' ? 0 : 1;
        throw new FatalCheck(
          `I1: promoted table ${t.name} has ${t.rows} rows, acknowledged statements left ${want}`,
        );
      }
    }
    if (s.orphanBuffers.length > 0)
      throw new FatalCheck(
        `I3: promoted node buffers hold dropped blocks ${s.orphanBuffers.slice(0, 5).join(', ')}`,
      );
    if (result.lost > 0)
      throw new FatalCheck(
        `I1: ${result.lost} acknowledged commits lost (synchronous_commit=${level})`,
      );
    await c.sql('standby', 'INSERT INTO ledger VALUES (0)'); // the promoted node takes writes
    // I4: no programmer error or fatal error anywhere.
    for (const node of ['primary', 'standby'] as const) {
      const bad = c
        .serverLog(node)
        .split('\n')
        .filter((l) => /FATAL|InvariantViolation|internal error|PANIC/.test(l));
      if (bad.length > 0)
        throw new FatalCheck(`I4: ${node} logged: ${bad.slice(0, 3).join(' | ')}`);
    }
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
