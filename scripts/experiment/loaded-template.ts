/**
 * Test A's loaded primary, built once and copied for every run (`npm run sweep -- threshold
 * --engine postgres --template`).
 *
 * Why: a real Test A run spends its time loading, not failing over. At 20GB NB/8 (327,680 pages,
 * 2.5 GB) a run on 13 took about 10 minutes for a failover of 3–16 s: the INSERT of 74 million rows,
 * their DELETE, and the pause step waiting for the standby to replay both (13's replay falls behind
 * the primary where 15's keeps up; 13 at 20GB NB/32 on 2026-12-05: insert 19–24 s, delete 19 s,
 * pause 62–71 s, vacuum 4–9 s, resume 3 s).
 *
 * How: the create and insert steps run once per template key (binaries asked for, the primary's
 * shared_buffers, the relation's pages) on a fresh pair, through the same steps.ts code as a run;
 * then the pair becomes a template (postgres/pg-cluster.ts `stopAsTemplate`: standby removed, the
 * loaded primary stopped cleanly, its pg_wal trimmed to the shutdown checkpoint). Every run of a
 * cell of that key copies the template twice, as its primary and as its standby (a cold copy,
 * `initPgClusterFromTemplate`), and runs delete, pause, vacuum, stop, resume.
 *
 * What the failover replays is unchanged: the DELETE still runs on the primary and is replayed by
 * the standby before the pause (every page of the relation read into the standby's pool and
 * dirtied, as after an untemplated run's INSERT and DELETE replay), and the WAL replayed at
 * failover is the VACUUM's of the same relation state: the same records, the same truncation, the
 * same drop path (test/integration/sweep-template.test.ts compares templated and untemplated runs:
 * records by type, the startup process's drop calls, the standby's pool hits at the pause). One
 * difference is left, too small to see: the relation's free space map. An untemplated standby
 * updated it while replaying the INSERT, so its pages are in the pool at the pause; a templated one
 * reads them (one FSM page per ~4,000 heap pages: about 80 at 20GB NB/8, from the page cache) when
 * the VACUUM's replay first records free space. And the page cache holds a templated standby's
 * relation file whole (just copied), where an untemplated run's wrote twice as much WAL beside it
 * (the INSERT's too), which may have pushed some of it out before the truncation drops it.
 *
 * Only Test A's VACUUM cells on PostgreSQL: a run without a DELETE (Test B's TRUNCATE) would leave
 * the cold-copied standby without the relations' sizes cached (14+: a relation the startup process
 * never read since it started), so its drops would full-scan where an untemplated run's look up.
 *
 * Disk: every template stays until the sweep ends (`removeAll`); `checkTemplateSpace` refuses a
 * plan whose templates and largest pair do not fit in the work directory's free space.
 *
 * Entry points: `LoadedTemplates`, `templateApplies`, `TEMPLATE_STEPS`, `templateSpaceNeed`,
 * `checkTemplateSpace`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fail } from '../../common/assert.ts';
import { WalsimError } from '../../common/errors.ts';
import type { CostProfile } from '../../cost-model/profile.ts';
import { BLCKSZ } from '../../storage/shared-buffers.ts';
import type { NewClusterSettings } from '../engines/engine.ts';
import { PG_ENGINE, PgEngine } from '../engines/pg-engine.ts';
import {
  destroyPgCluster,
  initPgClusterFromTemplate,
  stopAsTemplate,
} from '../postgres/pg-cluster.ts';
import type { CellSpec } from '../report/records.ts';
import { stateFilePath } from './state.ts';
import { runStep, StepSession, type StepName } from './steps.ts';

/** The steps a template has already run; a run from it starts at the next one (delete). */
export const TEMPLATE_STEPS: readonly StepName[] = ['create', 'insert'];

/** Does a run of this cell start from a template? Test A's VACUUM on PostgreSQL only (see above). */
export function templateApplies(cell: CellSpec): boolean {
  return cell.engine === 'postgres' && cell.kind === 'threshold' && cell.variant === 'vacuum';
}

/** What a template is built with: the cell's cluster settings and the steps' options. */
export interface TemplateBuild {
  cluster: NewClusterSettings;
  waitSeconds: number;
  profile: CostProfile;
}

/** One run's pair, started from its cell's template; `buildMs` when this run built the template. */
export interface TemplatedStart {
  engine: PgEngine;
  buildMs: number | null;
}

/** The templates of one sweep, under its work directory (`template-*`), removed by `removeAll`. */
export class LoadedTemplates {
  private readonly made = new Map<string, string>();

  constructor(readonly workDir: string) {}

  /** Start the pair of one run of `cell` in `dir` from its template (built on its first run). */
  async startRun(dir: string, cell: CellSpec, b: TemplateBuild): Promise<TemplatedStart> {
    if (!templateApplies(cell)) fail(`a ${cell.kind} ${cell.variant} cell has no template`);
    const key = templateKey(cell, b.cluster);
    let template = this.made.get(key);
    let buildMs: number | null = null;
    if (template === undefined) {
      checkTemplateSpace([cell], this.workDir);
      template = fs.mkdtempSync(path.join(this.workDir, 'template-'));
      const t0 = performance.now();
      await buildTemplate(template, cell, b);
      buildMs = performance.now() - t0;
      this.made.set(key, template);
    }
    await initPgClusterFromTemplate(dir, template, { sharedBuffers: cell.sharedBuffers });
    // The steps' state after insert (tables, pages, rows): the run goes on from there.
    fs.copyFileSync(stateFilePath(template), stateFilePath(dir));
    return { engine: new PgEngine(dir), buildMs };
  }

  /** The templates' directories (their servers are stopped), in build order. */
  get dirs(): string[] {
    return [...this.made.values()];
  }

  /** Remove every template (stopping any server a failed build left running). */
  async removeAll(): Promise<void> {
    for (const d of this.made.values()) await destroyPgCluster(d);
    this.made.clear();
  }
}

/** Cells share a template when its primary would be the same: same binaries, pool and pages. */
function templateKey(cell: CellSpec, c: NewClusterSettings): string {
  return JSON.stringify([
    c.pgBin ?? null,
    c.pgVersion ?? null,
    c.primarySharedBuffers,
    cell.pagesPerTable,
  ]);
}

/** create and insert on a fresh pair (steps.ts, as a run does), then the pair becomes the template. */
async function buildTemplate(dir: string, cell: CellSpec, b: TemplateBuild): Promise<void> {
  try {
    const engine = await PG_ENGINE.createCluster(dir, b.cluster);
    const session = new StepSession(engine);
    try {
      for (const step of TEMPLATE_STEPS)
        await runStep(step, {
          clusterDir: dir,
          engine,
          workload: 'rel',
          session,
          waitSeconds: b.waitSeconds,
          profile: b.profile,
          size: String(cell.pagesPerTable),
        });
    } finally {
      await session.close();
      await engine.close();
    }
    await stopAsTemplate(dir);
  } catch (e) {
    await destroyPgCluster(dir);
    throw e;
  }
}

const MIB = 1024 * 1024;
/** A template: the relation, and what initdb makes (~40 MB) with one WAL segment. */
const templateBytes = (pages: number) => pages * BLCKSZ + 64 * MIB;
/**
 * A running pair at its largest (a template's build, or a run): two data directories of the
 * template's size and, on each node, the WAL of the INSERT (build) or of the DELETE and VACUUM
 * (run). A heap INSERT or DELETE record is about 56–64 bytes, 226 a page: about 1.8 pages of WAL a
 * page, counted as 2.
 */
const pairBytes = (pages: number) => 2 * templateBytes(pages) + 2 * 2 * pages * BLCKSZ;

/** Disk a plan's templates need at once: every template kept, plus the largest pair running. */
export function templateSpaceNeed(cells: readonly CellSpec[]): {
  templates: number;
  templatesBytes: number;
  pairBytes: number;
} {
  const pages = new Map<string, number>();
  for (const c of cells.filter(templateApplies))
    pages.set(JSON.stringify([c.pgVersion ?? null, c.pagesPerTable]), c.pagesPerTable);
  const sizes = [...pages.values()];
  return {
    templates: sizes.length,
    templatesBytes: sizes.reduce((a, p) => a + templateBytes(p), 0),
    pairBytes: Math.max(0, ...sizes.map(pairBytes)),
  };
}

/** Bytes an unprivileged user may still write where `dir` is (or would be created). */
function freeBytes(dir: string): number {
  let d = path.resolve(dir);
  while (!fs.existsSync(d)) d = path.dirname(d);
  const s = fs.statfsSync(d);
  return s.bavail * s.bsize;
}

const gb = (bytes: number) => `${(bytes / 1e9).toFixed(1)} GB`;

/**
 * Refuse, before anything runs, a plan whose templates do not fit in `workDir`'s free space
 * (`freeNow`: what the file system says, unless a test gives it).
 */
export function checkTemplateSpace(
  cells: readonly CellSpec[],
  workDir: string,
  freeNow?: number,
): void {
  const need = templateSpaceNeed(cells);
  if (need.templates === 0) return;
  const free = freeNow ?? freeBytes(workDir);
  const total = need.templatesBytes + need.pairBytes;
  if (free >= total) return;
  throw new WalsimError(
    'invalid_input',
    `--template needs about ${gb(total)} free under ${workDir} (${need.templates} template${need.templates === 1 ? '' : 's'} of ${gb(need.templatesBytes)} kept until the sweep ends, and ${gb(need.pairBytes)} for the largest pair running), but only ${gb(free)} are free: give --work-dir on a larger disk, fewer --rel-sizes, or leave out --template`,
  );
}
