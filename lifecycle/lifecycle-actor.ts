/**
 * The running lifecycle machine of one node, with its actions (the node's side effects) guarded:
 * an exception inside an action never reaches xstate. Left to xstate, a throwing action stops the
 * actor (every later event is ignored) and the error is rethrown from a real `setTimeout` — an
 * uncaught exception that ends a production process abruptly and escapes the simulator's clock.
 *
 * Here every action failure takes the path of every other failure in the node:
 * - it is reported at once to `onFailure` (the node logs it; an InvariantViolation is FATAL there:
 *   logged, the process exits non-zero, the data directory is left as a crash leaves it);
 * - `send(event)` then throws it to whoever sent the event (a control or SQL request gets an error
 *   reply, the process goes on); `notify(event)`, for the node's own processes (startup,
 *   walreceiver, checkpoint completion), does not throw — nobody is waiting for the answer;
 * - the machine keeps running: the transition stands, only the failed effect is missing.
 *
 * Entry points: `LifecycleActor` (`send`, `notify`, `getSnapshot`), `LifecycleActionError`.
 *
 * The machine is run by xstate's own pure `transition` (which computes the next snapshot and the
 * actions to execute without executing them), once per state and event kind in a process: the
 * result is kept in a table (`Configuration.steps`), and each actor then only looks its step up
 * and runs the actions. An xstate actor per node start and xstate's interpreter per event were
 * about a tenth of a simulation's CPU time (a node starts about 10 times and takes about 170
 * events per simulated scenario). The table is exact because a transition depends only on the
 * state, the context (fixed at the start: `startedInRecovery`) and the event's type and mode.
 * What an xstate actor does, this one does in the same order: the snapshot changes after the
 * transition's actions ran (they read the previous one), except at the start, whose actions run
 * with the initial snapshot in place; an event sent while one is being processed (by an action)
 * is queued and processed after it, within the outer send.
 */
import { initialTransition, transition } from 'xstate';
import {
  lifecycleMachine,
  type LifecycleEvent,
  type LifecycleInput,
  type LifecycleSnapshot,
} from './lifecycle-machine.ts';

/** The names of the machine's actions: what a node implements. */
export type LifecycleActionName = keyof typeof lifecycleMachine.implementations.actions;
export type LifecycleActions = Record<LifecycleActionName, () => void>;

/** An action threw: which action, on which event, and the error it threw (`cause`). */
export class LifecycleActionError extends Error {
  constructor(
    readonly action: LifecycleActionName,
    readonly event: LifecycleEvent['type'] | 'start',
    override readonly cause: unknown,
  ) {
    super(
      `lifecycle action "${action}" on ${event === 'start' ? 'the start of the machine' : event} failed: ${cause instanceof Error ? cause.message : String(cause)}`,
    );
    this.name = 'LifecycleActionError';
  }
}

/** A transition taken: the configuration it leads to and the actions it runs, in order. */
interface Step {
  readonly next: Configuration;
  readonly actions: readonly LifecycleActionName[];
}

/** One state of the machine (with its context): its snapshot and the steps taken from it. */
interface Configuration {
  readonly snapshot: LifecycleSnapshot;
  readonly steps: Map<string, Step>;
}

/** Every configuration met in this process, by state value and context. */
const configurations = new Map<string, Configuration>();

function configurationOf(snapshot: LifecycleSnapshot): Configuration {
  const key = `${snapshot.context.startedInRecovery} ${JSON.stringify(snapshot.value)}`;
  let c = configurations.get(key);
  if (c === undefined) {
    c = { snapshot, steps: new Map() };
    configurations.set(key, c);
  }
  return c;
}

function stepOf(snapshot: LifecycleSnapshot, actions: ReadonlyArray<{ type: string }>): Step {
  return {
    next: configurationOf(snapshot),
    actions: actions.map((a) => a.type as LifecycleActionName),
  };
}

/** The start of the machine for each input. */
const starts = new Map<boolean, Step>();

function startOf(input: LifecycleInput): Step {
  let s = starts.get(input.inRecovery);
  if (s === undefined) {
    s = stepOf(...initialTransition(lifecycleMachine, input));
    starts.set(input.inRecovery, s);
  }
  return s;
}

/** The step `event` takes from `c` (a guard reads only the context and a STOP's mode). */
function stepFrom(c: Configuration, event: LifecycleEvent): Step {
  const key = event.type === 'STOP' ? `STOP ${event.mode}` : event.type;
  let s = c.steps.get(key);
  if (s === undefined) {
    s = stepOf(...transition(lifecycleMachine, c.snapshot, event));
    c.steps.set(key, s);
  }
  return s;
}

export class LifecycleActor {
  private configuration: Configuration;
  /** Failures of the actions run by the event being sent now (the actions run synchronously). */
  private failures: LifecycleActionError[] = [];
  /**
   * The event sent from outside now ('start' while the machine starts). An event an action sends
   * is queued and runs within the outer send: its actions' failures count as the outer's.
   */
  private current: LifecycleEvent['type'] | 'start' = 'start';
  /** Events sent by actions while an event is processed; null when none is being processed. */
  private queued: LifecycleEvent[] | null = null;

  /**
   * `beforeAction` runs before each action, inside the action's guard: a test-only fault armed in
   * the node throws there, in the action's place.
   */
  constructor(
    input: LifecycleInput,
    private readonly actions: LifecycleActions,
    private readonly onFailure: (failure: LifecycleActionError) => void,
    private readonly beforeAction: ((name: LifecycleActionName) => void) | null = null,
  ) {
    // Entering the initial state runs actions (creating the role) with the initial snapshot in
    // place, as an xstate actor's start does; their failures go to the opener.
    const start = startOf(input);
    this.configuration = start.next;
    this.processing(() => this.runActions(start.actions));
    const startFailures = this.failures.splice(0);
    if (startFailures.length > 0) throw startFailures[0]!.cause;
  }

  getSnapshot(): LifecycleSnapshot {
    return this.configuration.snapshot;
  }

  /** Send `event` for a requester: an action failure (already reported) is thrown to the caller. */
  send(event: LifecycleEvent): void {
    const failures = this.run(event);
    if (failures.length > 0) throw failures[0]!.cause;
  }

  /** Send `event` from the node itself: action failures are reported (onFailure), never thrown. */
  notify(event: LifecycleEvent): void {
    this.run(event);
  }

  private run(event: LifecycleEvent): LifecycleActionError[] {
    const outer = this.current;
    const before = this.failures.length;
    this.current = event.type;
    try {
      if (this.queued !== null) this.queued.push(event);
      else this.processing(() => this.take(event));
    } finally {
      this.current = outer;
    }
    return this.failures.splice(before);
  }

  /** Run `first`, then every event queued meanwhile, in order. */
  private processing(first: () => void): void {
    const queued: LifecycleEvent[] = [];
    this.queued = queued;
    try {
      first();
      for (let i = 0; i < queued.length; i++) this.take(queued[i]!);
    } finally {
      this.queued = null;
    }
  }

  /** One event: the transition's actions (reading the snapshot before it), then the new state. */
  private take(event: LifecycleEvent): void {
    const step = stepFrom(this.configuration, event);
    this.runActions(step.actions);
    this.configuration = step.next;
  }

  private runActions(names: readonly LifecycleActionName[]): void {
    for (const name of names) this.runAction(name);
  }

  /** One action in its guard (one method, not a guarding closure per action and node start). */
  private runAction(name: LifecycleActionName): void {
    try {
      this.beforeAction?.(name);
      this.actions[name]!();
    } catch (e) {
      const failure = new LifecycleActionError(name, this.current, e);
      this.failures.push(failure);
      this.onFailure(failure);
    }
  }
}
