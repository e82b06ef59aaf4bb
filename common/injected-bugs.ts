/**
 * Test-only switches that plant a known bug in the node core, so that a test can show the
 * simulator finds it (and replays it exactly). They are false everywhere else; nothing but the
 * planted-bug tests of test/sim and `npm run simulate -- --inject-bug NAME` sets them.
 */
export const injectedBugs = {
  /** Acknowledge synchronous_commit=remote_write commits without waiting for the standby's write. */
  ackRemoteWriteEarly: false,
  /**
   * Quorum commit (synchronous_standby_names = ANY n (…), n ≥ 2) releases a commit once n − 1
   * standbys have confirmed it: one acknowledgement too few.
   */
  releaseAnyOneShort: false,
  /**
   * A standby's walreceiver fsyncs what it wrote 50 ms later, on a timer, and its cascading
   * walsenders send what it has written meanwhile: a cascaded standby gets WAL its upstream has
   * not flushed.
   */
  cascadeForwardsUnflushed: false,
  /**
   * A data directory whose control file says "in production" (a crashed primary, or a base backup
   * of a running primary) starts as a primary although standby.signal is there: an old primary
   * brought back as a standby accepts writes beside the new one.
   */
  crashedPrimaryIgnoresStandbySignal: false,
  /**
   * Promotion takes the promote request for the end of WAL: the startup process stops at its
   * replay position (PostgreSQL checks the trigger only once no more WAL is available, so that
   * every flushed record is replayed first), and the new timeline branches there — flushed WAL it
   * had not replayed, synchronous commits included, is dropped.
   */
  promoteSkipsUnreplayedWal: false,
  /**
   * A standby's walreceiver flush does not wake its cascading walsenders (PostgreSQL's
   * XLogWalRcvFlush calls WalSndWakeup): a cascaded standby gets new WAL only when its
   * connection starts.
   */
  cascadeMissesFlushWakeup: false,
  /** The rejoin verdict (checkRejoin) allows a node whose WAL extends past the fork point. */
  skipRejoinDivergenceCheck: false,
  /**
   * Crash recovery takes a record whose CRC fails for one to skip, not for the end of WAL
   * (PostgreSQL's ReadRecord ends crash recovery at the first invalid record): it steps over the
   * record by its xl_tot_len and replays the valid records after it.
   */
  recoverySkipsBadCrcRecord: false,
  /**
   * smgrdounlinkall unlinks the relations' files before dropping their buffers (PostgreSQL 14's
   * DropRelFileNodesAllBuffers needs smgrexists and the cached sizes, so it must run first): in
   * recovery the lookup path finds no fork and leaves every buffer of a dropped relation valid.
   */
  unlinkBeforeDroppingBuffers: false,
  /**
   * The pre-January-2025 ordering of RelationTruncate (PostgreSQL's "Fix data corruption when
   * relation truncation fails"): the truncation runs outside a critical section, so when the file
   * truncation fails after the buffers were dropped the error is an ERROR, not a PANIC — the
   * server goes on, the file keeps its pages, and a read of the dropped tail finds their stale
   * on-disk versions (here: as of the last data image).
   */
  truncateFailureLeavesStalePages: false,
  /**
   * Replay of a truncation record cuts the file and drops the buffers but keeps the heap's pages
   * past the new end (their tuples are dead: the DELETE that freed them committed). Every visible
   * row agrees and the file sizes agree, so only a page-by-page comparison finds it.
   */
  replayTruncateKeepsHeapPages: false,
  /** The lifecycle machine's openForWrites action (promotion) throws an Error. */
  lifecycleActionError: false,
  /** The lifecycle machine's openForWrites action (promotion) throws an InvariantViolation. */
  lifecycleActionInvariant: false,
};

export type InjectedBug = keyof typeof injectedBugs;
export const INJECTED_BUGS = Object.keys(injectedBugs) as InjectedBug[];
