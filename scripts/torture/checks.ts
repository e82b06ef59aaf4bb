/**
 * The torture runner's invariant checks (scripts/torture/scenario.ts states I1–I4): each reads what
 * the nodes report and throws a FatalCheck naming the invariant and the difference.
 */
import type { NodeInspection } from '../../server/node.ts';
import { maxAlign } from '../../wal/codec.ts';
import { parseLsn } from '../../wal/lsn.ts';
import { FatalCheck, type TortureCluster } from './start-cluster.ts';
import type { Model } from './model.ts';
import type { SynchronousCommit } from '../../server/settings.ts';
import type { Workload } from './workload.ts';

/** I2: the standby replayed exactly what the primary flushed. */
export function checkReplayedToFlush(why: string, flushLsn: string, replayLsn: string): void {
  if (maxAlign(parseLsn(replayLsn)) !== parseLsn(flushLsn))
    throw new FatalCheck(
      `I2 (${why}): standby replayed to ${replayLsn}, primary flushed ${flushLsn}`,
    );
}

/** I2 + I3 at a convergence point: both nodes alike, as the model says, no orphan buffers. */
export function checkConverged(
  why: string,
  flushLsn: string,
  p: NodeInspection,
  s: NodeInspection,
  model: Model,
): void {
  const strip = (x: NodeInspection) => JSON.stringify(x.tables.map(({ buffered: _, ...t }) => t));
  if (strip(p) !== strip(s))
    throw new FatalCheck(
      `I2 (${why}): standby differs from primary at ${flushLsn}:\n  primary ${strip(p)}\n  standby ${strip(s)}`,
    );
  for (const [node, x] of [
    ['primary', p],
    ['standby', s],
  ] as const) {
    if (x.orphanBuffers.length > 0)
      throw new FatalCheck(
        `I3 (${why}): ${node} buffers hold dropped blocks ${x.orphanBuffers.slice(0, 5).join(', ')}`,
      );
  }
  for (const t of p.tables) {
    if (t.rows !== model.count(t.name))
      throw new FatalCheck(
        `I2 (${why}): table ${t.name} has ${t.rows} rows, model says ${model.count(t.name)}`,
      );
  }
  if (p.tables.length !== model.names().length)
    throw new FatalCheck(
      `I2 (${why}): ${p.tables.length} tables, model has ${model.names().length}`,
    );
}

/**
 * I1 + I3 on the promoted standby: every acknowledged ledger value, at most one more (the commit
 * in flight at the crash), every table as the acknowledged statements left it, no orphan buffers.
 * Sets `result.lost` (the seed's result), also when a check then fails.
 */
export async function checkPromoted(
  c: TortureCluster,
  w: Workload,
  result: { lost: number; level: SynchronousCommit },
): Promise<void> {
  const acked = w.ledgerAcked;
  const kept = Number(
    await c.scalar('standby', `SELECT count(*) FROM ledger WHERE c < ${acked + 1}`),
  );
  const total = Number(await c.scalar('standby', 'SELECT count(*) FROM ledger'));
  result.lost = acked - kept;
  if (total > kept + 1)
    throw new FatalCheck(`I1: ledger has ${total} rows, only ${kept} acknowledged (+1 in flight)`);
  const s = await (await c.client('standby')).inspect();
  for (const t of s.tables) {
    const want = w.model.count(t.name) + (t.name === 'ledger' ? total - kept : 0);
    if (t.rows !== want) {
      result.lost += t.name === 'ledger' ? 0 : 1;
      throw new FatalCheck(
        `I1: promoted table ${t.name} has ${t.rows} rows, acknowledged statements left ${want}`,
      );
    }
  }
  if (s.orphanBuffers.length > 0)
    throw new FatalCheck(
      `I3: promoted node buffers hold dropped blocks ${s.orphanBuffers.slice(0, 5).join(', ')}`,
    );
  if (result.lost > 0)
    throw new FatalCheck(
      `I1: ${result.lost} acknowledged commits lost (synchronous_commit=${result.level})`,
    );
}

/** I4: no programmer error or fatal error in either server's log. */
export function checkLogs(c: TortureCluster): void {
  for (const node of ['primary', 'standby'] as const) {
    const bad = c
      .serverLog(node)
      .split('\n')
      .filter((l) => /FATAL|InvariantViolation|internal error|PANIC/.test(l));
    if (bad.length > 0) throw new FatalCheck(`I4: ${node} logged: ${bad.slice(0, 3).join(' | ')}`);
  }
}
