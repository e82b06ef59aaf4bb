/**
 * A cycle thread for the exporter's tests (CycleHost's `entry`): the real `serveCycles` with a
 * stand-in prediction, steered by the host's `extra`:
 * - `plain`: every cycle predicts 1.5 s;
 * - `throw`: the first thread's second cycle throws outside any promise (the thread dies); a
 *   restarted thread waits, before its first prediction, until the test sets flag 0;
 * - `block`: the second cycle reads WAL with the real reader and, at its 1000th record, sets flag
 *   1 and blocks the whole thread (Atomics.wait: no turn of its event loop) until flag 0 is set.
 * Flags are an Int32Array over `extra.shared`: [0] released, [1] mid-read, [2] the record at
 * which the read was released, [3] records read in all, [4] 100 + this thread's nice value once
 * the cycle thread started (Linux; 0 elsewhere).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import { workerData } from 'node:worker_threads';
import type { PredictFn } from '../../scripts/exporter/collector.ts';
import { serveCycles, type CycleThreadData } from '../../scripts/exporter/cycle-thread.ts';
import { isCycleThread } from '../../scripts/exporter/thread-mark.ts';
import { pgWalRecords } from '../../scripts/predict/pg-wal-source.ts';
import type { Prediction } from '../../scripts/predict/prediction.ts';

export interface CycleStubExtra {
  mode: 'plain' | 'throw' | 'block';
  shared: SharedArrayBuffer;
  /** `block`: a pg_wal directory and the range to read. */
  walDir?: string;
  from?: string;
  to?: string;
}

/** The fields of a Prediction the exporter reads. */
export function fakePrediction(url: string, writableS: number, receive: string): Prediction {
  return {
    standby: url,
    state: { timeline: 1, nBuffers: 16384, receiveLsn: receive, replayLsn: '0/100' },
    paused: true,
    range: { from: '0/100', to: receive, bytes: 4096 },
    primary: null,
    patroniPosition: receive,
    records: { byType: [{ rmgr: 'Transaction', type: 'COMMIT', count: 3 }] },
    drops: { calls: { fullScan: 2, lookup: 1 }, descriptorsScanned: 32768, probes: 4 },
    predicted: {
      writableS,
      phases: { replayS: writableS - 0.01, endOfRecoveryS: 0.006, openForWritesS: 0.004 },
      replay: {
        recordsS: 0,
        genericRecordsS: 0,
        dropsS: writableS - 0.01,
        smgrS: 0,
        controlFileS: 0,
      },
    },
  } as unknown as Prediction;
}

function stubPredict(data: CycleThreadData): PredictFn {
  const extra = data.extra as CycleStubExtra;
  const flags = new Int32Array(extra.shared);
  let cycle = 0;
  return async (input) => {
    cycle += 1;
    if (extra.mode === 'throw' && data.generation === 0 && cycle === 2) {
      setTimeout(() => {
        throw new Error('stand-in fault of the cycle thread');
      });
      return new Promise<never>(() => {});
    }
    if (extra.mode === 'throw' && data.generation > 0 && cycle === 1)
      Atomics.wait(flags, 0, 0, 60_000);
    if (extra.mode === 'block' && cycle === 2) {
      let read = 0;
      await pgWalRecords(
        extra.walDir!,
        [{ tli: 1, beginLsn: 0, endLsn: null }],
        extra.from!,
        extra.to!,
        () => {
          if (++read !== 1000) return;
          Atomics.store(flags, 1, 1);
          Atomics.wait(flags, 0, 0, 60_000);
          Atomics.store(flags, 2, read);
        },
        15,
      );
      Atomics.store(flags, 3, read);
      return fakePrediction(input.standby, 9.5, '0/2000');
    }
    return fakePrediction(input.standby, 1.5, '0/1000');
  };
}

if (isCycleThread()) {
  serveCycles(stubPredict(workerData as CycleThreadData));
  const flags = new Int32Array(((workerData as CycleThreadData).extra as CycleStubExtra).shared);
  if (fs.existsSync('/proc/thread-self')) {
    const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').pop());
    Atomics.store(flags, 4, 100 + os.getPriority(tid));
  }
}
