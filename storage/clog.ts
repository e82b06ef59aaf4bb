/**
 * Commit log (pg_xact): the final status of every transaction id, two bits per xid.
 *
 * Entry points: `Clog.setCommitted`, `Clog.setAborted`, `Clog.status` / `Clog.statusCode` (hot
 * loops), `Clog.serialize` / `Clog.deserialize` (checkpoint files).
 *
 * Like PostgreSQL's CLOG (src/backend/access/transam/clog.c) a status is two bits, four xids per
 * byte, and an xid never written reads as in progress. walsim has no subtransactions, no
 * wraparound and no truncation of old segments: xids are plain increasing integers from
 * FirstNormalTransactionId (3) and the array grows by doubling, so ten million xids cost 2.5 MB.
 *
 * Special xids follow TransactionLogFetch (transam.c): BootstrapTransactionId (1) and
 * FrozenTransactionId (2) read as committed, InvalidTransactionId (0) reads as aborted.
 *
 * INV-CLOG-1: a committed xid never becomes aborted and an aborted xid never becomes committed;
 *   setting the same final status twice is allowed (redo of a commit record after a restart).
 * INV-CLOG-2: only normal xids (>= 3, < 2^32) are ever set.
 */
import { fail } from '../common/assert.ts';
import { WalsimError } from '../common/errors.ts';

export type XactStatus = 'in_progress' | 'committed' | 'aborted';

/** Two-bit codes, as in clog.h: TRANSACTION_STATUS_IN_PROGRESS / COMMITTED / ABORTED. */
export const XACT_IN_PROGRESS = 0;
export const XACT_COMMITTED = 1;
export const XACT_ABORTED = 2;
export type XactStatusCode = 0 | 1 | 2;

const STATUS_NAMES: readonly XactStatus[] = ['in_progress', 'committed', 'aborted'];
const FIRST_NORMAL_XID = 3;
const MAX_XID = 0xffffffff;
const XIDS_PER_BYTE = 4;
const INITIAL_BYTES = 1024;

const CLOG_MAGIC = 0x474f4c43; // 'CLOG' little-endian
const CLOG_VERSION = 1;
const HEADER_BYTES = 16;

/**
 * What the visibility rules read: a transaction's status. The Clog itself, or a view that reports
 * some committed transactions as still in progress (a primary's snapshot while their commits wait
 * for synchronous replication, see `inProgressView`).
 */
export type XactStatusReader = Pick<Clog, 'statusCode'>;

/**
 * A view of `clog` in which the transactions of `inProgress` read as in progress: PostgreSQL keeps
 * a committed transaction in the proc array until its synchronous-replication wait ends, so every
 * other snapshot still sees it running. Returns `clog` itself when the set is empty.
 */
export function inProgressView(
  clog: XactStatusReader,
  inProgress: ReadonlySet<number>,
): XactStatusReader {
  if (inProgress.size === 0) return clog;
  return {
    statusCode: (xid: number) => (inProgress.has(xid) ? XACT_IN_PROGRESS : clog.statusCode(xid)),
  };
}

export class Clog {
  private bits: Uint8Array = new Uint8Array(INITIAL_BYTES);
  /** One past the highest xid ever set: how many xids serialize() writes. */
  private xidLimit = FIRST_NORMAL_XID;

  setCommitted(xid: number): void {
    this.set(xid, XACT_COMMITTED);
  }

  setAborted(xid: number): void {
    this.set(xid, XACT_ABORTED);
  }

  status(xid: number): XactStatus {
    return STATUS_NAMES[this.statusCode(xid)]!;
  }

  isCommitted(xid: number): boolean {
    return this.statusCode(xid) === XACT_COMMITTED;
  }

  isAborted(xid: number): boolean {
    return this.statusCode(xid) === XACT_ABORTED;
  }

  /** The two-bit code; what the heap store's visibility loops call. */
  statusCode(xid: number): XactStatusCode {
    if (xid < FIRST_NORMAL_XID) {
      if (!(xid === 0 || xid === 1 || xid === 2))
        fail(`INV-CLOG-2: xid ${xid} is not a transaction id`);
      return xid === 0 ? XACT_ABORTED : XACT_COMMITTED;
    }
    const byte = xid >>> 2;
    if (byte >= this.bits.length) return XACT_IN_PROGRESS;
    return ((this.bits[byte]! >>> ((xid & 3) << 1)) & 3) as XactStatusCode;
  }

  /** One past the highest xid set so far (3 when none was). */
  get xidLimitExclusive(): number {
    return this.xidLimit;
  }

  private set(xid: number, code: 1 | 2): void {
    if (!(Number.isInteger(xid) && xid >= FIRST_NORMAL_XID && xid <= MAX_XID))
      fail(`INV-CLOG-2: cannot set the status of xid ${xid}, not a normal transaction id`);
    const current = this.statusCode(xid);
    if (!(current === XACT_IN_PROGRESS || current === code))
      fail(
        `INV-CLOG-1: xid ${xid} is already ${STATUS_NAMES[current]}, ` +
          `cannot become ${STATUS_NAMES[code]}`,
      );
    const byte = xid >>> 2;
    if (byte >= this.bits.length) this.grow(byte + 1);
    this.bits[byte] = this.bits[byte]! | (code << ((xid & 3) << 1));
    if (xid >= this.xidLimit) this.xidLimit = xid + 1;
    if (this.statusCode(xid) !== code) fail(`INV-CLOG-1: xid ${xid} did not read back as set`);
  }

  private grow(minBytes: number): void {
    let size = this.bits.length * 2;
    while (size < minBytes) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.bits);
    this.bits = next;
  }

  /** Header (magic, version, xidLimit) then the status bytes of xids [0, xidLimit). */
  serialize(): Uint8Array {
    const nbytes = Math.ceil(this.xidLimit / XIDS_PER_BYTE);
    const out = new Uint8Array(HEADER_BYTES + nbytes);
    const view = new DataView(out.buffer);
    view.setUint32(0, CLOG_MAGIC, true);
    view.setUint32(4, CLOG_VERSION, true);
    view.setUint32(8, this.xidLimit, true);
    out.set(this.bits.subarray(0, nbytes), HEADER_BYTES);
    return out;
  }

  /** Inverse of serialize(). Malformed bytes are corrupt data: WalsimError('io_error'). */
  static deserialize(bytes: Uint8Array): Clog {
    const corrupt = (why: string): WalsimError =>
      new WalsimError('io_error', `corrupt clog data: ${why}`);
    if (bytes.length < HEADER_BYTES) throw corrupt(`${bytes.length} bytes is less than a header`);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (view.getUint32(0, true) !== CLOG_MAGIC) throw corrupt('bad magic');
    const version = view.getUint32(4, true);
    if (version !== CLOG_VERSION) throw corrupt(`unknown version ${version}`);
    const xidLimit = view.getUint32(8, true);
    const nbytes = Math.ceil(xidLimit / XIDS_PER_BYTE);
    if (xidLimit < FIRST_NORMAL_XID || bytes.length !== HEADER_BYTES + nbytes) {
      throw corrupt(`xid limit ${xidLimit} does not match ${bytes.length} bytes`);
    }
    const clog = new Clog();
    clog.bits = new Uint8Array(Math.max(INITIAL_BYTES, nbytes));
    clog.bits.set(bytes.subarray(HEADER_BYTES));
    clog.xidLimit = xidLimit;
    // Every two-bit code must be 0..2, and xids 0..2 and those past the limit must be unset.
    for (let xid = 0; xid < nbytes * XIDS_PER_BYTE; xid++) {
      const code = (clog.bits[xid >>> 2]! >>> ((xid & 3) << 1)) & 3;
      if (code === 3) throw corrupt(`xid ${xid} has status code 3`);
      if (code !== 0 && (xid < FIRST_NORMAL_XID || xid >= xidLimit)) {
        throw corrupt(`xid ${xid} has a status but is outside [3, ${xidLimit})`);
      }
    }
    return clog;
  }
}
