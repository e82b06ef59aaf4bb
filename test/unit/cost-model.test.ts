/**
 * The cost model (cost-model): the pure function prices exactly the counts it is given,
 * the profile loader refuses malformed profiles by name, the NNLS fit recovers known constants,
 * and the record mix maps walsim records to the PostgreSQL records they stand for.
 * Method: hand-made counts and profiles with round constants; exact assertions (modeled time is
 * deterministic).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  emptyReplayCounts,
  pgRecordsFor,
  promotionStepCounts,
  ReplayCounters,
  type FailoverCounts,
  type PgRecordKind,
} from '../../storage/replay-counts.ts';
import { fitProfile, nnls } from '../../cost-model/fit.ts';
import { costFeatures, modelFailover, polledSeconds } from '../../cost-model/model.ts';
import {
  builtinProfileNames,
  COST_CONSTANT_NAMES,
  loadProfile,
  parseProfile,
  profileToJson,
  type CostConstantName,
  type CostProfile,
} from '../../cost-model/profile.ts';

function profileWith(
  values: Partial<Record<CostConstantName, number>>,
  llcBytes = 1 << 20,
): CostProfile {
  const constants = {} as CostProfile['constants'];
  for (const k of COST_CONSTANT_NAMES)
    constants[k] = { seconds: values[k] ?? 0, per: 'x', source: 'test' };
  return {
    format: 'walsim-cost-profile/1',
    name: 'test',
    description: '',
    cache: { llcBytes, descriptorBytes: 64, source: 'test' },
    promotionPoll: { quantumS: 0.1, offsetS: 0.006, source: 'test' },
    constants,
    fitBand: null,
    pgMajor: null,
  };
}

function counts(edit: (c: FailoverCounts) => void): FailoverCounts {
  const c: FailoverCounts = { replay: emptyReplayCounts(), ...promotionStepCounts() };
  edit(c);
  return c;
}

describe('modelFailover', () => {
  it('is the sum of constant × count per phase', () => {
    const p = profileWith({
      'record.HEAP2_PRUNE': 1e-6,
      'lookup.probe': 3e-7,
      'controlFile.update': 1e-3,
      'smgr.truncate': 2e-5,
      'endOfRecovery.walSegmentInit': 0.01,
      'endOfRecovery.walFlush': 0.002,
    });
    const c = counts((c) => {
      c.replay.pgRecords.HEAP2_PRUNE = 1000;
      c.replay.drops.probes = 2000;
      c.replay.controlFileUpdates = 3;
      c.replay.smgr.truncate = [1, 1, 1, 0];
    });
    const m = modelFailover(c, p, 16384);
    expect(m.profile).toBe('test');
    expect(m.phases.replayS).toBeCloseTo(1000 * 1e-6 + 2000 * 3e-7 + 3e-3 + 3 * 2e-5, 15);
    expect(m.phases.endOfRecoveryS).toBeCloseTo(0.012, 15);
    expect(m.phases.openForWritesS).toBeCloseTo(1e-3, 15);
    expect(m.failoverS).toBeCloseTo(
      m.phases.replayS + m.phases.endOfRecoveryS + m.phases.openForWritesS,
      15,
    );
    expect(m.replay.dropsS).toBeCloseTo(6e-4, 15);
    expect(m.replay.recordsS).toBeCloseTo(1e-3, 15);
  });

  it('prices a scan with the cache constant while the descriptors fit, the memory one beyond', () => {
    const p = profileWith({ 'scan.single.cache': 1e-9, 'scan.single.memory': 5e-9 }, 64 * 1000);
    const scan = (nb: number) => counts((c) => (c.replay.drops.scannedByMatcher.single = nb));
    expect(modelFailover(scan(1000), p, 1000).phases.replayS).toBeCloseTo(1000 * 1e-9, 18);
    expect(modelFailover(scan(1001), p, 1001).phases.replayS).toBeCloseTo(1001 * 5e-9, 18);
  });

  it("prices the descriptor pages a startup process's first full scan maps, per page, with the drops", () => {
    const p = profileWith({ 'scan.descriptorPageMapped': 8e-6, 'scan.multi.cache': 1e-9 }, 2 ** 30);
    const c = counts((c) => {
      c.replay.descriptorPagesMapped = 24577;
      c.replay.drops.scannedByMatcher.linear = 1572864;
    });
    const m = modelFailover(c, p, 1572864);
    expect(costFeatures(c, p, 1572864).replay['scan.descriptorPageMapped']).toBe(24577);
    expect(m.phases.replayS).toBeCloseTo(24577 * 8e-6 + 1572864 * 1e-9, 15);
    expect(m.replay.dropsS).toBeCloseTo(m.phases.replayS, 15);
  });

  it('prices an unlinked fork that held blocks on top of the unlink itself', () => {
    const p = profileWith({ 'smgr.unlink': 1e-5, 'smgr.unlinkNonEmpty': 4e-4 });
    const c = counts((c) => {
      c.replay.smgr.unlink = [630, 0, 0, 0];
      c.replay.unlinkedNonEmptyForks = 600;
    });
    const m = modelFailover(c, p, 65536);
    expect(m.phases.replayS).toBeCloseTo(630 * 1e-5 + 600 * 4e-4, 15);
    expect(m.replay.smgrS).toBeCloseTo(m.phases.replayS, 15);
  });

  it("prices 13's size queries and its failed segment opens apart, each per event", () => {
    // Test A at 8GB NB/8 under 13's rules: 7 size queries a page (3 main, 3 FSM, 1 VM), the 3 of
    // the main fork, one whole 1 GB segment, each failing to open segment 1; and the truncation.
    const p = profileWith({
      'smgr.nblocks': 1.5e-6,
      'smgr.segmentOpenFailed': 2.9e-6,
      'smgr.truncate': 4e-5,
      'record.HEAP2_PRUNE': 2e-6,
    });
    const pages = 131072;
    const c = counts((c) => {
      c.replay.pgRecords.HEAP2_PRUNE = 2 * pages;
      c.replay.smgr.nblocks = [3 * pages + 1, 3 * pages + 2, pages + 2, 0];
      c.replay.failedSegmentOpens = 3 * pages + 1;
      c.replay.smgr.truncate = [1, 1, 1, 0];
    });
    const f = costFeatures(c, p, 1048576).replay;
    expect(f['smgr.nblocks']).toBe(7 * pages + 5);
    expect(f['smgr.segmentOpenFailed']).toBe(3 * pages + 1);
    const m = modelFailover(c, p, 1048576);
    const smgrS = (7 * pages + 5) * 1.5e-6 + (3 * pages + 1) * 2.9e-6 + 3 * 4e-5;
    expect(m.replay.smgrS).toBeCloseTo(smgrS, 15);
    expect(m.replay.recordsS).toBeCloseTo(2 * pages * 2e-6, 15);
    expect(m.phases.replayS).toBeCloseTo(smgrS + 2 * pages * 2e-6, 15);
    // 15's rules on the same relation: the size cached, one query and one failed open a fork.
    const c15 = counts((c) => {
      c.replay.smgr.nblocks = [1, 0, 0, 0];
      c.replay.failedSegmentOpens = 1;
    });
    expect(modelFailover(c15, p, 1048576).phases.replayS).toBeCloseTo(1.5e-6 + 2.9e-6, 18);
  });

  it('reads a profile written before the descriptor-page constant existed as pricing it at 0', () => {
    const j = JSON.parse(profileToJson(profileWith({ 'lookup.probe': 1e-6 })));
    delete j.constants['scan.descriptorPageMapped'];
    delete j.constants['smgr.unlinkNonEmpty'];
    delete j.constants['smgr.segmentOpenFailed'];
    delete j.constants['walSegment.prealloc'];
    const p = parseProfile(j, 'old.json');
    expect(p.constants['walSegment.prealloc'].seconds).toBe(0);
    expect(p.constants['scan.descriptorPageMapped'].seconds).toBe(0);
    expect(p.constants['smgr.unlinkNonEmpty'].seconds).toBe(0);
    expect(p.constants['smgr.segmentOpenFailed'].seconds).toBe(0);
    expect(p.constants['scan.descriptorPageMapped'].source).toMatch(/absent/);
  });

  it("prices PostgreSQL's preallocated WAL segment in the open-for-writes phase; counts stored without it as none", () => {
    const p = profileWith({ 'walSegment.prealloc': 0.017, 'controlFile.update': 1e-3 });
    const once = { replay: emptyReplayCounts(), ...promotionStepCounts(1) };
    expect(costFeatures(once, p, 16384).openForWrites).toEqual({
      'controlFile.update': 1,
      'walSegment.prealloc': 1,
    });
    expect(modelFailover(once, p, 16384).phases.openForWritesS).toBeCloseTo(0.018, 15);
    const stored = counts((c) => {
      c.openForWrites = { controlFileUpdates: 1 };
    });
    expect(modelFailover(stored, p, 16384).phases.openForWritesS).toBeCloseTo(1e-3, 15);
  });

  it('reports what a 100 ms promotion poll would have measured', () => {
    const poll = { quantumS: 0.1, offsetS: 0.006, source: '' };
    expect(polledSeconds(0.001, poll)).toBeCloseTo(0.106, 12);
    expect(polledSeconds(0.1, poll)).toBeCloseTo(0.106, 12);
    expect(polledSeconds(0.3, poll)).toBeCloseTo(0.306, 12);
    expect(polledSeconds(0.3001, poll)).toBeCloseTo(0.406, 12);
    expect(polledSeconds(66.52, poll)).toBeCloseTo(66.606, 9);
  });

  it('refuses a non-positive NBuffers', () => {
    expect(() =>
      modelFailover(
        counts(() => {}),
        profileWith({}),
        0,
      ),
    ).toThrow(/INV-COST-2/);
  });
});

describe('cost profiles', () => {
  it('ships seed-001, which loads and names every constant with a source', () => {
    expect(builtinProfileNames()).toContain('seed-001');
    const p = loadProfile('seed-001');
    for (const k of COST_CONSTANT_NAMES) {
      expect(p.constants[k].seconds).toBeGreaterThanOrEqual(0);
      expect(p.constants[k].source.length).toBeGreaterThan(0);
    }
    expect(parseProfile(JSON.parse(profileToJson(p)), 'round trip')).toEqual(p);
  });

  it('refuses malformed profiles naming what is wrong', () => {
    const good = JSON.parse(profileToJson(profileWith({}))) as Record<string, unknown> & {
      constants: Record<string, unknown>;
    };
    const edit = (f: (j: typeof good) => void) => {
      const j = structuredClone(good);
      f(j);
      return () => parseProfile(j, 'x.json');
    };
    expect(edit((j) => delete j.constants['lookup.probe'])).toThrow(
      /constant "lookup.probe" is missing/,
    );
    expect(edit((j) => (j.constants['lookup.prob'] = { seconds: 1, source: '' }))).toThrow(
      /unknown constant "lookup.prob"/,
    );
    expect(edit((j) => (j.constants['lookup.probe'] = { seconds: -1, source: '' }))).toThrow(
      /lookup.probe.*non-negative/,
    );
    expect(edit((j) => (j.constants['lookup.probe'] = { seconds: 'fast', source: '' }))).toThrow(
      /lookup.probe/,
    );
    expect(edit((j) => (j.format = 'v2'))).toThrow(/"format"/);
    expect(edit((j) => (j.extra = 1))).toThrow(/unknown field "extra"/);
    expect(edit((j) => (j.cache = { llcBytes: 1, descriptorBytes: 0 }))).toThrow(/descriptorBytes/);
    expect(() => loadProfile('no-such-profile')).toThrow(
      /unknown cost profile "no-such-profile".*seed-001/,
    );
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-profile-'));
    fs.writeFileSync(path.join(dir, 'broken.json'), '{ not json');
    expect(() => loadProfile(path.join(dir, 'broken.json'))).toThrow(/not valid JSON/);
    expect(() => loadProfile(path.join(dir, 'absent.json'))).toThrow(/cannot read cost profile/);
    fs.writeFileSync(
      path.join(dir, 'mine.json'),
      profileToJson({ ...profileWith({ 'lookup.probe': 2e-7 }), name: 'mine' }),
    );
    expect(loadProfile(path.join(dir, 'mine.json')).constants['lookup.probe'].seconds).toBe(2e-7);
    fs.rmSync(dir, { recursive: true });
  });
});

describe('nnls and fitProfile', () => {
  it('recovers non-negative coefficients exactly from consistent data', () => {
    const A = [
      [1, 0, 2],
      [0, 1, 1],
      [1, 1, 0],
      [3, 1, 1],
      [2, 5, 1],
    ];
    const x = [0.5, 0, 2];
    const b = A.map((r) => r.reduce((s, v, j) => s + v * x[j]!, 0));
    nnls(A, b).forEach((v, j) => expect(v).toBeCloseTo(x[j]!, 9));
  });

  it('never returns a negative coefficient', () => {
    // Unconstrained least squares would make the second coefficient negative.
    const A = [
      [1, 1],
      [1, 2],
      [1, 3],
    ];
    const b = [3, 2, 1];
    const x = nnls(A, b);
    expect(x[1]).toBe(0);
    expect(x[0]).toBeCloseTo(2, 9);
  });

  it('fits tied groups and keeps every other constant at the base value', () => {
    const truth = profileWith({
      'record.HEAP2_PRUNE': 2e-6,
      'record.HEAP2_VACUUM': 2e-6,
      'lookup.probe': 4e-7,
      'controlFile.update': 1e-3,
    });
    const base = profileWith({ 'controlFile.update': 1e-3 });
    const cells = [100, 1000, 5000].flatMap((pages) =>
      [true, false].map((lookup) =>
        counts((c) => {
          c.replay.pgRecords.HEAP2_PRUNE = pages;
          c.replay.pgRecords.HEAP2_VACUUM = pages;
          c.replay.drops.probes = lookup ? pages : 0;
          c.replay.controlFileUpdates = 1;
        }),
      ),
    );
    const obs = cells.map((c, i) => ({
      label: String(i),
      features: costFeatures(c, truth, 1000),
      targetS: modelFailover(c, truth, 1000).failoverS,
      weight: 1,
    }));
    const r = fitProfile(obs, {
      base,
      name: 'fitted',
      description: '',
      source: 'fit',
      groups: [
        { name: 'vacuum records', constants: ['record.HEAP2_PRUNE', 'record.HEAP2_VACUUM'] },
        { name: 'probe', constants: ['lookup.probe'] },
      ],
    });
    expect(r.groupSeconds['vacuum records']).toBeCloseTo(2e-6, 12);
    expect(r.groupSeconds.probe).toBeCloseTo(4e-7, 12);
    expect(r.profile.constants['record.HEAP2_VACUUM'].seconds).toBeCloseTo(2e-6, 12);
    expect(r.profile.constants['controlFile.update'].seconds).toBe(1e-3);
    expect(r.profile.name).toBe('fitted');
  });

  it('refuses unknown or doubly grouped constants', () => {
    const base = profileWith({});
    const obs = [
      {
        label: 'a',
        features: costFeatures(
          counts(() => {}),
          base,
          10,
        ),
        targetS: 1,
        weight: 1,
      },
    ];
    expect(() =>
      fitProfile(obs, {
        base,
        name: 'x',
        description: '',
        source: '',
        groups: [{ name: 'g', constants: ['nope' as CostConstantName] }],
      }),
    ).toThrow(/unknown constant "nope"/);
    expect(() =>
      fitProfile(obs, {
        base,
        name: 'x',
        description: '',
        source: '',
        groups: [
          { name: 'g', constants: ['walByte'] },
          { name: 'h', constants: ['walByte'] },
        ],
      }),
    ).toThrow(/in two groups/);
  });
});

describe('record mix: walsim records as the PostgreSQL records they stand for', () => {
  const mix = (bodies: Parameters<ReplayCounters['observe']>[0]['body'][], xid = 7) => {
    const r = new ReplayCounters();
    for (const body of bodies) r.observe({ body, header: { xid, totalLength: 10 } });
    return r;
  };

  it('a VACUUM that empties and truncates a one-block table is 7 PostgreSQL records', () => {
    const r = mix([
      { kind: 'HEAP2_PRUNE', rel: 16384, block: 0, latestRemovedXid: 5, offsets: [1, 226] },
      { kind: 'HEAP2_VISIBLE', rel: 16384, block: 0 },
      { kind: 'STANDBY_LOCK', rel: 16384 },
      { kind: 'SMGR_TRUNCATE', rel: 16384, blkno: 0, flags: 7 },
      { kind: 'XACT_COMMIT', xactTime: 0, droppedRels: [] },
    ]);
    expect(r.pgRecords).toEqual({
      HEAP2_PRUNE: 1,
      HEAP2_VACUUM: 1,
      HEAP2_VISIBLE: 1,
      STANDBY_LOCK: 1,
      SMGR_TRUNCATE: 1,
      HEAP_INPLACE: 1,
      XACT_COMMIT: 1,
    });
    expect(Object.values(r.pgRecords).reduce((a, b) => a + b, 0)).toBe(7);
    expect(r.walBytes).toBe(50);
    expect(r.records.HEAP2_PRUNE).toBe(1);
  });

  it('a TRUNCATE of one table is 7 PostgreSQL records; a VACUUM without truncation has no commit record', () => {
    const t = mix([
      { kind: 'STANDBY_LOCK', rel: 16384 },
      { kind: 'SMGR_CREATE', rel: 16385, fork: 0 },
      { kind: 'CATALOG_UPDATE', relname: 't', rel: 16385 },
      { kind: 'XACT_COMMIT', xactTime: 0, droppedRels: [16384] },
    ]);
    expect(t.pgRecords).toEqual({
      STANDBY_LOCK: 1,
      SMGR_CREATE: 1,
      HEAP_UPDATE: 1,
      BTREE_INSERT_LEAF: 3,
      XACT_COMMIT: 1,
    });
    const v = mix([
      { kind: 'HEAP2_PRUNE', rel: 16384, block: 0, latestRemovedXid: 5, offsets: [1, 2] },
      { kind: 'XACT_COMMIT', xactTime: 0, droppedRels: [] },
    ]);
    expect(v.pgRecords).toEqual({ HEAP2_PRUNE: 1, HEAP2_VACUUM: 1, HEAP_INPLACE: 1 });
  });

  it('row-at-a-time DML: a page of inserts or deletes is one record per row', () => {
    const seen: Partial<Record<PgRecordKind, number>> = {};
    const add = (k: PgRecordKind, n: number) => (seen[k] = (seen[k] ?? 0) + n);
    pgRecordsFor(
      {
        kind: 'HEAP2_MULTI_INSERT',
        rel: 1,
        block: 0,
        firstOffset: 1,
        runs: [1, 200, 500, 26],
        initPage: true,
      },
      undefined,
      add,
    );
    pgRecordsFor(
      { kind: 'HEAP_DELETE', rel: 1, block: 0, offsets: [1, 100, 150, 10] },
      undefined,
      add,
    );
    expect(seen).toEqual({ HEAP_INSERT: 226, HEAP_DELETE: 110 });
  });
});
