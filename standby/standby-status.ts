/**
 * The standby role's part of a node's status (`NodeStatus` in server/node-status.ts): receive,
 * write and replay positions, the pause state, the walreceiver's connection and counters, and the
 * startup process's progress and replay error.
 *
 * Entry points: `StandbyStatus`, `standbyStatusOf`.
 */
import { formatLsn } from '../wal/lsn.ts';
import {
  pauseStateOf,
  type LifecycleSnapshot,
  type RecoveryPauseState,
} from '../lifecycle/lifecycle-machine.ts';
import type { ReplayError, StartupProcess } from './startup.ts';
import type { WalReceiver } from './walreceiver.ts';
import type { Lsn } from '../wal/lsn.ts';

export interface StandbyStatus {
  role: 'standby';
  /** primary_conninfo: null when the standby has no upstream. */
  upstream: { host: string; port: number; applicationName: string } | null;
  /** Flushed by the walreceiver (pg_last_wal_receive_lsn), written, and replayed. */
  receiveLsn: string;
  writeLsn: string;
  replayLsn: string;
  pauseState: RecoveryPauseState;
  /** Replay waits for WAL with nothing flushed left to replay. */
  caughtUp: boolean;
  recordsReplayed: number;
  replayError: ReplayError | null;
  /** The lifecycle machine's receiver region, or 'stopped' once promotion stopped it. */
  receiverState: 'connecting' | 'streaming' | 'disconnected' | 'stopped';
  receiverConnects: number;
  receiverLastError: string | null;
  receiverStartLsns: string[];
  receiverTimelineSwitches: number;
  receivedMessages: number;
  receivedBytes: number;
  walWriteFailures: number;
  walWriteError: string | null;
}

export interface StandbyStatusSource {
  upstream: StandbyStatus['upstream'];
  wal: { readonly writeLsn: Lsn; readonly flushLsn: Lsn };
  startup: Pick<
    StartupProcess,
    'replayEndLsn' | 'nextLsn' | 'caughtUp' | 'recordsReplayed' | 'error'
  >;
  receiver: WalReceiver | null;
  lifecycle: LifecycleSnapshot;
}

export function standbyStatusOf(src: StandbyStatusSource): StandbyStatus {
  const { wal, startup: st, receiver: r, lifecycle: snap } = src;
  return {
    role: 'standby',
    upstream: src.upstream,
    receiveLsn: formatLsn(wal.flushLsn),
    writeLsn: formatLsn(wal.writeLsn),
    replayLsn: formatLsn(st.replayEndLsn),
    pauseState: pauseStateOf(snap),
    caughtUp: st.caughtUp && st.nextLsn >= wal.flushLsn,
    recordsReplayed: st.recordsReplayed,
    replayError: st.error,
    receiverState: snap.matches('recovery')
      ? (snap.value as { recovery: { receiver: 'connecting' | 'streaming' | 'disconnected' } })
          .recovery.receiver
      : 'stopped',
    receiverConnects: r?.connects ?? 0,
    receiverLastError: r?.lastError ?? null,
    receiverStartLsns: (r?.startLsns ?? []).map(formatLsn),
    receiverTimelineSwitches: r?.timelineSwitches ?? 0,
    receivedMessages: r?.receivedMessages ?? 0,
    receivedBytes: r?.receivedBytes ?? 0,
    walWriteFailures: r?.writeFailures ?? 0,
    walWriteError: r?.writeError ?? null,
  };
}
