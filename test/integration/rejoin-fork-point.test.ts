/**
 * `cluster rejoin`'s rule at its edge, against PostgreSQL 15's: an old primary whose WAL ends
 * exactly at the fork point (its last record ends where the new timeline's history file says the
 * new timeline branched) follows the promoted node; one whose WAL ends past it does not.
 * PostgreSQL: walsender.c StartReplication refuses only when switchpoint < startpoint, and the
 * standby's startup process (xlogrecovery.c rescanLatestTimeLine) refuses a new timeline that
 * "forked off current database system timeline … before current recovery point", i.e. when the
 * switch point is below the end of the last record it replayed; walsim's checkRejoin refuses when
 * the end of WAL is past the fork point. Method: the same two cases on a real PostgreSQL 15 pair
 * and on walsim — a clean (fast) stop of the primary, whose standby then has every record and is
 * promoted (the edge: end of WAL = switch point, checked exactly); then the roles reversed with
 * WAL the promoted node never received (past the edge) — and accept/refuse compared.
 * Skipped with the reason without PostgreSQL. No timing is asserted.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { clustersPerTest } from '../helpers/cluster.ts';
import { PgDirs, pgUnavailableReason } from '../helpers/postgres.ts';
import {
  initPgCluster,
  pgConnect,
  pgCtl,
  pgDataDir,
  pgLogPath,
  readPgEngine,
  runPgProgram,
  type PgNodeName,
} from '../../scripts/postgres/pg-cluster.ts';
import { formatLsn, parseLsn } from '../../wal/lsn.ts';
import { parseTimelineHistory } from '../../wal/segment.ts';
import { pollUntil } from '../../server/poll.ts';
import { rejoinVerdict } from '../../server/topology.ts';

const reason = pgUnavailableReason();
const dirs = new PgDirs();
afterAll(() => dirs.removeAll());
const clusters = clustersPerTest();

type Verdict = 'accepted' | 'refused';

/** Where a history file says timeline `tli - 1` ended (the switch point), from `dataDir`'s pg_wal. */
function switchPoint(dataDir: string, tli: number): number {
  const file = path.join(
    dataDir,
    'pg_wal',
    `${tli.toString(16).toUpperCase().padStart(8, '0')}.history`,
  );
  const h = parseTimelineHistory(fs.readFileSync(file, 'utf8'), tli);
  return h[h.length - 2]!.endLsn!;
}

describe.skipIf(reason !== null)(
  `rejoin at the fork point: walsim's rule is PostgreSQL 15's${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    let dir = '';
    const sql = async (node: PgNodeName, ...stmts: string[]) => {
      const c = await pgConnect(dir, node);
      try {
        let rows: Array<Record<string, unknown>> = [];
        for (const s of stmts) rows = (await c.query(s)).rows;
        return rows;
      } finally {
        await c.end();
      }
    };

    const lsnOf = async (node: PgNodeName) =>
      String((await sql(node, 'SELECT pg_current_wal_lsn()::text AS l'))[0]!.l);

    /** The end of a stopped server's WAL (where its next record would start), by pg_waldump. */
    async function endOfWal(node: PgNodeName, from: string, tli: number): Promise<number> {
      const r = await runPgProgram(
        readPgEngine(dir),
        'pg_waldump',
        ['-p', path.join(pgDataDir(dir, node), 'pg_wal'), '-s', from, '-t', String(tli)],
        { allowFail: true },
      );
      // The last line: "error in WAL record at A: invalid record length at END: wanted 24, got 0".
      const m = /invalid record length at ([0-9A-F]+\/[0-9A-F]+)/.exec(r.stderr);
      expect(m, r.stderr).not.toBeNull();
      return parseLsn(m![1]!);
    }

    /** Make stopped `node` a standby of `upstream` and start it; did PostgreSQL let it follow? */
    async function followAs(node: PgNodeName, upstream: PgNodeName, tli: number): Promise<Verdict> {
      const data = pgDataDir(dir, node);
      fs.writeFileSync(path.join(data, 'standby.signal'), '');
      fs.appendFileSync(
        path.join(data, 'postgresql.auto.conf'),
        `primary_conninfo = 'host=127.0.0.1 port=${readPgEngine(dir).ports[upstream]} user=postgres application_name=walreceiver'\n`,
      );
      const logFrom = fs.existsSync(pgLogPath(dir, node))
        ? fs.statSync(pgLogPath(dir, node)).size
        : 0;
      await pgCtl(dir, node, 'start', { allowFail: true });
      const REFUSALS =
        /is not in this server's history|forked off current database system timeline|is not a child of this server's history/;
      let verdict: Verdict | null = null;
      await pollUntil(
        async () => {
          const log = fs.readFileSync(pgLogPath(dir, node), 'utf8').slice(logFrom);
          if (REFUSALS.test(log)) verdict = 'refused';
          else {
            const [w] = await sql(
              node,
              'SELECT received_tli, status FROM pg_stat_wal_receiver',
            ).catch(() => [undefined]);
            const [r] = await sql(node, 'SELECT pg_last_wal_replay_lsn()::text AS l').catch(() => [
              undefined,
            ]);
            const replayed = r?.l === undefined || r.l === null ? 0 : parseLsn(String(r.l));
            if (
              w?.status === 'streaming' &&
              w.received_tli === tli &&
              replayed > switchPoint(pgDataDir(dir, upstream), tli)
            )
              verdict = 'accepted';
          }
          return verdict !== null;
        },
        `${node} to follow or refuse timeline ${tli}`,
        90_000,
        100,
      );
      return verdict!;
    }

    it('PostgreSQL and walsim both accept an old primary whose WAL ends exactly at the fork point, and both refuse one past it', async () => {
      // --- PostgreSQL 15 -------------------------------------------------------------------
      dir = dirs.fresh('rejoin-edge');
      await initPgCluster(dir, { sharedBuffers: '128MB', primarySharedBuffers: '128MB' });
      await sql(
        'primary',
        'CREATE TABLE t (c int)',
        'INSERT INTO t SELECT generate_series(1, 1000)',
      );
      const before = await lsnOf('primary');
      // A fast stop: the walsender sends the shutdown checkpoint and waits for the standby's flush.
      await pgCtl(dir, 'primary', 'stop', { mode: 'fast' });
      await pgCtl(dir, 'standby', 'promote');
      const pgFork = switchPoint(pgDataDir(dir, 'standby'), 2);
      const pgEnd = await endOfWal('primary', before, 1);
      expect(formatLsn(pgEnd), 'the edge: end of WAL = switch point').toBe(formatLsn(pgFork));
      const pgEdge = await followAs('primary', 'standby', 2);
      // Past the edge: the old primary (now following) stops; the new primary writes and stops
      // immediately; the old primary is promoted (timeline 3) without that WAL; the other follows.
      await pgCtl(dir, 'primary', 'stop', { mode: 'fast' });
      await sql('standby', 'INSERT INTO t SELECT generate_series(1, 100)');
      const end2 = await lsnOf('standby');
      await pgCtl(dir, 'standby', 'stop', { mode: 'immediate' });
      await pgCtl(dir, 'primary', 'start');
      await pgCtl(dir, 'primary', 'promote');
      const pgFork3 = switchPoint(pgDataDir(dir, 'primary'), 3);
      expect(parseLsn(end2)).toBeGreaterThan(pgFork3);
      const pgPast = await followAs('standby', 'primary', 3);
      expect([pgEdge, pgPast]).toEqual(['accepted', 'refused']);

      // --- walsim, the same two cases --------------------------------------------------------
      const cl = await clusters.start({ synchronousCommit: 'on' });
      await cl.sql('primary', 'CREATE TABLE t (c int)');
      await cl.sql('primary', 'INSERT INTO t SELECT generate_series(1, 1000)');
      await cl.stopNode('primary', 'fast');
      await (await cl.client('standby')).request({ op: 'promote', wait: true, waitSeconds: 60 });
      const edge = rejoinVerdict(cl.dir, 'primary', 'standby');
      expect(edge.oldEndLsn, 'the edge: end of WAL = fork point').toBe(
        formatLsn(edge.verdict.fork!.lsn!),
      );
      expect(edge.verdict.ok).toBe(true);
      await cl.rejoin('primary', 'standby');
      await cl.sql('standby', 'INSERT INTO t VALUES (1)');
      await cl.waitForCatchup('replay', 'primary', 'standby');
      expect(await cl.scalar('primary', 'SELECT count(*) FROM t')).toBe(1001);
      // Past the edge, as above.
      await cl.stopNode('primary', 'fast');
      await cl.sql('standby', 'INSERT INTO t SELECT generate_series(1, 100)');
      await cl.stopNode('standby', 'immediate');
      await cl.startNode('primary');
      await (await cl.client('primary')).request({ op: 'promote', wait: true, waitSeconds: 60 });
      const past = rejoinVerdict(cl.dir, 'standby', 'primary');
      expect(past.verdict.ok).toBe(false);
      const walsim: Verdict[] = [
        edge.verdict.ok ? 'accepted' : 'refused',
        past.verdict.ok ? 'accepted' : 'refused',
      ];
      expect(walsim).toEqual([pgEdge, pgPast]);
    }, 400_000);
  },
);
