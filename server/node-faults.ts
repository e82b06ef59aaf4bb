/**
 * Fault injection for tests, per node: `redo_fail` arms an InvariantViolation inside the next record
 * the node applies (replay on a standby, a write's own redo on a primary); `cut_replication` and
 * `wal_write_fail` act on a standby's walreceiver and WAL writer; `slow_disk` makes every write and
 * fsync of the node's disk slower (common/latency-disk.ts); `lifecycle_action_error` and
 * `lifecycle_action_invariant` make the next lifecycle action throw an Error or an
 * InvariantViolation (lifecycle/lifecycle-actor.ts says what follows). Counts what was injected.
 *
 * Entry points: `NodeFaults` (`inject`, `redoFaultArmed`, `injectedRedoFailure`,
 * `beforeLifecycleAction`, which the lifecycle actor runs before every action).
 */
import { InvariantViolation } from '../common/assert.ts';
import type { Clock } from '../common/clock.ts';
import type { Disk } from '../common/disk.ts';
import { WalsimError } from '../common/errors.ts';
import { LatencyDisk } from '../common/latency-disk.ts';
import type { FaultName } from '../protocol/messages.ts';
import { injectedBugs } from '../common/injected-bugs.ts';
import { formatLsn, type Lsn } from '../wal/lsn.ts';
import type { WalWriter } from '../wal/wal-writer.ts';

export class NodeFaults {
  /** Faults injected so far, by name (status). */
  readonly injected: Record<FaultName, number> = {
    cut_replication: 0,
    wal_write_fail: 0,
    redo_fail: 0,
    slow_disk: 0,
    lifecycle_action_error: 0,
    lifecycle_action_invariant: 0,
  };
  /** Fault `redo_fail`: the next record this node applies throws an InvariantViolation. */
  private redoArmed = false;
  /** Faults `lifecycle_action_*`: what the next lifecycle action throws instead of running. */
  private actionArmed: 'error' | 'invariant' | null = null;

  constructor(
    private readonly clock: Clock,
    private readonly disk: Disk,
    private readonly wal: WalWriter,
  ) {}

  /**
   * Inject `fault`. `receiver` is the standby's walreceiver (it throws, naming the fault, when the
   * node has none): cut its connection and hold it down for holdMs, or make every WAL write fail
   * with ENOSPC for holdMs (a full disk). `slow_disk`: writes and fsyncs take latencyMs more for
   * holdMs, on a disk with a latency layer (the server process binds one).
   */
  inject(
    fault: FaultName,
    holdMs: number,
    latencyMs: number,
    receiver: () => { cutConnection(holdMs: number): void },
  ): { injected: FaultName } {
    if (fault === 'slow_disk') {
      if (!(this.disk instanceof LatencyDisk))
        throw new WalsimError(
          'invalid_input',
          'slow_disk needs a disk with a latency layer (the server process binds one)',
        );
      this.disk.latency.set(latencyMs, latencyMs, holdMs, this.clock.monoMs());
    } else if (fault === 'redo_fail') this.redoArmed = true;
    else if (fault === 'lifecycle_action_error') this.actionArmed = 'error';
    else if (fault === 'lifecycle_action_invariant') this.actionArmed = 'invariant';
    else if (fault === 'cut_replication') receiver().cutConnection(holdMs);
    else {
      receiver();
      const until = this.clock.monoMs() + holdMs;
      const writeFaultHook = () => {
        if (this.clock.monoMs() >= until) {
          this.wal.writeFaultHook = null;
          return;
        }
        throw Object.assign(new Error('ENOSPC: no space left on device, write (injected fault)'), {
          code: 'ENOSPC',
        });
      };
      // Through a local, not `this.wal.writeFaultHook = () => …`: test/unit/closure-tenure.test.ts.
      this.wal.writeFaultHook = writeFaultHook;
    }
    this.injected[fault]++;
    return { injected: fault };
  }

  redoFaultArmed(): boolean {
    return this.redoArmed;
  }

  /** Fault `redo_fail`: throw (once) where the record ending at `at` would be applied. */
  injectedRedoFailure(at: Lsn): void {
    if (!this.redoArmed) return;
    this.redoArmed = false;
    throw new InvariantViolation(
      `INV-FAULT: injected redo failure applying the record ending at ${formatLsn(at)}`,
    );
  }

  /**
   * Before lifecycle action `name` runs: an armed `lifecycle_action_*` fault throws (once) in its
   * place; so do the simulator's planted bugs, at openForWrites (promotion's effect).
   */
  beforeLifecycleAction(name: string): void {
    const armed = this.actionArmed;
    this.actionArmed = null;
    const planted =
      name !== 'openForWrites'
        ? null
        : injectedBugs.lifecycleActionInvariant
          ? 'invariant'
          : injectedBugs.lifecycleActionError
            ? 'error'
            : null;
    const kind = armed ?? planted;
    if (kind === 'invariant')
      throw new InvariantViolation(`INV-FAULT: injected failure of lifecycle action ${name}`);
    if (kind === 'error')
      throw Object.assign(
        new Error(`EIO: i/o error (injected failure of lifecycle action ${name})`),
        { code: 'EIO' },
      );
  }
}
