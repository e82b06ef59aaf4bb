/**
 * The rel/multi step scripts (seed 001's rel.sh and test.sh) as real CLI processes against a real
 * cluster started by `npm run cluster -- start`, at 32MB.
 * Method: run each procedure in the seed's order with --json and check counters and shapes (never
 * times); run steps out of order and check the error names the step to run first.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { runScript } from '../helpers/cli.ts';
import { clustersPerSuite } from '../helpers/cluster.ts';
import { modelFailover } from '../../cost-model/model.ts';
import { loadProfile, profileToJson } from '../../cost-model/profile.ts';

const NBUFFERS_32MB = 4096;
const clusters = clustersPerSuite();
const tempDir = () => clusters.dir('walsim-steps-');

async function startCluster(dir: string, strategy: 'full-scan' | 'cached-lookup'): Promise<void> {
  const r = await runScript('cluster.ts', [
    'start',
    '--dir',
    dir,
    '--shared-buffers',
    '32MB',
    '--drop-strategy',
    strategy,
  ]);
  expect(r.code, r.stderr).toBe(0);
}

const rel = (dir: string, ...args: string[]) =>
  runScript('rel.ts', [...args, '--dir', dir, '--json']);
const multi = (dir: string, ...args: string[]) =>
  runScript('multi.ts', [...args, '--dir', dir, '--json']);

describe('npm run rel (one relation, full-scan)', () => {
  let dir: string;
  beforeAll(async () => {
    dir = tempDir();
    await startCluster(dir, 'full-scan');
  });

  it('refuses steps before create, naming create', async () => {
    const r = await rel(dir, 'vacuum');
    expect(r.code).toBe(1);
    expect(r.json.error).toMatchObject({ kind: 'order', runFirst: 'create' });
    expect(r.json.error.message).toContain('run "npm run rel -- create" first');
    const plain = await runScript('rel.ts', ['insert', '--dir', dir]);
    expect(plain.code).toBe(1);
    expect(plain.stderr).toMatch(/^error: .*npm run rel -- create/m);
  });

  it('runs create, insert NB/64, delete, pause, vacuum, stop, resume, count', async () => {
    expect((await rel(dir, 'create')).json).toMatchObject({ step: 'create', tables: 1 });
    const bad = await rel(dir, 'insert', '--size', 'NB/x');
    expect(bad.code).toBe(1);
    expect(bad.json.error.message).toContain('accepted forms: NB/<k>');
    const ins = await rel(dir, 'insert', '--size', 'NB/64');
    expect(ins.json).toMatchObject({
      step: 'insert',
      size: 'NB/64',
      pagesPerTable: 64,
      rowsPerTable: 64 * 226,
      nBuffers: NBUFFERS_32MB,
    });
    expect((await rel(dir, 'count')).json).toMatchObject({ totalRows: 64 * 226 });
    expect((await rel(dir, 'vacuum')).json.error).toMatchObject({ runFirst: 'delete' });
    expect((await rel(dir, 'delete')).code).toBe(0);
    expect((await rel(dir, 'count')).json.totalRows).toBe(0);
    expect((await rel(dir, 'vacuum')).json.error).toMatchObject({ runFirst: 'pause' });
    expect((await rel(dir, 'pause')).json.replayLsn).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
    expect((await rel(dir, 'resume')).json.error).toMatchObject({ runFirst: 'stop' });
    expect((await rel(dir, 'stop')).json.error).toMatchObject({ runFirst: 'vacuum' });
    expect((await rel(dir, 'vacuum')).json).toMatchObject({ step: 'vacuum', statements: 1 });
    expect((await rel(dir, 'stop')).json).toMatchObject({ step: 'stop', mode: 'immediate' });
    const res = await rel(dir, 'resume');
    expect(res.code, res.stderr).toBe(0);
    const j = res.json;
    expect(j.promoted).toBe(true);
    expect(j.failoverMs).toBeGreaterThan(0);
    expect(Date.parse(j.promotedAt)).toBeGreaterThanOrEqual(Date.parse(j.resumeAt));
    expect(Object.keys(j.phases)).toEqual(
      expect.arrayContaining(['replayMs', 'endOfRecoveryMs', 'openForWritesMs']),
    );
    // One VACUUM truncation replayed at failover, by one full scan of the standby's pool.
    expect(j.drop.drops).toEqual({
      'full-scan': 1,
      'cached-lookup': 0,
      'rel-list': 0,
      'recovery-hash': 0,
    });
    expect(j.drop.scanned).toBe(NBUFFERS_32MB);
    expect(j.drop.probes).toBe(0);
    expect(j.drop.invalidated).toBeGreaterThanOrEqual(64);
    // The exact counts, and the modeled PostgreSQL seconds computed from them (default profile).
    expect(j.report.counts.replay.drops.scannedByMatcher.single).toBe(NBUFFERS_32MB);
    expect(j.report.counts.replay.pgRecords).toMatchObject({
      HEAP2_PRUNE: 64,
      HEAP2_VACUUM: 64,
      HEAP2_VISIBLE: 64,
      SMGR_TRUNCATE: 1,
    });
    expect(j.report.counts.replay.controlFileUpdates).toBe(1);
    expect(j.report.counts.endOfRecovery).toEqual({
      timelineHistoryFiles: 1,
      walSegmentInits: 1,
      records: 1,
      walFlushes: 1,
    });
    expect(j.report.counts.openForWrites).toEqual({ controlFileUpdates: 1 });
    expect(j.model.profile).toBe('seed-001');
    expect(j.model.failoverS).toBe(
      modelFailover(j.report.counts, loadProfile('seed-001'), NBUFFERS_32MB).failoverS,
    );
    const human = await runScript('rel.ts', ['count', '--dir', dir]);
    expect(human.stdout).toContain('rel_t: 0 rows');
    expect((await rel(dir, 'resume')).json.error.message).toContain('already promoted');
  });
});

describe('npm run multi (one-block tables, cached-lookup)', () => {
  let dir: string;
  beforeAll(async () => {
    dir = tempDir();
    await startCluster(dir, 'cached-lookup');
  });

  it('runs the TRUNCATE procedure: one lookup drop per table, no scan', async () => {
    expect((await multi(dir, 'create', '--tables', '12')).json).toMatchObject({ tables: 12 });
    expect((await multi(dir, 'create')).json.error).toMatchObject({ runFirst: 'insert' });
    expect((await multi(dir, 'insert')).json).toMatchObject({
      pagesPerTable: 1,
      rowsPerTable: 226,
      tables: 12,
    });
    expect((await multi(dir, 'truncate')).json.error).toMatchObject({ runFirst: 'pause' });
    expect((await multi(dir, 'pause')).code).toBe(0);
    expect((await multi(dir, 'pause')).json.error.message).toContain('already paused');
    expect((await multi(dir, 'truncate')).json).toMatchObject({ statements: 12 });
    // While paused the standby still shows the rows.
    expect((await multi(dir, 'count')).json).toMatchObject({
      totalRows: 12 * 226,
      nonEmptyTables: 12,
    });
    expect((await multi(dir, 'stop')).code).toBe(0);
    // A bad --profile is refused before anything happens: the standby is still in recovery after it.
    const bad = await multi(dir, 'resume', '--profile', 'no-such-profile');
    expect(bad.code).toBe(1);
    expect(bad.json.error.message).toMatch(/unknown cost profile "no-such-profile"/);
    // --profile FILE re-prices the same counts: probes 10× dearer than seed-001's.
    const seed = loadProfile('seed-001');
    const mine = {
      ...seed,
      name: 'probes-x10',
      constants: {
        ...seed.constants,
        'lookup.probe': {
          ...seed.constants['lookup.probe'],
          seconds: seed.constants['lookup.probe'].seconds * 10,
        },
      },
    };
    const file = path.join(tempDir(), 'probes-x10.json');
    fs.writeFileSync(file, profileToJson(mine));
    const res = await multi(dir, 'resume', '--profile', file);
    expect(res.code, res.stderr).toBe(0);
    expect(res.json.model.profile).toBe('probes-x10');
    const counts = res.json.report.counts;
    expect(res.json.model.failoverS).toBe(modelFailover(counts, mine, NBUFFERS_32MB).failoverS);
    expect(
      res.json.model.failoverS - modelFailover(counts, seed, NBUFFERS_32MB).failoverS,
    ).toBeCloseTo(9 * seed.constants['lookup.probe'].seconds * counts.replay.drops.probes, 12);
    expect(res.json.drop.drops).toEqual({
      'full-scan': 0,
      'cached-lookup': 12,
      'rel-list': 0,
      'recovery-hash': 0,
    });
    expect(res.json.drop.scanned).toBe(0);
    expect(res.json.drop.probes).toBeGreaterThanOrEqual(12);
    expect(res.json.drop.invalidated).toBeGreaterThanOrEqual(12);
    expect((await multi(dir, 'count')).json).toMatchObject({ totalRows: 0, nonEmptyTables: 0 });
  });

  it("connects with the cluster's --password (the steps go through the PostgreSQL port)", async () => {
    const pw = tempDir();
    const start = await runScript('cluster.ts', [
      'start',
      '--dir',
      pw,
      '--shared-buffers',
      '16MB',
      '--password',
      'p@ss/w:rd',
    ]);
    expect(start.code, start.stderr).toBe(0);
    expect((await multi(pw, 'create', '--tables', '2')).json).toMatchObject({
      step: 'create',
      tables: 2,
    });
    expect((await multi(pw, 'insert')).json).toMatchObject({ pagesPerTable: 1, tables: 2 });
    expect((await multi(pw, 'count')).json).toMatchObject({
      totalRows: 2 * 226,
      nonEmptyTables: 2,
    });
  });

  it('says what to run first without a cluster, and refuses bad options', async () => {
    const empty = tempDir();
    const r = await multi(empty, 'resume');
    expect(r.code).toBe(1);
    expect(r.json.error.message).toContain('npm run cluster -- start');
    const u = await multi(dir, 'insert', '--size', 'NB/8');
    expect(u.code).toBe(2);
    expect(u.json.error.message).toContain('--size applies to "npm run rel -- insert" only');
    expect((await multi(dir, 'explode')).json.error.message).toContain('unknown step "explode"');
  });
});
