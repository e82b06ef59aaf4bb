/**
 * One cell of a sweep: which experiment (Test A threshold or Test B multi), which engine, the
 * standby's shared_buffers, the drop strategy, the variant and the relation sizes. Its own module
 * so that the sweep (sweep.ts) and the in-process counter (in-process.ts) share it without
 * importing each other.
 */
import type { DropStrategy } from '../../server/settings.ts';
import type { EngineName } from './engine.ts';

export type SweepKind = 'threshold' | 'multi';
/**
 * `truncate-toast`: TRUNCATE of tables that have a TOAST table (three relfilenodes dropped each).
 * `insert` / `delete`: row-level DML backlogs (INSERT of 2,260 rows into each table / DELETE of its
 * 2,486 rows), which only `npm run calibrate` plans (through predict-bench's runner, not the sweeps).
 */
export type Variant =
  'vacuum' | 'truncate' | 'truncate-toast' | 'insert' | 'delete' | 'copy' | 'copy-wide';

/** The row-level backlogs (experiment/dml.ts): measured through predict-bench's runner only. */
export const ROW_BACKLOG_VARIANTS: readonly Variant[] = ['insert', 'delete', 'copy', 'copy-wide'];
/** Who runs the cell: walsim, or a real PostgreSQL primary + standby (scripts/postgres/). */
export type Engine = EngineName;

export interface CellSpec {
  kind: SweepKind;
  engine: Engine;
  /** Standby shared_buffers as given (e.g. `100GB`) and in buffers. */
  sharedBuffers: string;
  nBuffers: number;
  strategy: DropStrategy;
  forceOptimized: boolean;
  variant: Variant;
  /** Test A: the relation size `NB/k`, its k and pages. Test B: null, 1 page per table. */
  relSize: string | null;
  relDivisor: number | null;
  pagesPerTable: number;
  tables: number;
  /**
   * PostgreSQL cells of `--pg-version`: the major run (the npm registry's build, scripts/postgres/
   * pg-install.ts); absent: the default binaries (Debian's 15, or `--pg-bin`).
   */
  pgVersion?: number;
}
