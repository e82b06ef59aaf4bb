/**
 * The sweeps' model-only mode: a cell's failover counts computed in one process, without servers,
 * by running the same code a cluster runs — the executor (primary/executor.ts) on a primary's
 * storage, every logged record framed by the WAL encoder (its real length) and replayed on the
 * standbys through the one replay entry point (storage/redo.ts `replayRecordSteps`), which counts.
 *
 * Entry points: `countCellsInProcess(cells, settings)`, `workloadKey`, `InProcessCluster` (also
 * used by the strategies sweep, which times each standby's replay).
 *
 * Why the counts equal a real run's (test/integration/model-counts.test.ts compares them): a real
 * standby starts from a base backup of a fresh primary (empty pool, nothing cached, no user
 * relations), replays every record the primary logs, in order, and its storage changes only by
 * replay. Pausing only delays replay: the records replayed after resume are the ones logged after
 * the pause point, applied to the state the earlier records left. So replaying everything at once
 * and taking the difference of the counters before and after the drop step gives the same span.
 * Cells that differ only in the standby's drop settings share one workload: the WAL does not depend
 * on the standby, so one executor feeds several standbys in lockstep.
 *
 * Two shortcuts keep the 100GB cells fast, neither changes a count of the failover span:
 *  - The executor plans on the first standby's heap, CLOG and catalog instead of a separate
 *    primary's. Both are built by the same redo from the same records, so they are identical; the
 *    primary's own buffer pool and size cache never influence what it logs.
 *  - Records before the pause point are not framed (their WAL bytes are counted as 0): only the
 *    span's bytes are reported, and those records are framed by the real encoder.
 */
import { dropSettingsForRules, type DropSettings } from '../../storage/drop.ts';
import { pgDropRules } from '../../storage/pg-drop-rules.ts';
import { WalsimError } from '../../common/errors.ts';
import { executeWrite, heapPlannerOf, type ExecutorContext } from '../../primary/executor.ts';
import { parseStatement } from '../../sql/parser.ts';
import {
  diffReplayCounts,
  promotionStepCounts,
  replayCountsOf,
  type FailoverCounts,
  type ReplayCounts,
} from '../../storage/replay-counts.ts';
import { runSteps } from '../../storage/drop.ts';
import { NodeStorage } from '../../storage/node-storage.ts';
import { replayRecordSteps } from '../../storage/redo.ts';
import { ByteBuffer } from '../../wal/byte-buffer.ts';
import { maxAlign, RecordEncoder } from '../../wal/codec.ts';
import type { RelFileNumber, TransactionId, WalRecordBody } from '../../wal/records.ts';
import { rowsForPages } from './rel-size.ts';
import { tableNames } from './state.ts';
import { dmlBacklog } from './dml.ts';
import type { CellSpec } from '../report/records.ts';

export interface InProcessSettings {
  thresholdDivisor: number;
}

/** Cells with the same key run the same workload (they differ only in the standby's drop settings). */
export function workloadKey(c: CellSpec): string {
  return [c.kind, c.nBuffers, c.variant, c.tables, c.pagesPerTable].join(' ');
}

/** An executor feeding standbys record by record. */
export class InProcessCluster {
  private readonly encoder = new RecordEncoder();
  private readonly frame = new ByteBuffer(4096);
  private lsn = 0;
  /** Frame records (for their WAL bytes): on from the pause point. */
  frameRecords = false;
  /** When set, each standby's replay time is added to its slot (ms, wall clock): the strategies sweep's measured column. */
  replayMs: number[] | null = null;

  constructor(readonly standbys: NodeStorage[]) {
    for (const s of standbys) s.smgr.inRecovery = true; // a standby's startup process replays in recovery
  }

  /** XLogInsert (framed by the real encoder), then replay on every standby. */
  log(body: WalRecordBody, xid: TransactionId): number {
    let totalLength = 0;
    if (this.frameRecords) {
      this.frame.clear();
      totalLength = this.encoder.append(this.frame, body, xid, this.lsn);
    }
    const rec = { body, header: { xid, totalLength } };
    const times = this.replayMs;
    if (times === null) {
      for (const s of this.standbys) runSteps(replayRecordSteps(s, rec));
    } else {
      for (let i = 0; i < this.standbys.length; i++) {
        const t0 = performance.now();
        runSteps(replayRecordSteps(this.standbys[i]!, rec));
        times[i]! += performance.now() - t0;
      }
    }
    this.lsn += maxAlign(totalLength);
    return this.lsn;
  }

  context(): ExecutorContext {
    const planner = this.standbys[0]!;
    return {
      catalog: planner.catalog,
      heap: heapPlannerOf(planner),
      log: (body, xid) => this.log(body, xid),
      commit: async (xid: TransactionId, droppedRels: RelFileNumber[]) => {
        this.log({ kind: 'XACT_COMMIT', xactTime: Date.now(), droppedRels }, xid);
      },
      checkpoint: async () => {
        throw new WalsimError('invalid_input', 'the in-process model run does not checkpoint');
      },
      yieldNow: async () => {},
    };
  }

  async run(sqls: string[]): Promise<void> {
    const ctx = this.context();
    for (const sql of sqls) await executeWrite(ctx, parseStatement(sql));
  }

  snapshot(): ReplayCounts[] {
    return this.standbys.map((s) => replayCountsOf(s));
  }
}

/**
 * The statements of a cell's steps, as steps.ts sends them (one statement per table each); the
 * DML variants as predict-bench's runner makes them (calibration/cell-run.ts `dmlBacklog`). No
 * twin of COPY (walsim has none) nor of Test B's DROP TABLE (the sweep's PostgreSQL side, which
 * `--counts walsim` measures through, has no such step).
 */
function statements(c: CellSpec): { before: string[]; failover: string[] } {
  const names = tableNames(c.kind === 'threshold' ? 'rel' : 'multi', c.tables);
  const rows = rowsForPages(c.pagesPerTable);
  const before = [
    ...names.map(
      (n) => `CREATE TABLE ${n} (${c.variant === 'truncate-toast' ? 'c int, d text' : 'c int'})`,
    ),
    ...names.map((n) => `INSERT INTO ${n} SELECT generate_series(1, ${rows})`),
    ...(c.variant === 'vacuum' ? names.map((n) => `DELETE FROM ${n}`) : []),
  ];
  if (c.variant === 'copy' || c.variant === 'copy-wide')
    throw new WalsimError(
      'invalid_input',
      `the ${c.variant} backlog has no walsim twin: walsim has no COPY (npm run calibrate measures it with --counts wal)`,
    );
  if (c.variant === 'drop')
    throw new WalsimError(
      'invalid_input',
      'the drop backlog has no walsim twin: the sweep that measures --counts walsim has no DROP TABLE step (fit it with --counts wal; a new calibration with --counts walsim needs --no-testb-drop)',
    );
  if (c.variant === 'insert' || c.variant === 'delete') {
    const dml = dmlBacklog(c.variant, c.tables);
    return { before: [...before, ...dml.prePause], failover: dml.backlog };
  }
  const verb = c.variant === 'vacuum' ? 'VACUUM' : 'TRUNCATE';
  return { before, failover: names.map((n) => `${verb} ${n}`) };
}

/**
 * The drop settings of a walsim cell: the major's rules when it follows one (`--pg-version`, as
 * a node started with it: storage/pg-drop-rules.ts), else its strategy and the sweep's divisor.
 */
export function cellDropSettings(c: CellSpec, thresholdDivisor: number): DropSettings {
  if (c.pgVersion !== undefined)
    return dropSettingsForRules(pgDropRules({ major: c.pgVersion, minor: null }), c.forceOptimized);
  return { strategy: c.strategy, thresholdDivisor, forceOptimized: c.forceOptimized };
}

/**
 * The failover counts of each cell, computed in-process (same order as `cells`). Cells sharing a
 * workload run together.
 */
export async function countCellsInProcess(
  cells: readonly CellSpec[],
  s: InProcessSettings,
  onGroupDone: (cellsDone: number, label: string) => void = () => {},
): Promise<FailoverCounts[]> {
  const out = new Array<FailoverCounts>(cells.length);
  const groups = new Map<string, number[]>();
  cells.forEach((c, i) => {
    const k = workloadKey(c);
    groups.set(k, [...(groups.get(k) ?? []), i]);
  });
  let done = 0;
  for (const idx of groups.values()) {
    const first = cells[idx[0]!]!;
    const standbys = idx.map((i) =>
      NodeStorage.create(cells[i]!.nBuffers, cellDropSettings(cells[i]!, s.thresholdDivisor)),
    );
    const cluster = new InProcessCluster(standbys);
    const { before, failover } = statements(first);
    await cluster.run(before);
    cluster.frameRecords = true;
    const atPause = cluster.snapshot();
    await cluster.run(failover);
    const atEnd = cluster.snapshot();
    idx.forEach((cellIndex, j) => {
      out[cellIndex] = {
        replay: diffReplayCounts(atPause[j]!, atEnd[j]!),
        ...promotionStepCounts(),
      };
    });
    done += idx.length;
    onGroupDone(done, workloadKey(first));
  }
  return out;
}
