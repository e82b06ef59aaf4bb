/**
 * The topology decisions below the shell, one implementation for the cluster CLI
 * (server/topology.ts: real processes over the control endpoint, node:fs) and the simulator
 * (sim/operator.ts: ServerNodes on simulated time and in-memory disks): a stopped node's end of
 * WAL, the rejoin verdict (may it follow another node's history?), and the switchover — the order
 * of its steps, what is waited for before the promotion, how synchronous_standby_names is handed
 * over and which standbys are repointed. It opens no socket and reads files only through the
 * `Disk` it is given; each switchover caller passes its `SwitchoverSteps` (how to stop, wait,
 * reload, promote, rejoin, repoint).
 *
 * Entry points: `walEndOfDataDir`, `rejoinVerdictOf`, `handOverNames`, `runSwitchover`.
 */
import type { Disk } from '../common/disk.ts';
import type { Lsn, TimeLineId } from '../wal/lsn.ts';
import { findEndOfWal } from '../wal/wal-reader.ts';
import { readTimelineHistory } from '../wal/segment.ts';
import { readControlFile } from '../wal/control-file.ts';
import { checkRejoin, type RejoinVerdict } from '../wal/timeline-fork.ts';
import { latestTimeline, STANDBY_SIGNAL } from './startup-replay.ts';
import {
  formatSyncRepConfig,
  parseSynchronousStandbyNames,
} from '../primary/sync-standby-names.ts';

/** A data directory's timeline: a standby's newest history file, a primary's control file's. */
export function timelineOfDataDir(dir: string, disk: Disk): TimeLineId {
  return timelineOf(dir, disk);
}

function timelineOf(dir: string, disk: Disk): TimeLineId {
  const control = readControlFile(dir, disk);
  return disk.exists(`${dir}/${STANDBY_SIGNAL}`)
    ? latestTimeline(dir, control.timeline, disk)
    : control.timeline;
}

/** A stopped node's end of WAL (where its next record would start) and timeline, read from disk. */
export function walEndOfDataDir(dir: string, disk: Disk): { endLsn: Lsn; timeline: TimeLineId } {
  const control = readControlFile(dir, disk);
  const timeline = timelineOf(dir, disk);
  const end = findEndOfWal(dir, control.redoLsn, {
    timeline,
    segmentSize: control.walSegmentSize,
    disk,
  });
  return { endLsn: end.endLsn, timeline };
}

export interface RejoinCheck {
  verdict: RejoinVerdict;
  oldEndLsn: Lsn;
  oldTimeline: TimeLineId;
  newTimeline: TimeLineId;
}

/**
 * May the stopped node in `old` follow the node in `to`? Its WAL end against the fork point in
 * `to`'s timeline history (wal/timeline-fork.ts checkRejoin).
 */
export function rejoinVerdictOf(
  old: { dir: string; disk: Disk },
  to: { dir: string; disk: Disk },
): RejoinCheck {
  const { endLsn, timeline } = walEndOfDataDir(old.dir, old.disk);
  const toTli = timelineOf(to.dir, to.disk);
  const verdict = checkRejoin(
    readTimelineHistory(old.dir, timeline, old.disk),
    endLsn,
    readTimelineHistory(to.dir, toTli, to.disk),
  );
  return { verdict, oldEndLsn: endLsn, oldTimeline: timeline, newTimeline: toTli };
}

/**
 * synchronous_standby_names with `from` (the promoted standby) replaced by `to` (the old primary).
 * When `to` is listed already (one list set on every node, the primary's own name included), the
 * promoted standby's entry is dropped instead: replacing it would list `to` twice, and
 * PostgreSQL counts each walsender once, so `ANY 3 (d, b, b)` could never be satisfied.
 */
export function handOverNames(text: string, from: string, to: string): string {
  const cfg = parseSynchronousStandbyNames(text);
  if (cfg === null) return '';
  const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
  const listed = cfg.members.some((m) => same(m, to));
  const members = listed
    ? cfg.members.filter((m) => !same(m, from))
    : cfg.members.map((m) => (same(m, from) ? to : m));
  if (cfg.method === 'priority' && cfg.numSync === 1 && !text.includes('('))
    return members.join(', ');
  return formatSyncRepConfig({ ...cfg, members });
}

/** What a switchover does to the nodes, bound by the caller (N: how it names a node). */
export interface SwitchoverSteps<N> {
  /** pg_ctl stop -m fast (its walsenders deliver the shutdown checkpoint first). */
  stopFast(node: N): Promise<void>;
  /** A stopped node's end of WAL (after its shutdown checkpoint): the new timeline's switch point. */
  walEnd(node: N): Lsn;
  /** Until `node` has received WAL up to `lsn` (throws if it cannot: timeout, left recovery). */
  waitReceived(node: N, lsn: Lsn): Promise<void>;
  /** ALTER SYSTEM SET synchronous_standby_names + pg_reload_conf() on `node`. */
  setSynchronousStandbyNames(node: N, names: string): Promise<void>;
  /** pg_promote(true, 60) on `node` (throws if it did not promote). */
  promote(node: N): Promise<void>;
  /** Bring stopped `old` back as a standby of `to` (the rejoin, with its divergence check); its timeline. */
  rejoin(old: N, to: N): Promise<TimeLineId>;
  /** Make standby `node` stream from `to` (primary_conninfo + reload). */
  repoint(node: N, to: N): Promise<void>;
}

export interface SwitchoverPlan<N> {
  from: N;
  to: N;
  /** The old primary's synchronous_standby_names and the two application names it swaps. */
  fromNames: string;
  fromApplicationName: string;
  toApplicationName: string;
  /** The old primary's other standbys (repointed to `to` at the end). */
  siblings: N[];
}

export interface SwitchoverOutcome {
  switchLsn: Lsn;
  newTimeline: TimeLineId;
  synchronousStandbyNames: string;
}

/**
 * Switchover to standby `to` (streaming from the primary `from`): fast stop of the primary, wait
 * until `to` has received everything up to the old primary's end of WAL (nothing acknowledged is
 * left behind), carry synchronous_standby_names over (`to`'s name becomes the old primary's),
 * promote `to`, rejoin the old primary as its standby on the new timeline (it stopped cleanly at
 * the switch point, so the rejoin's divergence check passes), repoint the siblings to `to`.
 */
export async function runSwitchover<N>(
  plan: SwitchoverPlan<N>,
  steps: SwitchoverSteps<N>,
): Promise<SwitchoverOutcome> {
  await steps.stopFast(plan.from);
  const switchLsn = steps.walEnd(plan.from);
  await steps.waitReceived(plan.to, switchLsn);
  const names = handOverNames(plan.fromNames, plan.toApplicationName, plan.fromApplicationName);
  await steps.setSynchronousStandbyNames(plan.to, names);
  await steps.promote(plan.to);
  const newTimeline = await steps.rejoin(plan.from, plan.to);
  for (const s of plan.siblings) await steps.repoint(s, plan.to);
  return { switchLsn, newTimeline, synchronousStandbyNames: names };
}
