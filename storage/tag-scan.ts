/**
 * The full-scan drop's unlocked pre-check in WebAssembly SIMD: the `tagRel` column of a large pool
 * lives in a WebAssembly memory, and one small exported function compares sixteen tags per loop
 * turn (four 128-bit `i32x4.eq`) with the relation being dropped. The JavaScript pre-check
 * (drop-full-scan.ts) compares one tag per instruction sequence, bounds checks included, and runs
 * at ~1 ns per descriptor on this machine's cores: several times below what their memory
 * bandwidth allows for a dense 4-byte column. Same descriptors visited, in the same order, same
 * matches; only the speed of reading tags that do not match changes.
 *
 * Entry points: `allocateTagColumn`, `TagColumn`, `WASM_TAG_MIN_BUFFERS`, `TAG_BLOCK`.
 *
 * Only pools of WASM_TAG_MIN_BUFFERS and more get the WebAssembly column: each WebAssembly memory
 * reserves several GB of address space (guard regions), and the simulator and the tests create
 * many small pools, where a scan costs microseconds anyway. Smaller pools keep a plain
 * Uint32Array and the JavaScript loop.
 */

/** Tags compared per turn of the WebAssembly loop (four v128 loads of four tags): one 64-byte cache line. */
export const TAG_BLOCK = 16;

/** Pools of at least this many buffers (2GB of shared_buffers) keep tagRel in WebAssembly memory. */
export const WASM_TAG_MIN_BUFFERS = 1 << 18;

/** A pool's tagRel column, and its SIMD block finder when it lives in WebAssembly memory. */
export interface TagColumn {
  tagRel: Uint32Array;
  /**
   * `findBlock(from, to, rel)` (to − from ≥ TAG_BLOCK): the smallest id ≥ from, stepping by
   * TAG_BLOCK, whose block [id, id + TAG_BLOCK) holds a tag equal to `rel`, or the first id whose
   * block no longer fits before `to` (fewer than TAG_BLOCK tags left, none of the skipped ones
   * equal to `rel`). Null for a plain column.
   */
  findBlock: ((from: number, to: number, rel: number) => number) | null;
}

const WASM_PAGE = 65536;

/** Unsigned LEB128 (section and vector lengths). */
function uleb(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n !== 0) b |= 0x80;
    out.push(b);
  } while (n !== 0);
  return out;
}

function section(id: number, body: number[]): number[] {
  return [id, ...uleb(body.length), ...body];
}

/**
 * The module, by hand (no toolchain needed):
 *
 *   (import "m" "mem" (memory 1))
 *   (func (export "find") (param $p i32) (param $last i32) (param $rel i32) (result i32)
 *     (local $v v128)
 *     (local.set $v (i32x4.splat (local.get $rel)))
 *     (block $out (loop $turn
 *       (br_if $out (i32.gt_u (local.get $p) (local.get $last)))
 *       (br_if $out (v128.any_true (v128.or (v128.or (eq +0) (eq +16)) (v128.or (eq +32) (eq +48)))))
 *       (local.set $p (i32.add (local.get $p) (i32.const 64)))
 *       (br $turn)))
 *     (local.get $p))
 *
 * where (eq +k) = (i32x4.eq (v128.load offset=k (local.get $p)) (local.get $v)). $p and $last are
 * byte offsets; $last is the offset of the last whole block, so $p + 64 never wraps.
 */
function moduleBytes(): Uint8Array<ArrayBuffer> {
  const SIMD = 0xfd;
  // prettier-ignore
  const eqAt = (offset: number) => [
    0x20, 0x00, // local.get $p
    SIMD, 0x00, 0x02, ...uleb(offset), // v128.load align=4 bytes, offset
    0x20, 0x03, // local.get $v
    SIMD, 0x37, // i32x4.eq
  ];
  const or = [SIMD, 0x50]; // v128.or
  // prettier-ignore
  const body = [
    0x01, 0x01, 0x7b, // one local of type v128
    0x20, 0x02, SIMD, 0x11, 0x21, 0x03, // $v = i32x4.splat($rel)
    0x02, 0x40, // block
    0x03, 0x40, // loop
    0x20, 0x00, 0x20, 0x01, 0x4b, 0x0d, 0x01, // br_if $out ($p >u $last)
    ...eqAt(0), ...eqAt(16), ...or, ...eqAt(32), ...eqAt(48), ...or, ...or,
    SIMD, 0x53, 0x0d, 0x01, // br_if $out (v128.any_true)
    0x20, 0x00, 0x41, 0xc0, 0x00, 0x6a, 0x21, 0x00, // $p += 64
    0x0c, 0x00, // br $turn
    0x0b, // end loop
    0x0b, // end block
    0x20, 0x00, // $p
    0x0b, // end func
  ];
  // prettier-ignore
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // "\0asm", version 1
    ...section(1, [0x01, 0x60, 0x03, 0x7f, 0x7f, 0x7f, 0x01, 0x7f]), // type: (i32 i32 i32) -> i32
    ...section(2, [0x01, 0x01, 0x6d, 0x03, 0x6d, 0x65, 0x6d, 0x02, 0x00, 0x01]), // import "m" "mem" memory min 1
    ...section(3, [0x01, 0x00]), // one function of type 0
    ...section(7, [0x01, 0x04, 0x66, 0x69, 0x6e, 0x64, 0x00, 0x00]), // export "find" = function 0
    ...section(10, [0x01, ...uleb(body.length), ...body]), // its code
  ]);
}

let compiled: WebAssembly.Module | null | undefined;

/** The compiled module, or null where this runtime has no WebAssembly SIMD (then every column is plain). */
function tagScanModule(): WebAssembly.Module | null {
  if (compiled === undefined) {
    try {
      compiled = new WebAssembly.Module(moduleBytes());
    } catch {
      compiled = null;
    }
  }
  return compiled;
}

/**
 * The tagRel column of a pool of `nBuffers` (zero-filled, as a fresh Uint32Array): in its own
 * WebAssembly memory with a block finder from WASM_TAG_MIN_BUFFERS buffers on (or when `wasm` is
 * forced true, tests), a plain Uint32Array otherwise.
 */
export function allocateTagColumn(nBuffers: number, wasm?: boolean): TagColumn {
  const mod = (wasm ?? nBuffers >= WASM_TAG_MIN_BUFFERS) ? tagScanModule() : null;
  if (mod === null) return { tagRel: new Uint32Array(nBuffers), findBlock: null };
  const memory = new WebAssembly.Memory({
    initial: Math.max(1, Math.ceil((nBuffers * 4) / WASM_PAGE)),
  });
  const instance = new WebAssembly.Instance(mod, { m: { mem: memory } });
  const find = instance.exports.find as (p: number, last: number, rel: number) => number;
  return {
    tagRel: new Uint32Array(memory.buffer, 0, nBuffers),
    findBlock: (from, to, rel) => find(from * 4, (to - TAG_BLOCK) * 4, rel) >>> 2,
  };
}
