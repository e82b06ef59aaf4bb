/**
 * `--engine postgres` end to end on a real PostgreSQL primary + synchronous standby: one small cell
 * of seed 001's Test B (128MB, 20 tables with TOAST tables, TRUNCATE while replay is paused), run
 * through the step code both engines share (the directory says PostgreSQL), then the same order
 * rules through the CLI. Skips, naming the reason, when the PostgreSQL server binaries are absent.
 * Method: check what the server and pg_waldump report (settings, record counts, log instants in
 * order, rows), never how long anything took.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { runScript } from '../helpers/cli.ts';
import { PgDirs, pgUnavailableReason } from '../helpers/postgres.ts';
import { initPgCluster, pgConnect } from '../../scripts/postgres/pg-cluster.ts';
import { runStep, type ResumeResult } from '../../scripts/experiment/steps.ts';
import { waldumpCount } from '../../scripts/postgres/pg-waldump.ts';

const reason = pgUnavailableReason();
const dirs = new PgDirs();
afterAll(() => dirs.removeAll());

describe('--pg-bin pointing nowhere', () => {
  it('fails with one line saying it is not a PostgreSQL installation', async () => {
    const r = await runScript('cluster.ts', [
      'start',
      '--engine',
      'postgres',
      '--pg-bin',
      '/nonexistent/bin',
      '--dir',
      dirs.fresh('nobin'),
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(
      /--pg-bin \/nonexistent\/bin is not a PostgreSQL installation \(no initdb, pg_ctl, postgres\)/,
    );
  });
});

describe.skipIf(reason !== null)(`real PostgreSQL${reason ? ` (skipped: ${reason})` : ''}`, () => {
  it('runs Test B TRUNCATE of 20 TOAST-able tables at 128MB and times the failover from the log', async () => {
    const dir = dirs.fresh('cell');
    await initPgCluster(dir, { sharedBuffers: '128MB', primarySharedBuffers: '128MB' });
    const c = await pgConnect(dir, 'primary');
    const settings = Object.fromEntries(
      (
        await c.query(
          "SELECT name, setting FROM pg_settings WHERE name IN ('synchronous_commit', 'synchronous_standby_names', 'autovacuum', 'full_page_writes', 'max_locks_per_transaction', 'listen_addresses')",
        )
      ).rows.map((r) => [r.name, r.setting]),
    );
    const rep = (
      await c.query('SELECT application_name, state, sync_state FROM pg_stat_replication')
    ).rows;
    await c.end();
    expect(settings).toEqual({
      autovacuum: 'off',
      full_page_writes: 'off',
      listen_addresses: '127.0.0.1',
      max_locks_per_transaction: '10000',
      synchronous_commit: 'remote_write',
      synchronous_standby_names: 'walreceiver',
    });
    expect(rep).toEqual([
      { application_name: 'walreceiver', state: 'streaming', sync_state: 'sync' },
    ]);

    const o = { clusterDir: dir, workload: 'multi' as const, tables: 20, toast: true };
    expect((await runStep('create', o)).toast).toBe(true);
    expect((await runStep('insert', o)).pagesPerTable).toBe(1);
    // Out of order: truncate before pause names the step to run first.
    await expect(runStep('truncate', o)).rejects.toMatchObject({ runFirst: 'pause' });
    await runStep('pause', o);
    await runStep('truncate', o);
    await runStep('stop', o);
    const r = (await runStep('resume', o)) as ResumeResult;
    if (r.engine !== 'postgres') throw new Error(`resume answered for engine ${r.engine}`);

    expect(r.promoted).toBe(true);
    expect(r.newTimeline).toBe(2);
    // The WAL replayed at failover: one commit per TRUNCATE, three new relfilenodes each (heap,
    // TOAST heap, TOAST index), and the log's "redo done at" is the last record of that range.
    expect(r.waldump).not.toBeNull();
    expect(waldumpCount(r.waldump!, 'Transaction', 'COMMIT')).toBe(20);
    expect(waldumpCount(r.waldump!, 'Storage', 'CREATE')).toBe(60);
    expect(r.recordsReplayed).toBe(r.waldump!.total.count);
    expect(r.log.redoDoneLsn).not.toBeNull();
    // Instants in the order PostgreSQL goes through them.
    const t = r.log;
    const order = [
      Date.parse(r.resumeAt) - 1,
      t.promoteReceivedAt!,
      t.redoDoneAt!,
      t.newTimelineAt!,
      t.archiveRecoveryCompleteAt!,
      t.readyAt!,
    ];
    expect(order.every((v) => Number.isFinite(v))).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect(r.failoverMs).toBeGreaterThan(0);
    expect(r.seedMethod.ms).toBeGreaterThan(0);
    const count = await runStep('count', o);
    expect(count.totalRows).toBe(0);
  }, 180_000);

  it('refuses steps out of order through the CLI, naming the step to run first', async () => {
    const dir = dirs.fresh('cli');
    const start = await runScript('cluster.ts', [
      'start',
      '--engine',
      'postgres',
      '--dir',
      dir,
      '--json',
    ]);
    expect(start.code, start.stderr).toBe(0);
    expect(start.json.engine).toBe('postgres');
    const r = await runScript('multi.ts', [
      'pause',
      '--dir',
      dir,
      '--engine',
      'postgres',
      '--json',
    ]);
    expect(r.code).toBe(1);
    expect(r.json.error).toMatchObject({ kind: 'order', runFirst: 'create' });
    const walsimOnly = await runScript('multi.ts', [
      'create',
      '--dir',
      dir,
      '--engine',
      'walsim',
      '--json',
    ]);
    expect(walsimOnly.json.error.message).toMatch(/holds a PostgreSQL cluster/);
    const stop = await runScript('cluster.ts', ['stop', '--dir', dir, '--mode', 'immediate']);
    expect(stop.code, stop.stderr).toBe(0);
  }, 120_000);
});
