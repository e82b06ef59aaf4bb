/**
 * The order vitest hands files to its workers. Both projects share one pool (vitest runs groups of
 * different worker counts one after another, so a second group would wait for the first), and the
 * run ends when its longest file does: longest first, by the durations vitest cached from the last
 * run; in a fresh clone nothing is cached and the real-process files go first (a real-process file
 * takes seconds to minutes, most in-process files well under one), the larger before the smaller.
 * vitest's own sequencer does the same per project but puts one project's files before the
 * other's, which leaves the long real-process files for the end.
 */
import * as path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const cache = this.ctx.cache;
    const key = (f: TestSpecification) =>
      `${f.project.name}:${path.relative(this.ctx.config.root, f.moduleId)}`;
    const known = (f: TestSpecification) => cache.getFileTestResults(key(f))?.duration;
    const realProcess = (f: TestSpecification) =>
      f.moduleId.split(path.sep).includes('integration');
    const size = (f: TestSpecification) => cache.getFileStats(key(f))?.size ?? 0;
    return [...files].sort((a, b) => {
      const da = known(a);
      const db = known(b);
      if (da !== undefined && db !== undefined) return db - da;
      // A file never run before (new, or a fresh clone) goes before those with a duration.
      if (da === undefined && db !== undefined) return -1;
      if (db === undefined && da !== undefined) return 1;
      if (realProcess(a) !== realProcess(b)) return realProcess(a) ? -1 : 1;
      return size(b) - size(a);
    });
  }
}
