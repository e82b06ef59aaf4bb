/**
 * The experiment steps exist once (scripts/experiment/steps.ts): the same scripted step sequences,
 * through the Engine interface, on walsim and — when the binaries are present — on real PostgreSQL
 * must give the same JSON shape, the same counts and the same human lines, and the same order
 * errors. Fails if a step grows an engine-specific path that changes what users see, or if either
 * engine's failover account loses a field of the shared shape.
 * Method: fresh 32MB clusters made by each EngineKind; Test A (rel, NB/64, VACUUM) and Test B
 * (multi, 8 TOAST-able tables, TRUNCATE) step by step; every step's keys and engine-independent
 * values are compared with walsim's and with the expected shape below (LSNs and times aside).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clustersPerSuite } from '../helpers/cluster.ts';
import { PgDirs, pgUnavailableReason } from '../helpers/postgres.ts';
import { defaultCostProfile } from '../../cost-model/profile.ts';
import type { EngineKind } from '../../scripts/engines/engine.ts';
import {
  runStep,
  StepOrderError,
  StepSession,
  type AnyEngine,
  type AnyFailover,
  type StepName,
  type StepResult,
} from '../../scripts/experiment/steps.ts';
import type { Workload } from '../../scripts/engines/engine.ts';
import { WALSIM_ENGINE } from '../../scripts/engines/walsim-engine.ts';
import { PG_ENGINE } from '../../scripts/engines/pg-engine.ts';

const reason = pgUnavailableReason();
const pgDirs = new PgDirs();
const clusters = clustersPerSuite();
afterAll(() => pgDirs.removeAll());

const SETTINGS = {
  sharedBuffers: '32MB',
  primarySharedBuffers: '32MB',
  dropStrategy: 'cached-lookup',
  forceOptimized: false,
  thresholdDivisor: 32,
} as const;

/** The keys every engine's step JSON has (resume: the shared failover shape; each engine adds its own). */
const SHARED_KEYS: Record<StepName, string[]> = {
  create: ['step', 'workload', 'engine', 'elapsedMs', 'tables', 'toast'],
  insert: [
    'step',
    'workload',
    'engine',
    'elapsedMs',
    'size',
    'pagesPerTable',
    'rowsPerTable',
    'tables',
    'nBuffers',
  ],
  delete: ['step', 'workload', 'engine', 'elapsedMs', 'tables'],
  pause: ['step', 'workload', 'engine', 'elapsedMs', 'replayLsn'],
  vacuum: ['step', 'workload', 'engine', 'elapsedMs', 'statements'],
  truncate: ['step', 'workload', 'engine', 'elapsedMs', 'statements'],
  stop: ['step', 'workload', 'engine', 'elapsedMs', 'mode', 'endLsn'],
  resume: [
    'step',
    'workload',
    'engine',
    'elapsedMs',
    'failoverMs',
    'resumeAt',
    'promotedAt',
    'phases',
    'recordsReplayed',
    'newTimeline',
    'promoted',
  ],
  count: [
    'step',
    'workload',
    'engine',
    'elapsedMs',
    'node',
    'tables',
    'totalRows',
    'nonEmptyTables',
    'counts',
  ],
};
/** What each engine's resume adds to the shared shape. */
const ENGINE_RESUME_KEYS = {
  walsim: ['drop', 'report', 'model'],
  postgres: ['seedMethod', 'log', 'stall', 'promoteNoticeMs', 'waldump', 'startupSched'],
};

interface Transcript {
  /** Each step's result without its human lines (what --json prints). */
  results: StepResult[];
  lines: string[][];
  orderError: { message: string; runFirst: string };
}

/** Test A then Test B on fresh clusters of one engine, every step through runStep. */
async function script(
  kind: EngineKind<AnyFailover>,
  fresh: () => string,
): Promise<Record<Workload, Transcript>> {
  const sequences: Record<
    Workload,
    { steps: StepName[]; o: { size?: string; tables?: number; toast?: boolean }; early: StepName }
  > = {
    rel: {
      steps: ['create', 'insert', 'count', 'delete', 'pause', 'vacuum', 'stop', 'resume', 'count'],
      o: { size: 'NB/64' },
      early: 'vacuum',
    },
    multi: {
      steps: ['create', 'insert', 'pause', 'truncate', 'count', 'stop', 'resume', 'count'],
      o: { tables: 8, toast: true },
      early: 'truncate',
    },
  };
  const out = {} as Record<Workload, Transcript>;
  for (const workload of ['rel', 'multi'] as const) {
    const dir = fresh();
    const engine: AnyEngine = await kind.createCluster(dir, SETTINGS);
    const t: Transcript = { results: [], lines: [], orderError: { message: '', runFirst: '' } };
    const { steps, o, early } = sequences[workload];
    // One session across steps, as the sweeps run them; the CLIs open one per step.
    const session = new StepSession(engine);
    try {
      for (const step of steps) {
        if (step === 'pause') {
          const e = await runStep(early, {
            clusterDir: dir,
            engine,
            session,
            workload,
            ...o,
          }).catch((x: unknown) => x);
          expect(e).toBeInstanceOf(StepOrderError);
          t.orderError = {
            message: (e as StepOrderError).message,
            runFirst: (e as StepOrderError).runFirst,
          };
        }
        const r = await runStep(step, {
          clusterDir: dir,
          engine,
          session,
          workload,
          waitSeconds: 120,
          profile: defaultCostProfile(),
          ...(step === 'create' || step === 'insert' ? o : {}),
        });
        t.lines.push(r.lines);
        t.results.push({ ...r, lines: [] });
      }
    } finally {
      await session.close();
      await engine.close();
    }
    out[workload] = t;
  }
  return out;
}

const LSN = /[0-9A-F]+\/[0-9A-F]+/g;

/** What must not depend on the engine: keys (shared part), values other than times and LSNs, human lines outside resume. */
function engineIndependent(t: Transcript) {
  return {
    results: t.results.map((r) => {
      const shared = Object.fromEntries(SHARED_KEYS[r.step].map((k) => [k, r[k]]));
      for (const k of [
        'engine',
        'elapsedMs',
        'replayLsn',
        'endLsn',
        'failoverMs',
        'resumeAt',
        'promotedAt',
        'phases',
        'recordsReplayed',
      ])
        delete shared[k];
      return shared;
    }),
    lines: t.lines.map((ls, i) =>
      t.results[i]!.step === 'resume' ? ls.length > 0 : ls.map((l) => l.replace(LSN, 'LSN')),
    ),
    orderError: {
      ...t.orderError,
      message: t.orderError.message.replace(' --engine postgres', ''),
    },
  };
}

function checkShape(t: Transcript, engine: 'walsim' | 'postgres'): void {
  for (const r of t.results) {
    const extra = r.step === 'resume' ? ENGINE_RESUME_KEYS[engine] : [];
    expect(
      Object.keys(r)
        .filter((k) => k !== 'lines')
        .sort(),
      `${engine} ${r.step}`,
    ).toEqual([...SHARED_KEYS[r.step], ...extra].sort());
    expect(r.engine).toBe(engine);
    if (r.step === 'resume') {
      expect(Object.keys(r.phases as object).sort()).toEqual([
        'checkpointMs',
        'endOfRecoveryMs',
        'openForWritesMs',
        'replayMs',
      ]);
      expect(r.failoverMs).toBeGreaterThan(0);
      expect(Date.parse(String(r.promotedAt))).toBeGreaterThanOrEqual(
        Date.parse(String(r.resumeAt)),
      );
    }
  }
}

let walsim: Record<Workload, Transcript>;

beforeAll(async () => {
  walsim = await script(WALSIM_ENGINE, () => clusters.dir('walsim-engine-steps-'));
}, 240_000);

describe('the one step implementation on walsim', () => {
  it("gives the shared JSON shape, the seed's counts and walsim's failover account", () => {
    for (const w of ['rel', 'multi'] as const) checkShape(walsim[w], 'walsim');
    const rel = engineIndependent(walsim.rel);
    expect(rel.results).toEqual([
      { step: 'create', workload: 'rel', tables: 1, toast: false },
      {
        step: 'insert',
        workload: 'rel',
        size: 'NB/64',
        pagesPerTable: 64,
        rowsPerTable: 64 * 226,
        tables: 1,
        nBuffers: 4096,
      },
      {
        step: 'count',
        workload: 'rel',
        node: 'standby',
        tables: 1,
        totalRows: 64 * 226,
        nonEmptyTables: 1,
        counts: [64 * 226],
      },
      { step: 'delete', workload: 'rel', tables: 1 },
      { step: 'pause', workload: 'rel' },
      { step: 'vacuum', workload: 'rel', statements: 1 },
      { step: 'stop', workload: 'rel', mode: 'immediate' },
      { step: 'resume', workload: 'rel', newTimeline: 2, promoted: true },
      {
        step: 'count',
        workload: 'rel',
        node: 'standby',
        tables: 1,
        totalRows: 0,
        nonEmptyTables: 0,
        counts: [0],
      },
    ]);
    expect(rel.orderError).toEqual({
      message: expect.stringContaining('run "npm run rel -- pause" first'),
      runFirst: 'pause',
    });
    const multi = engineIndependent(walsim.multi);
    expect(multi.results.map((r) => r.step)).toEqual([
      'create',
      'insert',
      'pause',
      'truncate',
      'count',
      'stop',
      'resume',
      'count',
    ]);
    expect(multi.results[3]).toEqual({ step: 'truncate', workload: 'multi', statements: 8 });
    expect(multi.results[4]).toMatchObject({ totalRows: 8 * 226, nonEmptyTables: 8 });
    expect(multi.results[7]).toMatchObject({
      totalRows: 0,
      nonEmptyTables: 0,
      counts: Array(8).fill(0),
    });
    // walsim's account: the drops it replayed at failover (a TOAST-able TRUNCATE drops a relation
    // whose size replay never cached, so each is a full scan), priced by the model.
    const resume = walsim.multi.results[6]!;
    expect((resume.drop as { drops: Record<string, number> }).drops['full-scan']).toBe(8);
    expect((resume.model as { profile: string }).profile).toBe('seed-001');
  });
});

describe.skipIf(reason !== null)(
  `the one step implementation on real PostgreSQL${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    it('gives the same JSON shape, counts, human lines and order errors as on walsim', async () => {
      const pg = await script(PG_ENGINE, () => pgDirs.fresh('engine-steps'));
      for (const w of ['rel', 'multi'] as const) {
        checkShape(pg[w], 'postgres');
        expect(engineIndependent(pg[w]), w).toEqual(engineIndependent(walsim[w]));
        expect(pg[w].orderError.message).toContain(
          `run "npm run ${w} -- pause --engine postgres" first`,
        );
      }
    }, 300_000);
  },
);
