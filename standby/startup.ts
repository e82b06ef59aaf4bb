/**
 * The startup process of a standby: replays WAL from the node's own segment files, never past
 * what the walreceiver has flushed, in time slices so the control endpoint stays responsive.
 *
 * Pause follows PostgreSQL 14+ (xlogrecovery.c): a pause request is confirmed ('paused') at a
 * record boundary — at the top of the loop, before the next record — or at once while waiting for
 * WAL. Receiving and flushing continue while paused.
 */
import { assert, fail } from '../common/assert.ts';
import type { Clock } from '../common/clock.ts';
import { formatLsn, type Lsn, type TimeLineId } from '../wal/lsn.ts';
import { isInvalidWalRecordError, maxAlign } from '../wal/codec.ts';
import { readWal, type WalReadOptions, type WalReader } from '../wal/wal-reader.ts';
import type { WalRecord } from '../wal/records.ts';
import {
  parseTimelineHistory,
  readTimelineHistoryFile,
  type TimelineHistoryEntry,
} from '../wal/segment.ts';

/** Longest stretch of replay between event-loop turns. */
const REPLAY_SLICE_MS = 10;
/**
 * Records applied at once (no steps) between two reads of the clock: reading it costs ~0.25 µs
 * here, a heap record's replay ~1 µs. 32 such records take well under a millisecond, so a slice
 * still ends within REPLAY_SLICE_MS. After any await and any record applied in steps the clock is
 * read at once, so a simulated clock (which moves only across awaits) sees the same slices.
 */
const CLOCK_CHECK_RECORDS = 32;

export interface StartupDeps {
  dataDir: string;
  /** Time slices and event-loop turns (the node's: Node's in the server process, the simulator's in sim/). */
  clock: Clock;
  /** Timeline, segment size and the disk holding pg_wal. */
  readOptions(): WalReadOptions;
  /** End of WAL flushed by the walreceiver: replay never goes past it. */
  flushedUpTo(): Lsn;
  /** Apply one record (redo) in steps; long drops yield between chunks. */
  applySteps(rec: WalRecord): Generator<void, void, void>;
  /**
   * Applying a record threw (an InvariantViolation, an I/O error writing a restartpoint): storage
   * may hold half a record, so the process must end (PostgreSQL's startup process FATALs and the
   * postmaster shuts down). Called after the error was recorded and logged.
   */
  fatal(error: unknown): void;
  /**
   * Work due before `rec` is applied, at a record boundary (a restartpoint at a checkpoint
   * record): null for none, else replay waits for the promise; the event loop runs meanwhile.
   */
  beforeRecord?(rec: WalRecord): Promise<void> | null;
  /** Replay advanced (send feedback, release remote_apply waiters, ...). */
  onProgress(): void;
  /** The lifecycle machine's replay region is 'pause requested' or 'paused'. */
  pauseRequested(): boolean;
  /** Tell the machine the pause took effect at a record boundary (PAUSE_CONFIRMED). */
  confirmPause(): void;
  /** Replay reached the end of flushed WAL (CAUGHT_UP) or continues after it (WAL_RECEIVED). */
  caughtUp(): void;
  replaying(): void;
  log(message: string): void;
}

export interface ReplayError {
  lsn: string;
  message: string;
}

export class StartupProcess {
  /** Start of the next record to replay (MAXALIGNed end of the last one). */
  nextLsn: Lsn;
  /** End of the last replayed record: pg_last_wal_replay_lsn(). */
  replayEndLsn: Lsn;
  lastRecordLsn: Lsn;
  recordsReplayed = 0;
  error: ReplayError | null = null;
  /** True while the startup process waits for WAL with nothing left to replay. */
  caughtUp = false;
  private stopping = false;
  /** True while a record is being applied in steps (the event loop may run in between). */
  private inRecord = false;
  private boundaryWaiters: Array<() => void> = [];
  /** Set while someone holds replay at a record boundary (holdReplay). */
  private held: Promise<void> | null = null;
  private wake: (() => void) | null = null;
  private loop: Promise<void> | null = null;
  private readonly clock: Clock;

  constructor(
    private readonly deps: StartupDeps,
    start: { nextLsn: Lsn; replayEndLsn: Lsn; lastRecordLsn: Lsn },
  ) {
    this.clock = deps.clock;
    this.nextLsn = start.nextLsn;
    this.replayEndLsn = start.replayEndLsn;
    this.lastRecordLsn = start.lastRecordLsn;
  }

  start(): void {
    assert(this.loop === null, 'INV-STARTUP-1: startup process started twice');
    this.loop = this.run().catch((e: unknown) => {
      this.error = {
        lsn: formatLsn(this.nextLsn),
        message: `replay failed: ${(e as Error).message}`,
      };
      this.deps.log(`FATAL:  ${this.error.message} (record at ${this.error.lsn})`);
      // Nobody may wait for a record boundary that will never come.
      for (const w of this.boundaryWaiters.splice(0)) w();
      this.deps.fatal(e);
    });
  }

  /** New WAL flushed, resume requested, stop requested: wake the loop. */
  wakeup(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  /** Resolves when no record is half-applied (restartpoints must see whole records only). */
  atRecordBoundary(): Promise<void> {
    if (!this.inRecord) return Promise.resolve();
    return new Promise((resolve) => this.boundaryWaiters.push(resolve));
  }

  /**
   * Run `fn` with replay stopped at a record boundary (a requested or shutdown restartpoint must
   * see storage unchanged while its image is written asynchronously).
   */
  async holdReplay<T>(fn: () => Promise<T>): Promise<T> {
    while (this.held !== null) await this.held;
    await this.atRecordBoundary();
    let release: () => void = () => {};
    const hold = new Promise<void>((resolve) => (release = resolve));
    this.held = hold;
    try {
      return await fn();
    } finally {
      this.held = null;
      release();
    }
  }

  /** End recovery: the loop exits at the current record boundary (promotion). */
  finish(): void {
    this.stopping = true;
    this.wakeup();
  }

  /** Stop at the next record boundary. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wakeup();
    await this.loop;
  }

  /** The reader of the stretch being replayed (null while waiting or paused). */
  private reader: WalReader | null = null;

  /**
   * Where replay will next read WAL from disk: bytes before this LSN are already in the reader's
   * memory (like PostgreSQL's page buffer), so damage done to them on disk now is not seen by this
   * process (its next crash recovery reads them again).
   */
  readAheadLsn(): Lsn {
    return this.reader?.bufferedEndLsn ?? this.nextLsn;
  }

  private waitForWakeup(): Promise<void> {
    return new Promise((resolve) => (this.wake = resolve));
  }

  /** Close the reader of the current stretch of flushed WAL (the next stretch opens a new one). */
  private dropReader(): void {
    this.reader?.close();
    this.reader = null;
  }

  /** The history file last read, by timeline (a timeline's history file never changes). */
  private readHistory: { tli: TimeLineId; entries: readonly TimelineHistoryEntry[] } | null = null;

  /**
   * The WAL read options with the timeline's history, its file read once per timeline (as the
   * walsender does): a reader per stretch of flushed WAL read and parsed it every time.
   */
  private readOptionsWithHistory(): WalReadOptions {
    const opts = this.deps.readOptions();
    if (opts.history !== undefined) return opts;
    const tli = opts.timeline;
    // Object.assign, not a spread: Node 20's V8 builds `{ ...o, k }` on a slow path (~1 µs), and
    // this runs for every stretch of flushed WAL the startup process reads.
    if (this.readHistory?.tli === tli)
      return Object.assign({}, opts, { history: this.readHistory.entries });
    const text = readTimelineHistoryFile(this.deps.dataDir, tli, opts.disk);
    // No file (timeline 1): the reader's own default; kept only once a file exists.
    if (text === null)
      return Object.assign({}, opts, { history: [{ tli, beginLsn: 0, endLsn: null }] });
    this.readHistory = { tli, entries: parseTimelineHistory(text, tli) };
    return Object.assign({}, opts, { history: this.readHistory.entries });
  }

  /** One reader per stretch of flushed WAL: it stops at the flush LSN it was opened with. */
  private readerUpTo(limit: Lsn): WalReader {
    this.reader ??= readWal(
      this.deps.dataDir,
      this.nextLsn,
      Object.assign({}, this.readOptionsWithHistory(), {
        stopLsn: limit,
        expectedPrev: this.lastRecordLsn || undefined,
      }),
    );
    return this.reader;
  }

  /** The reader has no more records: the flushed end, or corrupt WAL below it (replay stops there). */
  private endOfReader(r: WalReader): void {
    const reason = r.endReason;
    this.dropReader();
    if (isInvalidWalRecordError(reason)) {
      // Corrupt WAL below the flushed end: stop replay here and say where (never skip a record).
      this.error = { lsn: formatLsn(reason.lsn), message: reason.message };
      this.deps.log(`LOG:  replay stopped: ${reason.message}`);
    }
  }

  /** `rec` is applied: release boundary waiters, advance the replay positions (small: inlined). */
  private recordReplayed(rec: { lsn: Lsn; endLsn: Lsn }): void {
    if (this.boundaryWaiters.length > 0) for (const w of this.boundaryWaiters.splice(0)) w();
    this.lastRecordLsn = rec.lsn;
    this.replayEndLsn = rec.endLsn;
    this.nextLsn = maxAlign(rec.endLsn);
    this.recordsReplayed++;
  }

  /** Pause requested: no reader held while paused; say where replay stands, and confirm. */
  private pauseHere(): void {
    this.dropReader();
    this.deps.log(`LOG:  recovery has paused at ${formatLsn(this.replayEndLsn)}`);
    this.deps.confirmPause();
  }

  /** Everything flushed (and valid) is replayed: report it, then the loop waits for WAL. */
  private reachCaughtUp(): void {
    this.dropReader();
    this.caughtUp = true;
    this.deps.onProgress();
    this.deps.caughtUp();
  }

  /** New WAL to replay after being caught up: say replay runs again. */
  private leaveCaughtUp(): void {
    if (!this.caughtUp) return;
    this.caughtUp = false;
    this.deps.replaying();
  }

  /**
   * INV-STARTUP-2 failed: the reader returned a record other than the next one. (Called only on
   * failure: formatting two LSNs per record costs ~0.7 µs.)
   */
  private notTheNextRecord(lsn: Lsn): void {
    fail(
      `INV-STARTUP-2: expected a record at ${formatLsn(this.nextLsn)}, reader returned ${formatLsn(lsn)}`,
    );
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      if (this.deps.pauseRequested()) {
        this.pauseHere();
        while (!this.stopping && this.deps.pauseRequested()) await this.waitForWakeup();
        continue;
      }
      const limit = this.deps.flushedUpTo();
      if (this.error !== null || this.nextLsn >= limit) {
        // Nothing (valid) left to replay: wait for WAL. After a bad record replay stays stopped there.
        this.reachCaughtUp();
        if (this.stopping) break;
        await this.waitForWakeup();
        continue;
      }
      this.leaveCaughtUp();
      const r = this.readerUpTo(limit);
      let sliceStart = this.clock.monoMs();
      /** Records since the clock was last read, or CLOCK_CHECK_RECORDS to read it after this one. */
      let unchecked = 0;
      for (;;) {
        while (this.held !== null) {
          await this.held;
          unchecked = CLOCK_CHECK_RECORDS;
        }
        const rec = r.readRecord();
        if (rec === null) {
          this.endOfReader(r);
          break;
        }
        if (rec.lsn !== this.nextLsn) this.notTheNextRecord(rec.lsn);
        // A record is applied completely before anything else happens to storage, but a long drop
        // gives the event loop turns in between (status and pause requests are answered).
        this.inRecord = true;
        try {
          const before = this.deps.beforeRecord?.(rec) ?? null;
          if (before !== null) {
            await before;
            sliceStart = this.clock.monoMs();
            unchecked = CLOCK_CHECK_RECORDS;
          }
          const steps = this.deps.applySteps(rec);
          for (let r = steps.next(); !r.done; r = steps.next()) {
            unchecked = CLOCK_CHECK_RECORDS;
            if (this.clock.monoMs() - sliceStart > REPLAY_SLICE_MS) {
              await this.clock.yield();
              sliceStart = this.clock.monoMs();
            }
          }
        } finally {
          // Also when redo threw: a stop or promotion waiting for a boundary must not hang.
          this.inRecord = false;
        }
        this.recordReplayed(rec);
        if (this.stopping || this.deps.pauseRequested()) break;
        if (++unchecked >= CLOCK_CHECK_RECORDS) {
          unchecked = 0;
          if (this.clock.monoMs() - sliceStart > REPLAY_SLICE_MS) break;
        }
      }
      this.deps.onProgress();
      await this.clock.yield();
    }
    this.dropReader();
  }
}
