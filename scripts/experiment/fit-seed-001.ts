/**
 * The `seed-001` cost profile: fitted by weighted NNLS (cost-model/fit.ts) to every cell of
 * seed 001's Test A and Test B tables, with walsim's exact counts of each cell; and the
 * leave-one-size-out cross-validation. Pure given the counts (the CLI `npm run fit-seed` computes
 * them in-process and writes the profile and the fit report).
 *
 * Entry points: `fitSeed001(cells)`, `crossValidate(cells)`, `SEED_FIT_GROUPS`, `seedTarget`,
 * `fitReportMarkdown`, `CountedSeedCell`.
 *
 * Quantization: each seed figure is (an average of) a 100 ms promotion poll's reading,
 * 0.006 + 0.1 × n, so the failover took between figure − 0.106 and figure − 0.006 seconds. The fit
 * aims at the middle of that interval (figure − 0.056); the comparison with the seed quantizes the
 * modeled seconds the same way (`ModeledFailover.polledS`). Rows are weighted 1 / max(target, 0.1):
 * relative error for the long failovers, absolute for the one-poll ones.
 */
import * as path from 'node:path';
import type { FailoverCounts } from '../../storage/replay-counts.ts';
import { fitProfile, type FitGroup, type FitObservation } from '../../cost-model/fit.ts';
import { costFeatures } from '../../cost-model/model.ts';
import { price } from '../../cost-model/price.ts';
import {
  COST_CONSTANT_NAMES,
  constantPer,
  PROFILE_FORMAT,
  PROFILES_DIR,
  type CostConstantName,
  type CostProfile,
} from '../../cost-model/profile.ts';
import { markdownTable } from '../report/tables.ts';
import { SEED_DIVISORS, SEED_SIZES, type SeedCell } from './seed-001.ts';

/** The seed cells with walsim's counts, as `npm run fit-seed` last computed them. */
export const SEED_CELLS_FILE = path.join(PROFILES_DIR, '..', 'fits', 'seed-001-cells.json');

export interface CountedSeedCell extends SeedCell {
  counts: FailoverCounts;
}

const RECORDS = COST_CONSTANT_NAMES.filter((k) => k.startsWith('record.'));

/** The constants seed 001 can tell apart, each group sharing one fitted value. */
export const SEED_FIT_GROUPS: FitGroup[] = [
  { name: 'PostgreSQL record', constants: RECORDS },
  {
    name: 'smgr file operation',
    constants: ['smgr.create', 'smgr.extend', 'smgr.truncate', 'smgr.unlink'],
  },
  { name: 'pg_control update', constants: ['controlFile.update'] },
  { name: 'lookup probe', constants: ['lookup.probe'] },
  { name: 'DropRelFileNodeBuffers descriptor (cache)', constants: ['scan.single.cache'] },
  { name: 'DropRelFileNodeBuffers descriptor (memory)', constants: ['scan.single.memory'] },
  { name: 'DropRelFileNodesAllBuffers descriptor (cache)', constants: ['scan.multi.cache'] },
  { name: 'DropRelFileNodesAllBuffers descriptor (memory)', constants: ['scan.multi.memory'] },
  {
    name: 'end-of-recovery step',
    constants: [
      'endOfRecovery.timelineHistoryFile',
      'endOfRecovery.walSegmentInit',
      'endOfRecovery.record',
      'endOfRecovery.walFlush',
    ],
  },
];

/** Why each constant outside the groups has the value it has (0 unless derived after the fit). */
const FIXED_SOURCES: Partial<Record<CostConstantName, string>> = {
  walByte:
    "0: walsim's bytes are not PostgreSQL's; the per-record constant carries a record's cost",
  'scan.preCheckHit':
    '0: in every seed cell one pre-check hit per dropped page, collinear with the per-page records; folded into them',
  'lookup.hit': '0: in every seed cell one hit per probe; folded into lookup.probe',
  invalidate:
    '0: one per dropped page in both columns of every seed cell, collinear with the per-page records; folded into them',
  'dropCall.fullScan':
    '0: one per table in every seed cell, collinear with the per-table records; folded into them',
  'dropCall.lookup':
    '0: one per table in every seed cell, collinear with the per-table records; folded into them',
  'smgr.nblocks': "0: an lseek, microseconds; below seed 001's 0.1 s resolution",
  'fsm.update':
    '0: in every seed cell two per pruned page (PRUNE and VACUUM redo), collinear with the per-page records; folded into them',
  'multiInsert.tuple': '0: seed 001 has no COPY (its inserts happen before the failover)',
  'smgr.unlinkNonEmpty':
    "0: walsim counts none (its files are not a file system's); in seed 001's cells one per table, collinear with the per-table events",
  'scan.descriptorPageMapped':
    "0: walsim counts none (it has no processes' address spaces), and the seed machine's cost of a first touch was not measured",
  'dropCall.relList':
    '0: not a PostgreSQL path (seed 000 design); no per-call cost beyond its list steps',
  'dropCall.recoveryHash':
    '0: not a PostgreSQL path (seed 000 design); no per-call cost beyond its list steps and build',
};

/** Not PostgreSQL paths: priced like the PostgreSQL work they resemble, after the fit. */
const DERIVED: Partial<Record<CostConstantName, { from: CostConstantName; why: string }>> = {
  'list.step': {
    from: 'lookup.probe',
    why: 'a dependent memory access + header lock per element, priced as a lookup probe',
  },
  'scan.hashBuild.cache': {
    from: 'scan.single.cache',
    why: "one pass over the descriptors, priced as DropRelFileNodeBuffers's loop",
  },
  'scan.hashBuild.memory': {
    from: 'scan.single.memory',
    why: "one pass over the descriptors, priced as DropRelFileNodeBuffers's loop",
  },
  'hashBuild.insert': { from: 'lookup.probe', why: 'a hash insert, priced as a hash probe' },
};

const POLL = { quantumS: 0.1, offsetS: 0.006 };

export function baseProfile(): CostProfile {
  const constants = {} as CostProfile['constants'];
  for (const k of COST_CONSTANT_NAMES)
    constants[k] = { seconds: 0, per: constantPer(k), source: FIXED_SOURCES[k] ?? 'fitted' };
  return {
    format: PROFILE_FORMAT,
    name: 'seed-001',
    description:
      "PostgreSQL 14-dev (January 2021) on the seed 001 machine (Xeon E5-2637 v4, XFS, RHEL 7.2), fitted by weighted NNLS to every cell of seed 001's Test A and Test B tables (npm run fit-seed; cost-model/README.md)",
    cache: {
      llcBytes: 15 * 1024 * 1024,
      descriptorBytes: 64,
      source:
        'Xeon E5-2637 v4: 15 MB last-level cache per socket (Intel specification); BufferDescPadded is 64 bytes (buf_internals.h, BUFFERDESC_PAD_TO_SIZE on 64-bit)',
    },
    fitBand: null,
    pgMajor: null,
    promotionPoll: {
      ...POLL,
      source:
        'seed 001 times promotion with a 100 ms poll (pg_ctl promote, WAITS_PER_SEC 10); its figures are 0.1 × n + 0.006 s',
    },
    constants,
  };
}

/** The failover seconds the fit aims at: the middle of the interval the poll's reading allows. */
export function seedTarget(seedS: number): number {
  return Math.max(seedS - POLL.offsetS - POLL.quantumS / 2, 0);
}

const weightOf = (target: number) => 1 / Math.max(target, 0.1);

/** Fit the seed-001 profile to `cells` (all of them, or a training subset). */
export function fitSeed001(
  cells: readonly CountedSeedCell[],
  source = 'weighted NNLS fit to seed 001 Test A and Test B (every cell)',
): CostProfile {
  const base = baseProfile();
  const observations: FitObservation[] = cells.map((c) => {
    const targetS = seedTarget(c.seedS);
    return {
      label: c.label,
      features: costFeatures(c.counts, base, c.cell.nBuffers),
      targetS,
      weight: weightOf(targetS),
    };
  });
  const { profile } = fitProfile(observations, {
    base,
    groups: SEED_FIT_GROUPS,
    name: base.name,
    description: base.description,
    source,
  });
  for (const [k, d] of Object.entries(DERIVED) as Array<
    [CostConstantName, { from: CostConstantName; why: string }]
  >) {
    profile.constants[k] = {
      ...profile.constants[k],
      seconds: profile.constants[d.from].seconds,
      source: `= ${d.from} (${d.why}); not in seed 001`,
    };
  }
  return profile;
}

export interface CellComparison {
  label: string;
  seedS: number;
  /** Modeled failover seconds (unquantized). */
  modeledS: number;
  /** Modeled seconds as the seed's poll would have read them. */
  polledS: number;
  /** polledS − seedS. */
  residualS: number;
  /** Within max(0.15 s, 15 %) of the seed's figure (the profile's acceptance bound). */
  withinBound: boolean;
}

export function compare(cells: readonly CountedSeedCell[], profile: CostProfile): CellComparison[] {
  return cells.map((c) => {
    const m = price({ counts: c.counts, nBuffers: c.cell.nBuffers }, profile);
    const polledS = m.polledS!;
    const residualS = polledS - c.seedS;
    return {
      label: c.label,
      seedS: c.seedS,
      modeledS: m.failoverS,
      polledS,
      residualS,
      withinBound: Math.abs(residualS) <= Math.max(0.15, 0.15 * c.seedS),
    };
  });
}

/** Leave-one-size-out: fit on three shared_buffers sizes, predict every cell of the fourth. */
export function crossValidate(
  cells: readonly CountedSeedCell[],
): Array<{ heldOut: string; rows: CellComparison[] }> {
  return SEED_SIZES.map((sb) => {
    const train = cells.filter((c) => c.cell.sharedBuffers !== sb);
    const test = cells.filter((c) => c.cell.sharedBuffers === sb);
    return { heldOut: sb, rows: compare(test, fitSeed001(train, `fit without ${sb}`)) };
  });
}

const s3 = (v: number) => v.toFixed(3);
const signed = (v: number) => (v >= 0 ? '+' : '') + v.toFixed(3);

/** Markdown: fitted constants, the comparison per cell, and the cross-validation. */
export function fitReportMarkdown(cells: readonly CountedSeedCell[], profile: CostProfile): string {
  const rows = compare(cells, profile);
  const constants = markdownTable(
    ['group', 'seconds per event', 'constants'],
    SEED_FIT_GROUPS.map((g) => [
      g.name,
      profile.constants[g.constants[0]!].seconds.toExponential(3),
      g.constants.length > 3 ? `${g.constants.length} constants` : g.constants.join(', '),
    ]),
  );
  const table = (pred: (l: string) => boolean, r: CellComparison[]) =>
    markdownTable(
      ['cell', 'seed s', 'modeled s', 'as polled', 'residual', 'within bound'],
      r
        .filter((x) => pred(x.label))
        .map((x) => [
          x.label,
          s3(x.seedS),
          s3(x.modeledS),
          s3(x.polledS),
          signed(x.residualS),
          x.withinBound ? 'yes' : '**no**',
        ]),
    );
  const cv = crossValidate(cells);
  const cvTable = markdownTable(
    ['held-out size', 'cells', 'within bound', 'max abs residual s', 'worst cell'],
    cv.map(({ heldOut, rows: r }) => {
      const worst = r.reduce((a, b) => (Math.abs(b.residualS) > Math.abs(a.residualS) ? b : a));
      return [
        heldOut,
        String(r.length),
        String(r.filter((x) => x.withinBound).length),
        s3(Math.abs(worst.residualS)),
        `${worst.label} (seed ${s3(worst.seedS)}, predicted ${s3(worst.polledS)})`,
      ];
    }),
  );
  const cvCells = cv
    .map(({ heldOut, rows: r }) =>
      [`#### Held out: ${heldOut}`, '', table(() => true, r)].join('\n'),
    )
    .join('\n\n');
  return [
    '### Fitted constants',
    '',
    constants,
    '',
    '### Test A (one relation of NBuffers/k pages, VACUUM)',
    '',
    table((l) => l.startsWith('A '), rows),
    '',
    '### Test B (1000 one-block relations)',
    '',
    table((l) => l.startsWith('B '), rows),
    '',
    '### Leave-one-size-out cross-validation',
    '',
    cvTable,
    '',
    cvCells,
  ].join('\n');
}

/**
 * The seed's tables beside the modeled ones (as the seed's poll reads them), for BENCHMARKS.md:
 * Test A patched and master grids, the regressions and crossover at 100GB, Test B per variant.
 */
/** `(a − b) / b` as a percentage with one decimal. */
function pct(a: number, b: number): string {
  return `${(((a - b) / b) * 100).toFixed(1)}%`;
}

/** Test A's % regression (optimized − full) / full at 20GB and 100GB: seed vs modeled. */
function regressionTableA(
  get: (label: string) => { seed: number; mod: { failoverS: number } },
): string {
  return markdownTable(
    ['rel_size', '20GB seed', '20GB modeled', '100GB seed', '100GB modeled'],
    SEED_DIVISORS.map((k) => [
      `NB/${k}`,
      ...(['20GB', '100GB'] as const).flatMap((sb) => {
        const o = get(`A ${sb} NB/${k} cached-lookup`);
        const f = get(`A ${sb} NB/${k} full-scan`);
        return [pct(o.seed, f.seed), pct(o.mod.failoverS, f.mod.failoverS)];
      }),
    ]),
  );
}

export function seedComparisonMarkdown(
  cells: readonly CountedSeedCell[],
  profile: CostProfile,
): string {
  const m = new Map(
    cells.map((c) => [
      c.label,
      { seed: c.seedS, mod: price({ counts: c.counts, nBuffers: c.cell.nBuffers }, profile) },
    ]),
  );
  const get = (label: string) => m.get(label)!;
  const gridA = (strategy: string) =>
    markdownTable(
      ['rel_size', ...SEED_SIZES.flatMap((sb) => [`${sb} seed`, 'modeled'])],
      SEED_DIVISORS.map((k) => [
        `NB/${k}`,
        ...SEED_SIZES.flatMap((sb) => {
          const x = get(`A ${sb} NB/${k} ${strategy}`);
          return [s3(x.seed), s3(x.mod.polledS!)];
        }),
      ]),
    );
  const regA = regressionTableA(get);
  const gridB = (variant: string) =>
    markdownTable(
      ['s_b', 'Master seed', 'Master modeled', 'error', 'Patched seed', 'Patched modeled'],
      SEED_SIZES.map((sb) => {
        const ma = get(`B ${sb} ${variant} full-scan`);
        const pa = get(`B ${sb} ${variant} cached-lookup`);
        return [
          sb,
          s3(ma.seed),
          s3(ma.mod.polledS!),
          pct(ma.mod.polledS!, ma.seed),
          s3(pa.seed),
          s3(pa.mod.polledS!),
        ];
      }),
    );
  return [
    '#### Test A, optimized path forced ("patched"): seed vs modeled seconds (as polled)',
    '',
    gridA('cached-lookup'),
    '',
    '#### Test A, full scan ("master"): seed vs modeled seconds (as polled)',
    '',
    gridA('full-scan'),
    '',
    '#### Test A, % regression (optimized − full) / full: seed vs modeled (modeled unquantized)',
    '',
    regA,
    '',
    '#### Test B, VACUUM of 1000 one-block relations',
    '',
    gridB('vacuum'),
    '',
    '#### Test B, TRUNCATE of 1000 one-block relations',
    '',
    gridB('truncate'),
  ].join('\n');
}
