/**
 * The exporter's prediction of one standby, kept between cycles: each cycle reads only the WAL
 * received since the last one, once; when the standby's replay LSN moved, the LSN windows it
 * passed are retired without reading them again and only the window it cuts is read again
 * (windows.ts), instead of everything from the last restartpoint's redo or the whole backlog.
 *
 * Kept: a `ReplayWindows` (two replay models — the tail, the startup process's state before the
 * first kept window, learned from the restartpoint's redo; the head, after every record read —
 * and per window its counts and relation image, never a record), the last replay and receive
 * LSNs, and what identifies the standby's state. The prediction equals `npm run predict`'s over
 * the same state (test/integration/exporter-incremental.test.ts checks it cycle by cycle on a real
 * pair, test/unit/exporter-windows.test.ts over generated WAL), but for the list of drop calls: the
 * exporter keeps only the range's first full-scan drop (the one the summary names).
 *
 * It starts over, reading from the restartpoint's redo as predict does, when what the models
 * stand for is no longer the standby's: another timeline, a new restartpoint (predict learns from
 * the new redo), a restarted standby (its startup process forgot every cached size), the replay
 * or receive LSN going back, a failed cycle (a segment removed or recycled under the reader), or
 * other settings (NBuffers, version, data directory). Each start over is counted by reason. With
 * pg_buffercache installed or without --pgdata, every cycle is a whole prediction (the buffers
 * resident now, or pg_walinspect's range, cannot be carried over).
 *
 * Entry points: `IncrementalPredictor`, `RESTART_REASONS`, `RestartReason`.
 */
import { parseLsn } from '../../wal/lsn.ts';
import { RESTART_REASONS, type RestartReason } from './snapshot.ts';
import {
  assemblePrediction,
  learnCachedSizes,
  predictStandby,
  setUpRange,
  standbyFiles,
  type PredictInput,
  type Prediction,
  type RangeSetup,
  type Sessions,
} from '../predict/prediction.ts';
import { RecoveryModel, type ReplayPrediction } from '../predict/replay-model.ts';
import { connectServer } from '../predict/standby-state.ts';
import type { RangeRead } from '../predict/wal-source.ts';
import {
  DEFAULT_WINDOW_OPTIONS,
  ReplayWindows,
  type WindowOptions,
  type WindowStats,
} from './windows.ts';

// The reasons are shared with the HTTP thread (snapshot.ts).
export { RESTART_REASONS, type RestartReason } from './snapshot.ts';

interface Kept {
  /** What must not change for the models to stay the standby's (reason → value). */
  identity: Record<'timeline' | 'restartpoint' | 'standby_restart' | 'settings', string>;
  /** The unreplayed range by LSN window, with the tail (replayed) and head (read) models. */
  windows: ReplayWindows;
  /** The replay LSN of the last cycle. */
  replayedTo: string;
  /** The receive LSN of the last cycle. */
  receivedTo: string;
}

export class IncrementalPredictor {
  private kept: Kept | null = null;

  constructor(private readonly windowOptions: WindowOptions = DEFAULT_WINDOW_OPTIONS) {}

  private nextReason: RestartReason = 'first';
  /** Starts over by reason (cumulative). */
  readonly restarts = Object.fromEntries(RESTART_REASONS.map((r) => [r, 0])) as Record<
    RestartReason,
    number
  >;
  /** Bytes of WAL the cycles read (cumulative): what the incremental form saves shows here. */
  walReadBytes = 0;

  /** One cycle's prediction; on failure the kept state is dropped (the next cycle starts over). */
  async predict(input: PredictInput): Promise<Prediction> {
    const sessions: Sessions = {
      standby: await connectServer(input.standby, 'standby'),
      primary: null,
    };
    try {
      return await this.cycle(sessions, input);
    } catch (e) {
      this.kept = null;
      this.nextReason = 'failed_cycle';
      throw e;
    } finally {
      await sessions.standby.end().catch(() => {});
      await sessions.primary?.end().catch(() => {});
    }
  }

  private async cycle(sessions: Sessions, input: PredictInput): Promise<Prediction> {
    const setup = await setUpRange(sessions, input);
    const { st } = setup;
    if (setup.walDir === null || st.hasBuffercache || st.recoveryTarget !== null) {
      this.kept = null;
      this.restarts.not_incremental += 1;
      this.walReadBytes += parseLsn(setup.to) - parseLsn(st.restartpointRedoLsn);
      return await predictStandby(input);
    }
    const startedAt = await sessions.standby.query<{ t: string }>(
      'SELECT pg_postmaster_start_time()::text AS t',
    );
    const identity: Kept['identity'] = {
      timeline: String(st.timeline),
      restartpoint: st.restartpointRedoLsn,
      standby_restart: startedAt.rows[0]!.t,
      settings: [st.nBuffers, st.versionNum, st.systemIdentifier, setup.walDir].join(' '),
    };
    const reason = this.staleReason(identity, setup);
    const k = reason === null ? this.kept! : await this.startOver(reason, identity, setup, input);
    const c = await this.advance(k, setup);
    return assemblePrediction(setup, input, c.rp, c.source, c.learned, false);
  }

  /** Null when the kept models still stand for this standby, else why they do not. */
  private staleReason(identity: Kept['identity'], setup: RangeSetup): RestartReason | null {
    const k = this.kept;
    if (k === null) return this.nextReason;
    for (const key of ['settings', 'standby_restart', 'timeline', 'restartpoint'] as const)
      if (k.identity[key] !== identity[key]) return key;
    if (parseLsn(setup.from) < parseLsn(k.replayedTo)) return 'lsn_went_back';
    if (parseLsn(setup.to) < parseLsn(k.receivedTo)) return 'lsn_went_back';
    return null;
  }

  /** The same state as a from-scratch prediction: learn from the redo; windows from the replay LSN. */
  private async startOver(
    reason: RestartReason,
    identity: Kept['identity'],
    setup: RangeSetup,
    input: PredictInput,
  ): Promise<Kept> {
    this.kept = null;
    this.restarts[reason] += 1;
    const { st, from, read } = setup;
    const tail = new RecoveryModel(
      st.nBuffers,
      standbyFiles(input, null),
      false,
      setup.dropRules,
      'first-full-scan',
    );
    const learned = await learnCachedSizes(read, tail, st.restartpointRedoLsn, from);
    this.walReadBytes += Math.max(0, parseLsn(from) - parseLsn(st.restartpointRedoLsn));
    const windows = new ReplayWindows(tail, learned, from, this.windowOptions);
    this.kept = { identity, windows, replayedTo: from, receivedTo: from };
    this.nextReason = 'failed_cycle';
    return this.kept;
  }

  /**
   * The kept windows brought to this cycle's [replay, receive): the new WAL read once, the
   * windows replayed since retired, the window the replay LSN cuts read again.
   */
  private async advance(k: Kept, setup: RangeSetup): Promise<Cycle> {
    const { from, to, read } = setup;
    const before = k.windows.readBytes;
    const src = await k.windows.read(read, to, from);
    k.windows.retire(from);
    const { rp, learned } = await k.windows.prediction(from, read);
    this.walReadBytes += k.windows.readBytes - before;
    k.replayedTo = from;
    k.receivedTo = to;
    // How the whole range was read, in predict's words (its detail names [from, to)).
    const source = { ...src, detail: src.detail.replace(/ from \S+ to /, ` from ${from} to `) };
    return { rp, learned, source };
  }

  /** What the kept state holds now (windows, relations, image blocks); null before a cycle. */
  stats(): WindowStats | null {
    return this.kept?.windows.stats() ?? null;
  }
}

interface Cycle {
  rp: ReplayPrediction;
  learned: number;
  source: RangeRead;
}
