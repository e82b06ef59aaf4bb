/**
 * The order vitest hands files to its workers. Both projects share one pool (vitest runs groups of
 * different worker counts one after another, so a second group would wait for the first), and the
 * run ends when its longest file does: longest first, by the durations vitest cached from the last
 * run. In a fresh clone nothing is cached: the files LONGEST named first, then the folders in the
 * order their files usually take (FOLDERS: a real-process file takes seconds to a minute, a
 * simulator file seconds to half a minute, most unit files well under a second), the larger file
 * before the smaller. Only the order depends on these lists: a stale entry costs time, never a
 * test.
 * vitest's own sequencer does the same per project but puts one project's files before the
 * other's, which leaves the long real-process files for the end.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The longest files (2026-12-02 18:05, the real-process files at 3 workers, load 7-9: 25-98 s
 * each), longest first; the real-PostgreSQL ones wait on servers more than they compute, so they
 * start early beside the simulator's CPU-bound ones.
 */
const LONGEST = [
  'integration/postgres-fidelity.test.ts',
  'integration/postgres-engine.test.ts',
  'sim/simulate.test.ts',
  'integration/engine-steps.test.ts',
  'integration/dashboard-postgres.test.ts',
  'integration/psql.test.ts',
  'sim/injected-bugs-nodes.test.ts',
  'integration/cli-errors.test.ts',
  'integration/dashboard-browser.test.ts',
  'integration/dashboard-controls.test.ts',
  'integration/steps.test.ts',
  'integration/sweep.test.ts',
  'integration/replication.test.ts',
  'integration/predict.test.ts',
];

/** test/ folders, the usually longer files first (a folder not listed goes last). */
const FOLDERS = ['integration', 'sim', 'golden', 'property', 'unit'];

export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const cache = this.ctx.cache;
    const key = (f: TestSpecification) =>
      `${f.project.name}:${path.relative(this.ctx.config.root, f.moduleId)}`;
    const known = (f: TestSpecification) => cache.getFileTestResults(key(f))?.duration;
    const folder = (f: TestSpecification) => {
      const i = FOLDERS.indexOf(path.posix.basename(path.posix.dirname(f.moduleId)));
      return i < 0 ? FOLDERS.length : i;
    };
    const named = (f: TestSpecification) => {
      const i = LONGEST.findIndex((n) => f.moduleId.endsWith(`/test/${n}`));
      return i < 0 ? LONGEST.length : i;
    };
    const size = (f: TestSpecification) => fs.statSync(f.moduleId).size;
    return [...files].sort((a, b) => {
      const da = known(a);
      const db = known(b);
      if (da !== undefined && db !== undefined) return db - da;
      // A file never run before (new, or a fresh clone) goes before those with a duration.
      if (da === undefined && db !== undefined) return -1;
      if (db === undefined && da !== undefined) return 1;
      if (named(a) !== named(b)) return named(a) - named(b);
      if (folder(a) !== folder(b)) return folder(a) - folder(b);
      return size(b) - size(a);
    });
  }
}
