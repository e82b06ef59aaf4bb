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
 */
import { createActor, type Actor, type AnyActorRef } from 'xstate';
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

/**
 * Each running actor's guarded actions, found through the `self` xstate passes to an action.
 * `machine.provide` builds a whole new machine (every state node, transition and action
 * resolved again): done once per node start it was a few percent of a simulation's CPU time,
 * so the machine is provided once per process with actions that dispatch to the actor's own.
 */
const actionsOf = new WeakMap<AnyActorRef, LifecycleActions>();

const dispatchingMachine = lifecycleMachine.provide({
  actions: Object.fromEntries(
    Object.keys(lifecycleMachine.implementations.actions).map((name) => [
      name,
      ({ self }: { self: AnyActorRef }) => actionsOf.get(self)![name as LifecycleActionName]!(),
    ]),
  ) as Record<LifecycleActionName, (args: { self: AnyActorRef }) => void>,
});

export class LifecycleActor {
  private readonly actor: Actor<typeof lifecycleMachine>;
  /** Failures of the actions run by the event being sent now (xstate runs them synchronously). */
  private failures: LifecycleActionError[] = [];
  /**
   * The event sent from outside now ('start' while the machine starts). An event an action sends
   * is queued by xstate and runs within the outer send: its actions' failures count as the outer's.
   */
  private current: LifecycleEvent['type'] | 'start' = 'start';

  constructor(
    input: LifecycleInput,
    actions: LifecycleActions,
    private readonly onFailure: (failure: LifecycleActionError) => void,
  ) {
    const guarded = {} as LifecycleActions;
    for (const name of Object.keys(actions) as LifecycleActionName[]) {
      guarded[name] = () => {
        try {
          actions[name]!();
        } catch (e) {
          const failure = new LifecycleActionError(name, this.current, e);
          this.failures.push(failure);
          this.onFailure(failure);
        }
      };
    }
    this.actor = createActor(dispatchingMachine, { input });
    actionsOf.set(this.actor, guarded);
    // Entering the initial state runs actions (creating the role): their failures go to the opener.
    this.actor.start();
    const startFailures = this.failures.splice(0);
    if (startFailures.length > 0) throw startFailures[0]!.cause;
  }

  getSnapshot(): LifecycleSnapshot {
    return this.actor.getSnapshot();
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
      this.actor.send(event);
    } finally {
      this.current = outer;
    }
    return this.failures.splice(before);
  }
}
