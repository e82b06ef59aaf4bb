/**
 * Byte format of one relation's heap contents, for the data files written at checkpoint.
 *
 * Layout (little-endian, 4-byte aligned columns first):
 *   header   u32 magic 'WSHP', u32 version, u32 nblocks, u32 nruns
 *   runs     i32 value[nruns], u32 xmin[nruns], u32 xmax[nruns],
 *            u8 offset[nruns], u8 count[nruns], u8 unused[nruns]
 *   pages    u8 nitems[nblocks], u8 runCount[nblocks]
 * Runs are written in block order without garbage, so a page's first run is the prefix sum of
 * the run counts before it. Size = 16 + 15 * nruns + 2 * nblocks bytes.
 *
 * Entry points: `serializeHeapRelation`, `deserializeHeapRelation` (checks lengths, throws
 * WalsimError('io_error') on a malformed file, then re-checks every INV-HEAP invariant).
 */
import { assert, fail, InvariantViolation } from '../common/assert.ts';
import { WalsimError } from '../common/errors.ts';
import { HeapRelation } from './heap-relation.ts';

const HEAP_MAGIC = 0x50485357; // 'WSHP' little-endian
const HEAP_VERSION = 1;
const HEADER_BYTES = 16;

const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
assert(littleEndian, 'INV-HEAP-8: heap files assume a little-endian host');

export function serializeHeapRelation(r: HeapRelation): Uint8Array {
  if (r.slabGarbage > 0) r.compact(); // block order without garbage: the layout above
  const nblocks = r.nblocks;
  const nruns = r.slabLength;
  const out = new Uint8Array(HEADER_BYTES + 15 * nruns + 2 * nblocks);
  const header = new Uint32Array(out.buffer, 0, 4);
  header[0] = HEAP_MAGIC;
  header[1] = HEAP_VERSION;
  header[2] = nblocks;
  header[3] = nruns;
  let at = HEADER_BYTES;
  new Int32Array(out.buffer, at, nruns).set(r.runValue.subarray(0, nruns));
  at += 4 * nruns;
  new Uint32Array(out.buffer, at, nruns).set(r.runXmin.subarray(0, nruns));
  at += 4 * nruns;
  new Uint32Array(out.buffer, at, nruns).set(r.runXmax.subarray(0, nruns));
  at += 4 * nruns;
  out.set(r.runOffset.subarray(0, nruns), at);
  at += nruns;
  out.set(r.runCount.subarray(0, nruns), at);
  at += nruns;
  out.set(r.runUnused.subarray(0, nruns), at);
  at += nruns;
  out.set(r.pageNitems.subarray(0, nblocks), at);
  at += nblocks;
  out.set(r.pageRunCount.subarray(0, nblocks), at);
  at += nblocks;
  if (at !== out.length) fail(`INV-HEAP-8: serialized ${at} of ${out.length} bytes`);
  return out;
}

export function deserializeHeapRelation(input: Uint8Array, label: string): HeapRelation {
  const corrupt = (why: string): WalsimError =>
    new WalsimError('io_error', `corrupt heap data for ${label}: ${why}`);
  // A Buffer from fs may sit at an unaligned offset of a shared pool: copy it to align the columns.
  const bytes = input.byteOffset % 4 === 0 ? input : new Uint8Array(input);
  if (bytes.length < HEADER_BYTES) throw corrupt(`${bytes.length} bytes is less than a header`);
  const header = new Uint32Array(bytes.buffer, bytes.byteOffset, 4);
  if (header[0] !== HEAP_MAGIC) throw corrupt('bad magic');
  if (header[1] !== HEAP_VERSION) throw corrupt(`unknown version ${header[1]}`);
  const nblocks = header[2]!;
  const nruns = header[3]!;
  if (bytes.length !== HEADER_BYTES + 15 * nruns + 2 * nblocks) {
    throw corrupt(`${bytes.length} bytes do not match ${nblocks} blocks and ${nruns} runs`);
  }
  const r = new HeapRelation();
  r.resizePages(Math.max(16, nblocks));
  r.allocateSlab(Math.max(16, nruns));
  let at = bytes.byteOffset + HEADER_BYTES;
  r.runValue.set(new Int32Array(bytes.buffer, at, nruns));
  at += 4 * nruns;
  r.runXmin.set(new Uint32Array(bytes.buffer, at, nruns));
  at += 4 * nruns;
  r.runXmax.set(new Uint32Array(bytes.buffer, at, nruns));
  at += 4 * nruns;
  r.runOffset.set(new Uint8Array(bytes.buffer, at, nruns));
  at += nruns;
  r.runCount.set(new Uint8Array(bytes.buffer, at, nruns));
  at += nruns;
  r.runUnused.set(new Uint8Array(bytes.buffer, at, nruns));
  at += nruns;
  r.pageNitems.set(new Uint8Array(bytes.buffer, at, nblocks));
  at += nblocks;
  r.pageRunCount.set(new Uint8Array(bytes.buffer, at, nblocks));
  let start = 0;
  for (let b = 0; b < nblocks; b++) {
    const count = r.pageRunCount[b]!;
    r.pageRunStart[b] = count === 0 ? 0 : start;
    start += count;
  }
  if (start !== nruns) throw corrupt(`page run counts sum to ${start}, header says ${nruns}`);
  r.nblocks = nblocks;
  r.slabLength = nruns;
  r.slabGarbage = 0;
  // Pair the checks: what we read must satisfy every invariant the writer asserted. A file that
  // does not is corrupt data (stop the node), reported as such rather than as a programmer error.
  try {
    r.checkInvariants(label);
  } catch (e) {
    if (e instanceof InvariantViolation) throw corrupt(e.message);
    throw e;
  }
  return r;
}
