/**
 * Helpers the storage unit tests share: run a drop's steps to the end counting its yields, a
 * node's heap content as one comparable string, and a primary with standbys kept by redo.
 */
import { executeWrite, heapPlannerOf, type ExecutorContext } from '../../primary/executor.ts';
import { parseStatement } from '../../sql/parser.ts';
import { DEFAULT_DROP_SETTINGS, type DropResult, type DropStrategy } from '../../storage/drop.ts';
import { NodeStorage } from '../../storage/node-storage.ts';
import { redo } from '../../storage/redo.ts';
import type { RelFileNumber, WalRecordBody } from '../../wal/records.ts';

/** Run `g` to completion; its return value and how many times it yielded (its steps − 1). */
export function drainSteps<T>(g: Generator<void, T, void>): { value: T; yields: number } {
  let yields = 0;
  for (;;) {
    const r = g.next();
    if (r.done) return { value: r.value, yields };
    yields++;
  }
}

/** Every relation of `st`'s heap with its size and serialized pages, as JSON. */
export function heapContentOf(st: NodeStorage): string {
  return JSON.stringify(
    st.heap
      .relations()
      .map((r) => [
        r,
        st.heap.nblocks(r),
        Buffer.from(st.heap.serializeRelation(r)).toString('base64'),
      ]),
  );
}

/**
 * A primary and one standby per strategy: SQL run by the executor on the primary logs into an
 * in-test WAL (`logged`) that every node replays by redo at once; each standby's drops recorded.
 */
export function redoCluster(standbyStrategies: DropStrategy[]) {
  const primary = NodeStorage.create(64, DEFAULT_DROP_SETTINGS);
  const standbys = standbyStrategies.map((strategy) => {
    const st = NodeStorage.create(4096, { ...DEFAULT_DROP_SETTINGS, strategy });
    st.smgr.inRecovery = true;
    return st;
  });
  const drops: DropResult[][] = standbys.map(() => []);
  standbys.forEach((st, i) => (st.onDrop = (r) => drops[i]!.push(r)));
  const logged: WalRecordBody[] = [];
  const log = (body: WalRecordBody, xid: number) => {
    logged.push(body);
    for (const st of [primary, ...standbys]) redo(st, body, xid);
    return 0;
  };
  const ctx: ExecutorContext = {
    catalog: primary.catalog,
    heap: heapPlannerOf(primary),
    log,
    commit: async (xid: number, droppedRels: RelFileNumber[]) =>
      void log({ kind: 'XACT_COMMIT', xactTime: 0, droppedRels }, xid),
    checkpoint: async () => {},
    yieldNow: async () => {},
  };
  const sql = (text: string) => executeWrite(ctx, parseStatement(text));
  return { primary, standbys, drops, logged, sql };
}

export type RedoCluster = ReturnType<typeof redoCluster>;
