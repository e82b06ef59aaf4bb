/**
 * A generated backlog (scripts/generator/) made on a fresh real PostgreSQL pair: the statements run
 * on the primary one at a time in the generator's order, each on its session's own connection (so
 * the WAL interleaves the sessions as printed and no statement waits for another's lock); the
 * standby restarted where its history says (pg_ctl stop -m fast|immediate, then start, then caught
 * up); its replay paused at the history's pause point (after replaying everything before it);
 * the rest run with replay paused; the primary stopped immediately once the standby flushed it all.
 *
 * Entry points: `makeGeneratedBacklog`.
 */
import type pg from 'pg';
import { pollUntil } from '../../server/poll.ts';
import { WalsimError } from '../../common/errors.ts';
import { connectPg } from '../engines/walsim-engine.ts';
import { PgEngine } from '../engines/pg-engine.ts';
import { StepSession } from '../engines/step-session.ts';
import { waitForStandby } from '../experiment/steps.ts';
import { pgCtl } from '../postgres/pg-cluster.ts';
import type { GeneratedBacklog } from '../generator/backlog.ts';

/** Run statements [from, to) in order, each on its session's connection; a failure names it. */
async function runRange(
  clients: readonly pg.Client[],
  b: GeneratedBacklog,
  from: number,
  to: number,
): Promise<void> {
  for (let i = from; i < to; i++) {
    const st = b.statements[i]!;
    try {
      await clients[st.session - 1]!.query(st.sql);
    } catch (e) {
      throw new WalsimError(
        'invalid_input',
        `generated seed ${b.seed}, statement ${i + 1} (${st.sql.slice(0, 80)}): ${(e as Error).message}`,
      );
    }
  }
}

/** Replay everything the primary flushed, then pause replay and wait until it is paused. */
async function pauseCaughtUp(session: StepSession): Promise<void> {
  await waitForStandby(session, 'replay');
  await session.scalar('standby', 'SELECT pg_wal_replay_pause()');
  await pollUntil(
    async () =>
      (await session.scalar('standby', 'SELECT pg_get_wal_replay_pause_state()')) === 'paused',
    'replay to pause',
    60_000,
    5,
  ).catch((e: unknown) => {
    throw new WalsimError('timeout', (e as Error).message);
  });
  // No session stays on the standby while it replays (its snapshots would conflict with replay).
  await session.close('standby');
}

/** Restart the standby as its history says, and wait until it streams and replayed everything again. */
async function restartStandby(
  dir: string,
  session: StepSession,
  mode: 'fast' | 'immediate',
): Promise<void> {
  await waitForStandby(session, 'replay');
  await session.close('standby');
  await pgCtl(dir, 'standby', 'stop', { mode });
  await pgCtl(dir, 'standby', 'start');
  await waitForStandby(session, 'replay');
  await session.close('standby');
}

/** Make `b` on `dir`'s pair (fresh, streaming): the standby paused, the primary stopped. */
export async function makeGeneratedBacklog(dir: string, b: GeneratedBacklog): Promise<void> {
  const engine = new PgEngine(dir);
  const session = new StepSession(engine);
  const clients: pg.Client[] = [];
  try {
    for (let i = 0; i < b.sessions; i++)
      clients.push(await connectPg(engine.connectionString('primary'), 'walsim-generator'));
    const h = b.history;
    const restartAt = h.restart?.before ?? 0;
    await runRange(clients, b, 0, restartAt);
    if (h.restart !== null) await restartStandby(dir, session, h.restart.mode);
    await runRange(clients, b, restartAt, h.pauseAt);
    await pauseCaughtUp(session);
    await runRange(clients, b, h.pauseAt, b.statements.length);
    await waitForStandby(session, 'flush');
    await Promise.all(clients.splice(0).map((c) => c.end()));
    await session.close();
    await engine.stop('primary', 'immediate');
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => {})));
    await session.close();
    await engine.close();
  }
}
