/**
 * The server lifecycle as an xstate v5 machine: the single source of truth for a node's state.
 * Control answers (pg_is_in_recovery, pause state, promotion errors) are read from its snapshot,
 * and every side effect — pausing/resuming replay, stopping the walreceiver, writing
 * END_OF_RECOVERY, opening for writes, requesting the first checkpoint — is an action of a
 * transition. The machine is pure: the node supplies action implementations with `provide()`.
 *
 * The roles are actions too: entering `recovery` creates the standby role (startup process,
 * walreceiver), entering `primary` creates the primary role (executor, commits, checkpoints), and
 * END_OF_RECOVERY_WRITTEN retires the standby role after opening for writes — transition actions
 * run before the entry actions of the target, so the primary role is created with the node
 * already open for writes and no standby role left. `stopping` retires nothing: the role in force
 * runs the shutdown.
 *
 *   recovery (parallel)                         promoting                       primary
 *     receiver: connecting ⇄ streaming          replayingReceived               checkpointing
 *               ↘ disconnected ↗                  —CAUGHT_UP→ writingEndOfRecovery  —CHECKPOINT_DONE→ readWrite
 *     replay: running ⇄ waitingForWal             —END_OF_RECOVERY_WRITTEN→ primary
 *             running/waiting —PAUSE→ pauseRequested —PAUSE_CONFIRMED→ paused
 *             pauseRequested/paused —RESUME→ running
 *   —PROMOTE→ promoting (PostgreSQL 14+: a paused standby promotes; pause is reset to 'not paused')
 *   any non-stopping state —STOP(mode)→ stopping.{smart,fast,immediate}
 *
 * PostgreSQL references: xlogrecovery.c (RecoveryPauseState, SetPromoteIsTriggered,
 * CheckForStandbyTrigger), xlogfuncs.c (pg_wal_replay_pause/resume, pg_promote), xlog.c StartupXLOG.
 */
import { setup, type SnapshotFrom } from 'xstate';
import { WalsimError } from '../common/errors.ts';
import type { StopMode } from '../protocol/messages.ts';

export type LifecycleEvent =
  | { type: 'PAUSE' }
  | { type: 'PAUSE_CONFIRMED' }
  | { type: 'RESUME' }
  | { type: 'PROMOTE' }
  | { type: 'WAL_RECEIVED' }
  | { type: 'CAUGHT_UP' }
  | { type: 'UPSTREAM_LOST' }
  | { type: 'UPSTREAM_CONNECTED' }
  | { type: 'UPSTREAM_RETRY' }
  | { type: 'END_OF_RECOVERY_WRITTEN' }
  | { type: 'CHECKPOINT_DONE' }
  | { type: 'STOP'; mode: StopMode };

export interface LifecycleInput {
  /** A standby (standby.signal present) starts in recovery; otherwise the node is a primary. */
  inRecovery: boolean;
}

/** STOP(mode) from recovery or as a primary: pg_ctl's three modes. */
const STOP_BY_MODE = [
  { guard: 'isImmediateStop', target: '#lifecycle.stopping.immediate' },
  { guard: 'isSmartStop', target: '#lifecycle.stopping.smart', actions: 'beginShutdown' },
  { target: '#lifecycle.stopping.fast', actions: 'beginShutdown' },
] as const;

export const lifecycleMachine = setup({
  types: {} as {
    events: LifecycleEvent;
    input: LifecycleInput;
    context: { startedInRecovery: boolean };
  },
  actions: {
    // Effects; the node provides the implementations. Defaults do nothing (pure model, tests).
    createStandbyRole: () => {},
    createPrimaryRole: () => {},
    retireStandbyRole: () => {},
    requestReplayPause: () => {},
    resumeReplay: () => {},
    recordResumeRequested: () => {},
    recordReplayResumed: () => {},
    recordPromoteRequested: () => {},
    stopWalReceiver: () => {},
    wakeReplayForPromotion: () => {},
    recordReplayCaughtUp: () => {},
    writeEndOfRecovery: () => {},
    openForWrites: () => {},
    requestCheckpoint: () => {},
    recordCheckpointDone: () => {},
    beginShutdown: () => {},
  },
  guards: {
    startsInRecovery: ({ context }) => context.startedInRecovery,
    isImmediateStop: ({ event }) => event.type === 'STOP' && event.mode === 'immediate',
    isSmartStop: ({ event }) => event.type === 'STOP' && event.mode === 'smart',
  },
}).createMachine({
  id: 'lifecycle',
  context: ({ input }) => ({ startedInRecovery: input.inRecovery }),
  initial: 'starting',
  states: {
    starting: {
      always: [{ guard: 'startsInRecovery', target: 'recovery' }, { target: 'primary.readWrite' }],
    },
    recovery: {
      type: 'parallel',
      entry: 'createStandbyRole',
      on: {
        PROMOTE: {
          target: 'promoting',
          actions: ['recordPromoteRequested', 'stopWalReceiver', 'wakeReplayForPromotion'],
        },
        STOP: STOP_BY_MODE,
      },
      states: {
        receiver: {
          initial: 'connecting',
          states: {
            connecting: { on: { UPSTREAM_CONNECTED: 'streaming', UPSTREAM_LOST: 'disconnected' } },
            streaming: { on: { UPSTREAM_LOST: 'disconnected' } },
            disconnected: { on: { UPSTREAM_RETRY: 'connecting', UPSTREAM_CONNECTED: 'streaming' } },
          },
        },
        replay: {
          initial: 'running',
          states: {
            running: {
              on: {
                PAUSE: { target: 'pauseRequested', actions: 'requestReplayPause' },
                CAUGHT_UP: 'waitingForWal',
                RESUME: { actions: 'recordResumeRequested' },
              },
            },
            waitingForWal: {
              on: {
                WAL_RECEIVED: 'running',
                PAUSE: { target: 'pauseRequested', actions: 'requestReplayPause' },
                RESUME: { actions: 'recordResumeRequested' },
              },
            },
            pauseRequested: {
              on: {
                PAUSE_CONFIRMED: 'paused',
                PAUSE: {},
                RESUME: {
                  target: 'running',
                  actions: ['recordResumeRequested', 'resumeReplay', 'recordReplayResumed'],
                },
              },
            },
            paused: {
              on: {
                PAUSE: {},
                RESUME: {
                  target: 'running',
                  actions: ['recordResumeRequested', 'resumeReplay', 'recordReplayResumed'],
                },
              },
            },
          },
        },
      },
    },
    promoting: {
      initial: 'replayingReceived',
      on: {
        // A smart stop during promotion does not wait: promotion has no sessions to wait for.
        STOP: [
          { guard: 'isImmediateStop', target: '#lifecycle.stopping.immediate' },
          { target: '#lifecycle.stopping.fast', actions: 'beginShutdown' },
        ],
      },
      states: {
        replayingReceived: {
          on: { CAUGHT_UP: { target: 'writingEndOfRecovery', actions: 'recordReplayCaughtUp' } },
        },
        writingEndOfRecovery: {
          entry: 'writeEndOfRecovery',
          on: {
            END_OF_RECOVERY_WRITTEN: {
              target: '#lifecycle.primary.checkpointing',
              actions: ['openForWrites', 'retireStandbyRole'],
            },
          },
        },
      },
    },
    primary: {
      initial: 'readWrite',
      entry: 'createPrimaryRole',
      on: {
        STOP: STOP_BY_MODE,
      },
      states: {
        /** Read-write already (pg_is_in_recovery() is false) while the first checkpoint runs. */
        checkpointing: {
          entry: 'requestCheckpoint',
          on: { CHECKPOINT_DONE: { target: 'readWrite', actions: 'recordCheckpointDone' } },
        },
        readWrite: {},
      },
    },
    stopping: {
      initial: 'fast',
      states: {
        smart: { type: 'final' },
        fast: { type: 'final' },
        immediate: { type: 'final' },
      },
    },
  },
});

export type LifecycleSnapshot = SnapshotFrom<typeof lifecycleMachine>;

export type RecoveryPauseState = 'not paused' | 'pause requested' | 'paused';

/**
 * A value derived from a snapshot, computed once per snapshot. A snapshot never changes (each
 * transition makes a new one), and these are read on every statement, WAL record batch and
 * status reply: xstate's `matches` resolves the state value again each time (about 1 µs).
 */
function perSnapshot<T>(derive: (s: LifecycleSnapshot) => T): (s: LifecycleSnapshot) => T {
  const memo = new WeakMap<LifecycleSnapshot, { v: T }>();
  return (s) => {
    let m = memo.get(s);
    if (m === undefined) {
      m = { v: derive(s) };
      memo.set(s, m);
    }
    return m.v;
  };
}

/** pg_is_in_recovery(): true until the node opens for writes (promotion sets it false before the checkpoint). */
export const isInRecovery: (s: LifecycleSnapshot) => boolean = perSnapshot(
  (s) => s.matches('recovery') || s.matches('promoting'),
);

/** pg_get_wal_replay_pause_state(), read from the machine. Promotion resets it to 'not paused'. */
export const pauseStateOf: (s: LifecycleSnapshot) => RecoveryPauseState = perSnapshot((s) => {
  if (s.matches({ recovery: { replay: 'pauseRequested' } })) return 'pause requested';
  if (s.matches({ recovery: { replay: 'paused' } })) return 'paused';
  return 'not paused';
});

export function isPromoting(s: LifecycleSnapshot): boolean {
  return s.matches('promoting');
}

const STOP_MODES: readonly StopMode[] = ['smart', 'fast', 'immediate'];

/**
 * The stop in progress, or null: the `stopping` state's substate. (A smart stop requested during
 * promotion is a fast one: promotion has no sessions to wait for.) The node's "shutting down" is
 * this, never a flag of its own.
 */
export const stopModeOf: (s: LifecycleSnapshot) => StopMode | null = perSnapshot(
  (s) => STOP_MODES.find((m) => s.matches({ stopping: m })) ?? null,
);

/** A short name of the current state for status output, e.g. 'recovery(streaming,paused)'. */
export function describeState(s: LifecycleSnapshot): string {
  const v = s.value;
  if (typeof v === 'string') return v;
  if ('recovery' in v) {
    const r = v.recovery as { receiver: string; replay: string };
    return `recovery(${r.receiver},${r.replay})`;
  }
  const [k, sub] = Object.entries(v)[0]!;
  return `${k}.${String(sub)}`;
}

/**
 * Why a recovery-control event is refused in this state, as PostgreSQL words it (xlogfuncs.c), or
 * null when it is accepted. pg_wal_replay_pause/resume: "recovery is not in progress" on a primary,
 * "standby promotion is ongoing" once promotion was triggered; pg_promote on a primary: "recovery
 * is not in progress".
 */
export function refusalOf(
  s: LifecycleSnapshot,
  event: 'PAUSE' | 'RESUME' | 'PROMOTE',
): WalsimError | null {
  if (s.matches('recovery')) return null;
  if (s.matches('promoting')) {
    if (event === 'PROMOTE') return null; // already triggered: pg_promote waits for it
    return new WalsimError('promotion_ongoing', 'standby promotion is ongoing', '55000');
  }
  if (s.matches('stopping'))
    return new WalsimError('shutting_down', 'the database system is shutting down', '57P03');
  return new WalsimError(
    'not_in_recovery',
    'recovery is not in progress',
    '55000',
    undefined,
    RECOVERY_CONTROL_HINT,
  );
}

/** xlogfuncs.c's HINT when a recovery control function runs outside recovery. */
export const RECOVERY_CONTROL_HINT =
  'Recovery control functions can only be executed during recovery.';
