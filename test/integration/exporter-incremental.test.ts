/**
 * The exporter's incremental prediction (scripts/exporter/incremental.ts) against a real
 * PostgreSQL 15 primary + standby (skipped, naming the reason, without the server binaries): over
 * several cycles with WAL arriving and replay moving — the standby keeping up, replay paused with a
 * backlog of TRUNCATEs and DROPs growing across cycles, replay resumed, a restartpoint, a restarted
 * standby — each incremental prediction equals a from-scratch `predictStandby` of the same state
 * (same replay and receive LSN): records by type, drop calls and their paths, counts, seconds.
 * Also: a cycle whose replay LSN did not move reads only the WAL received since the last cycle; one
 * whose replay LSN moved part-way through a backlog reads the new WAL and the one LSN window the
 * replay LSN cuts, not the rest of the backlog; each start over is counted under its reason. No
 * timing is asserted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_PROFILE, loadProfile } from '../../cost-model/profile.ts';
import { IncrementalPredictor } from '../../scripts/exporter/incremental.ts';
import { predictStandby, type Prediction } from '../../scripts/predict/prediction.ts';
import {
  initPgCluster,
  pgConnect,
  pgCtl,
  pgDataDir,
  readPgEngine,
} from '../../scripts/postgres/pg-cluster.ts';
import { pollUntil } from '../../server/poll.ts';
import { parseLsn } from '../../wal/lsn.ts';
import { PgDirs, pgUnavailableReason } from '../helpers/postgres.ts';

const reason = pgUnavailableReason();
const dirs = new PgDirs();

/**
 * What must be equal: everything the counts and the profile make, not the wording of sources.
 * The exporter keeps no list of every drop call (memory bounded by relations, not records): only
 * the range's first full-scan drop, the one `dominates` names.
 */
function comparable(p: Prediction) {
  const firstFullScan = p.drops.list.filter((d) => d.path === 'full-scan').slice(0, 1);
  return {
    range: p.range,
    learnedRecords: p.source.learnedRecords,
    counts: p.counts,
    records: p.records,
    drops: { ...p.drops, list: firstFullScan },
    predicted: p.predicted,
    assumptions: p.assumptions,
    dominates: p.dominates,
  };
}

describe.skipIf(reason !== null)(
  `the exporter's incremental prediction on real PostgreSQL 15${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    let dir = '';
    let standbyUrl = '';
    const profile = loadProfile(DEFAULT_PROFILE);
    const inc = new IncrementalPredictor();
    const input = () => ({
      standby: standbyUrl,
      pgdata: pgDataDir(dir, 'standby'),
      profile,
      profileRef: DEFAULT_PROFILE,
      pgWaldump: '',
    });
    const sql = async (node: 'primary' | 'standby', ...stmts: string[]) => {
      const c = await pgConnect(dir, node);
      try {
        let last: Array<Record<string, unknown>> = [];
        for (const s of stmts) last = (await c.query(s)).rows;
        return last;
      } finally {
        await c.end();
      }
    };
    const primaryLsn = async () =>
      String((await sql('primary', 'SELECT pg_current_wal_flush_lsn()::text AS l'))[0]!.l);
    const standbyHas = async (what: 'receive' | 'replay', lsn: string) =>
      pollUntil(
        async () =>
          (await sql('standby', `SELECT pg_last_wal_${what}_lsn() >= '${lsn}' AS ok`))[0]!.ok ===
          true,
        `the standby to ${what} ${lsn}`,
        120_000,
        50,
      );
    const setPaused = async (paused: boolean) => {
      await sql('standby', `SELECT pg_wal_replay_${paused ? 'pause' : 'resume'}()`);
      await pollUntil(
        async () =>
          ((await sql('standby', 'SELECT pg_get_wal_replay_pause_state() AS s'))[0]!.s ===
            'paused') ===
          paused,
        `replay to be ${paused ? 'paused' : 'running'}`,
        60_000,
        50,
      );
    };

    /**
     * One incremental cycle and one from-scratch prediction of the same state. The primary's
     * background records (RUNNING_XACTS) can move the receive LSN between the two: then again.
     */
    const cycle = async () => {
      for (let attempt = 0; ; attempt++) {
        const a = await inc.predict(input());
        const b = await predictStandby(input());
        if (a.range.from === b.range.from && a.range.to === b.range.to) return { a, b };
        expect(attempt).toBeLessThan(10);
      }
    };

    beforeAll(async () => {
      dir = dirs.fresh('exporter-incremental');
      await initPgCluster(dir, { sharedBuffers: '128MB', primarySharedBuffers: '128MB' });
      standbyUrl = `postgresql://postgres@127.0.0.1:${readPgEngine(dir).ports.standby}/postgres`;
      const stmts: string[] = [];
      for (let i = 1; i <= 30; i++)
        stmts.push(
          `CREATE TABLE t${i} (id int, c text)`,
          `INSERT INTO t${i} SELECT g, repeat('x', 200) FROM generate_series(1, ${i * 40}) g`,
        );
      await sql('primary', ...stmts);
      await standbyHas('replay', await primaryLsn());
    }, 300_000);
    afterAll(() => dirs.removeAll());

    it('equals a from-scratch prediction cycle after cycle, reading only the new WAL while replay stands still', async () => {
      // 1. The standby keeps up: nothing unreplayed; the first cycle starts from the redo.
      let { a, b } = await cycle();
      expect(comparable(a)).toEqual(comparable(b));
      expect(inc.restarts.first).toBe(1);

      // 2. Replay paused, a backlog arrives over three cycles (TRUNCATE, UPDATE, DROP TABLE).
      await setPaused(true);
      for (let round = 0; round < 3; round++) {
        const stmts = [`UPDATE t${20 + round} SET c = c || 'y'`, `DROP TABLE t${27 + round}`];
        for (let i = 1 + round * 5; i <= 5 + round * 5; i++) stmts.push(`TRUNCATE t${i}`);
        await sql('primary', ...stmts);
        await standbyHas('receive', await primaryLsn());
        const before = inc.walReadBytes;
        const prevTo = a.range.to;
        const prevFrom = a.range.from;
        ({ a, b } = await cycle());
        expect(comparable(a)).toEqual(comparable(b));
        expect(a.records.total).toBeGreaterThan(0);
        expect(a.drops.calls.fullScan + a.drops.calls.lookup).toBeGreaterThan(0);
        // Replay did not move: only [last receive LSN, receive LSN) was read (a record cut by
        // the last receive LSN is read whole now: at most one page more).
        const read = inc.walReadBytes - before;
        const fresh = parseLsn(a.range.to) - parseLsn(prevTo);
        if (round > 0) {
          expect(a.range.from).toBe(prevFrom);
          expect(read).toBeGreaterThanOrEqual(fresh);
          expect(read).toBeLessThanOrEqual(fresh + 8192);
        }
      }
      expect(inc.restarts.first).toBe(1);
      expect(Object.values(inc.restarts).reduce((x, y) => x + y)).toBe(1);

      // 3. Replay resumed and caught up, then paused again with more backlog: replay moved.
      await setPaused(false);
      await standbyHas('replay', await primaryLsn());
      await setPaused(true);
      await sql('primary', 'TRUNCATE t16', 'TRUNCATE t17', 'DROP TABLE t18');
      await standbyHas('receive', await primaryLsn());
      ({ a, b } = await cycle());
      expect(comparable(a)).toEqual(comparable(b));
      expect(a.drops.calls.fullScan + a.drops.calls.lookup).toBeGreaterThan(0);
      expect(Object.values(inc.restarts).reduce((x, y) => x + y)).toBe(1);
      await setPaused(false);
      await standbyHas('replay', await primaryLsn());
    }, 600_000);

    it('retires the windows replay passed: a backlog replayed part-way is not read again', async () => {
      // Small windows, so that a backlog of a few MB spans many.
      const w = new IncrementalPredictor({ windowBytes: 64 << 10, maxWindows: 16 });
      const cycleW = async () => {
        for (let attempt = 0; ; attempt++) {
          const a = await w.predict(input());
          const b = await predictStandby(input());
          if (a.range.from === b.range.from && a.range.to === b.range.to) return { a, b };
          expect(attempt).toBeLessThan(10);
        }
      };
      await sql('primary', 'CREATE TABLE big (id int, c text)');
      await standbyHas('replay', await primaryLsn());
      await setPaused(true);
      let { a, b } = await cycleW();
      const marks: string[] = [];
      // A backlog in chunks: rows, TRUNCATEs and DROPs between them (drop paths to count).
      for (let chunk = 0; chunk < 6; chunk++) {
        await sql(
          'primary',
          `INSERT INTO big SELECT g, repeat('b', 300) FROM generate_series(1, 8000) g`,
          `TRUNCATE t${1 + chunk}`,
          `UPDATE t${10 + chunk} SET c = c || 'w'`,
        );
        marks.push(await primaryLsn());
      }
      await standbyHas('receive', marks[5]!);
      ({ a, b } = await cycleW());
      expect(comparable(a)).toEqual(comparable(b));
      // Replay moves part-way through the backlog, twice: each time the cycle reads the new WAL
      // (little: the primary is idle) and the one window the replay LSN cuts, not what replay
      // passed nor the rest of the backlog (which a cycle that does not retire windows reads:
      // the WAL replayed since the last cycle, then the whole unreplayed range again).
      // Replay is stopped inside the backlog deterministically: a standby session holds
      // t{m+2}, whose TRUNCATE (chunk m+1, after marks[m]) replay must lock, so the startup
      // process waits there (a recovery conflict, well under max_standby_streaming_delay);
      // the pause requested meanwhile lands right after that record once the session ends.
      // Resuming and polling for the mark instead let replay run past the whole backlog.
      for (const m of [1, 3]) {
        const prevFrom = a.range.from;
        const holder = await pgConnect(dir, 'standby');
        try {
          await holder.query('BEGIN');
          await holder.query(`SELECT count(*) FROM t${m + 2}`);
          await sql('standby', 'SELECT pg_wal_replay_resume()');
          await standbyHas('replay', marks[m]!);
          await sql('standby', 'SELECT pg_wal_replay_pause()');
          await holder.query('ROLLBACK');
        } finally {
          await holder.end();
        }
        await setPaused(true);
        const before = w.walReadBytes;
        ({ a, b } = await cycleW());
        expect(comparable(a)).toEqual(comparable(b));
        const read = w.walReadBytes - before;
        const withoutRetiring = parseLsn(a.range.to) - parseLsn(prevFrom);
        expect(read).toBeLessThan(withoutRetiring);
      }
      await setPaused(false);
      await standbyHas('replay', await primaryLsn());
      ({ a, b } = await cycleW());
      expect(comparable(a)).toEqual(comparable(b));
      expect(Object.values(w.restarts).reduce((x, y) => x + y)).toBe(1);
      expect(w.stats()!.windows).toBeLessThanOrEqual(17);
    }, 600_000);

    it('starts over, counted by reason, after a restartpoint and after the standby restarted', async () => {
      await sql('primary', 'CHECKPOINT', 'TRUNCATE t19');
      await standbyHas('replay', await primaryLsn());
      await sql('standby', 'CHECKPOINT');
      let { a, b } = await cycle();
      expect(comparable(a)).toEqual(comparable(b));
      expect(inc.restarts.restartpoint).toBe(1);

      await pgCtl(dir, 'standby', 'stop', { mode: 'fast' });
      await pgCtl(dir, 'standby', 'start');
      await sql('primary', 'TRUNCATE t20');
      await standbyHas('replay', await primaryLsn());
      ({ a, b } = await cycle());
      expect(comparable(a)).toEqual(comparable(b));
      expect(inc.restarts.standby_restart).toBe(1);
    }, 600_000);
  },
);
