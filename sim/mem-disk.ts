/**
 * The simulator's disk: an in-memory file system implementing common/disk.ts with strict POSIX
 * durability, so that a simulated power loss keeps exactly what the node made durable.
 *
 * - A file's bytes are durable only up to its last fsync; writes and truncations after it are
 *   pending. At a power loss a random prefix of the pending operations survives, and the last
 *   surviving write may be torn (only a prefix of its bytes reached the platter).
 * - A directory entry (create, rename, remove) is durable only after fsync of its directory.
 * - A process crash loses nothing: the page cache outlives the process.
 * - Faults: ENOSPC for writes that extend a file under a path prefix (a full disk) and a flipped
 *   byte (media corruption). A slow disk is not this file's business: the simulator wraps the
 *   disk in the same latency layer production uses (common/latency-disk.ts).
 *
 * One MemDisk per simulated machine. Deterministic: no clock, no randomness except the PRNG
 * passed to `powerLoss`; readdir is sorted.
 */
import * as path from 'node:path';
import { asyncOpsOf, type AsyncFile, type Disk, type OpenFlags } from '../common/disk.ts';
import { BoundedMemo } from '../common/bounded-memo.ts';
import type { SeededRandom } from '../common/random.ts';
import { osError } from './os-error.ts';

type Pending =
  { kind: 'write'; pos: number; bytes: Uint8Array } | { kind: 'truncate'; len: number };

/** Every empty file's bytes: a typed array per new file was half a percent of a run. */
const NO_BYTES = new Uint8Array(0);

/**
 * A growable byte array: `data[0, len)` is the content, zeros after it; capacity doubles. `data`
 * may be shared with another holder (a pending write's bytes, a file's durable copy) that must not
 * see changes: then `owned` is false and a change in place copies it first.
 */
class Bytes {
  /** Starts as the one shared empty array (nothing is written into it: capacity 0 grows first). */
  data: Uint8Array = NO_BYTES;
  len = 0;
  private owned = true;

  content(): Uint8Array {
    return this.data.subarray(0, this.len);
  }

  /**
   * Capacity for at least `n` bytes: exactly `n` for an empty array (a file written whole, a
   * durable copy's first fsync), else at least double (a WAL segment grows at every commit and is
   * fsynced each time: growing exactly copied the whole file per commit).
   */
  reserve(n: number): void {
    if (n <= this.data.length) return;
    let cap = this.data.length === 0 ? n : Math.max(this.data.length * 2, 4096);
    while (cap < n) cap *= 2;
    const grown = new Uint8Array(cap);
    grown.set(this.data.subarray(0, this.len));
    this.data = grown;
    this.owned = true;
  }

  /**
   * Take `bytes` as the whole content; `shared`: another holder keeps it too (copied before a
   * change here). Its length is the content's, so nothing lies past the content to be zero.
   */
  adopt(bytes: Uint8Array, shared: boolean): void {
    this.data = bytes;
    this.len = bytes.length;
    this.owned = !shared;
  }

  /** `data` is this array's alone from now on (a copy if it was shared). */
  private own(): void {
    if (this.owned) return;
    this.data = this.data.slice();
    this.owned = true;
  }

  setLength(n: number): void {
    if (n > this.data.length) {
      this.reserve(n);
    } else if (n < this.len) {
      this.own();
      this.data.fill(0, n, this.len);
    }
    this.len = n;
  }

  writeAt(pos: number, bytes: Uint8Array): void {
    if (pos + bytes.length > this.len) this.setLength(pos + bytes.length);
    this.own();
    this.data.set(bytes, pos);
  }

  /** Media corruption: flip bits of the byte at `offset` (< len). */
  flip(offset: number, mask: number): void {
    this.own();
    this.data[offset] = this.data[offset]! ^ mask;
  }

  /** Apply a pending operation (its bytes are never changed: they may be shared). */
  apply(op: Pending): void {
    if (op.kind === 'truncate') this.setLength(op.len);
    else if (op.pos === 0 && this.len === 0 && op.bytes.length > this.data.length)
      // An empty array written whole (a file written at once: a data image's files, the control
      // file): share the write's bytes, not a zero-filled allocation and a copy of them.
      this.adopt(op.bytes, true);
    else this.writeAt(op.pos, op.bytes);
  }
}

/**
 * A file: its current bytes, and its durable bytes (`synced`) plus the operations since the last
 * fsync (`pending`). The current bytes are always the durable ones with the pending operations
 * applied in order, so an fsync applies the pending operations to the durable copy (work in
 * proportion to what changed, not to the file's size: a WAL segment is fsynced at every commit).
 */
class MemFile {
  readonly kind = 'file';
  private readonly cur = new Bytes();
  readonly synced = new Bytes();
  pending: Pending[] = [];

  get len(): number {
    return this.cur.len;
  }

  get data(): Uint8Array {
    return this.cur.data;
  }

  content(): Uint8Array {
    return this.cur.content();
  }

  /** Flip bits of one byte, in the current bytes and, if it is durable, in the durable ones. */
  flip(offset: number, mask: number): void {
    this.cur.flip(offset, mask);
    if (offset < this.synced.len) this.synced.flip(offset, mask);
  }

  /** A change of the current bytes, pending until the next fsync. */
  change(op: Pending): void {
    this.cur.apply(op);
    this.pending.push(op);
  }

  fsync(): void {
    const first = this.pending[0];
    if (
      this.synced.len === 0 &&
      this.pending.length === 1 &&
      first!.kind === 'write' &&
      first!.pos === 0 &&
      first!.bytes.length === this.cur.len
    ) {
      // A file written whole, then fsynced (a data image's files, a control file, a config
      // file): the write's own copy of the bytes becomes the durable copy.
      // Owned even if the current bytes share it: they copy it before any change (Bytes.own),
      // and the durable copy changes only by operations the current bytes applied first.
      this.synced.adopt(first!.bytes, false);
      this.pending = [];
      return;
    }
    // The durable copy ends as long as the current one: one allocation for all the pending
    // writes, not one per write of a file written in chunks (a data image).
    this.synced.reserve(this.cur.len);
    for (const op of this.pending) this.synced.apply(op);
    this.pending = [];
  }

  /** Power loss: the synced bytes, plus a prefix of the pending operations, the last maybe torn. */
  loseUnsynced(rng: SeededRandom | null): void {
    const ops = this.pending;
    this.pending = [];
    this.cur.setLength(0);
    this.cur.writeAt(0, this.synced.content());
    const keep = rng === null ? 0 : rng.int(0, ops.length);
    for (let i = 0; i < keep; i++) {
      const op = ops[i]!;
      if (op.kind === 'write' && i === keep - 1 && rng !== null && rng.chance(0.5))
        this.change({ ...op, bytes: op.bytes.subarray(0, rng.int(0, op.bytes.length)) });
      else this.change(op);
    }
    this.fsync();
  }
}

class MemDir {
  readonly kind = 'dir';
  entries = new Map<string, MemNode>();
  synced = new Map<string, MemNode>();
}

type MemNode = MemFile | MemDir;

/** Memoized paths per disk at most (a bound, not a tuning: a run touches a few hundred). */
const PARTS_MEMO_MAX = 10_000;

function splitPath(p: string): readonly string[] {
  // Fast path: an absolute path without '.', '..', empty or trailing components is already normal.
  if (
    p.length > 1 &&
    p.charCodeAt(0) === 47 &&
    !p.endsWith('/') &&
    !p.includes('//') &&
    !p.includes('/.')
  )
    return p.slice(1).split('/');
  const norm = path.posix.resolve('/', p);
  return norm === '/' ? [] : norm.slice(1).split('/');
}

function errno(code: string, op: string, p: string, what: string): Error {
  return osError(`${code}: ${what}, ${op} '${p}'`, code);
}

export interface MemDiskCounters {
  writes: number;
  bytesWritten: number;
  fsyncs: number;
  dirFsyncs: number;
  enospc: number;
}

export class MemDisk implements Disk {
  private root = new MemDir();
  private readonly fds = new Map<number, { file: MemFile; path: string; writable: boolean }>();
  private nextFd = 3;
  /** Writes that extend a file under one of these prefixes fail with ENOSPC (a full disk). */
  readonly fullPrefixes = new Set<string>();
  readonly counters: MemDiskCounters = {
    writes: 0,
    bytesWritten: 0,
    fsyncs: 0,
    dirFsyncs: 0,
    enospc: 0,
  };

  // ------------------------------------------------------------------------- lookups

  /**
   * Path components, memoized: the same few hundred paths (segments, relation forks, the control
   * file) are looked up on every I/O, and splitting them each time was a few percent of a run.
   */
  private readonly partsOf = new BoundedMemo<string, readonly string[]>(PARTS_MEMO_MAX);

  private parts(p: string): readonly string[] {
    return this.partsOf.get(p, splitPath);
  }

  /** The node at the first `n` components of `parts`, or null. */
  private walk(parts: readonly string[], n: number): MemNode | null {
    let node: MemNode = this.root;
    for (let i = 0; i < n; i++) {
      if (node.kind !== 'dir') return null;
      const next: MemNode | undefined = node.entries.get(parts[i]!);
      if (next === undefined) return null;
      node = next;
    }
    return node;
  }

  private lookup(p: string): MemNode | null {
    const parts = this.parts(p);
    return this.walk(parts, parts.length);
  }

  private parentOf(p: string, op: string): { dir: MemDir; name: string } {
    const parts = this.parts(p);
    const name = parts[parts.length - 1];
    if (name === undefined) throw errno('EISDIR', op, p, 'is the root directory');
    const dir = this.walk(parts, parts.length - 1);
    if (dir === null) throw errno('ENOENT', op, p, 'no such file or directory');
    if (dir.kind !== 'dir') throw errno('ENOTDIR', op, p, 'not a directory');
    return { dir, name };
  }

  private fileAt(p: string, op: string): MemFile {
    const n = this.lookup(p);
    if (n === null) throw errno('ENOENT', op, p, 'no such file or directory');
    if (n.kind !== 'file') throw errno('EISDIR', op, p, 'illegal operation on a directory');
    return n;
  }

  private dirAt(p: string, op: string): MemDir {
    const n = this.lookup(p);
    if (n === null) throw errno('ENOENT', op, p, 'no such file or directory');
    if (n.kind !== 'dir') throw errno('ENOTDIR', op, p, 'not a directory');
    return n;
  }

  private fd(fd: number, op: string): { file: MemFile; path: string; writable: boolean } {
    const f = this.fds.get(fd);
    if (f === undefined) throw errno('EBADF', op, String(fd), 'bad file descriptor');
    return f;
  }

  private isFull(p: string): boolean {
    for (const prefix of this.fullPrefixes) if (p.startsWith(prefix)) return true;
    return false;
  }

  // ------------------------------------------------------------------------- Disk

  open(p: string, flags: OpenFlags): number {
    let file: MemFile;
    if (flags === 'w') {
      const { dir, name } = this.parentOf(p, 'open');
      const existing = dir.entries.get(name);
      if (existing !== undefined && existing.kind === 'dir')
        throw errno('EISDIR', 'open', p, 'illegal operation on a directory');
      if (existing === undefined) {
        file = new MemFile();
        dir.entries.set(name, file);
      } else {
        file = existing;
        if (file.len > 0) file.change({ kind: 'truncate', len: 0 });
      }
    } else {
      file = this.fileAt(p, 'open');
    }
    const fd = this.nextFd++;
    this.fds.set(fd, { file, path: p, writable: flags !== 'r' });
    return fd;
  }

  read(fd: number, buf: Uint8Array, offset: number, length: number, position: number): number {
    const { file } = this.fd(fd, 'read');
    const n = Math.max(0, Math.min(length, file.len - position));
    if (n > 0) buf.set(file.data.subarray(position, position + n), offset);
    return n;
  }

  write(fd: number, buf: Uint8Array, offset: number, length: number, position: number): number {
    const f = this.fd(fd, 'write');
    if (!f.writable) throw errno('EBADF', 'write', f.path, 'file not open for writing');
    if (position + length > f.file.len && this.isFull(f.path)) {
      this.counters.enospc++;
      throw errno('ENOSPC', 'write', f.path, 'no space left on device');
    }
    const bytes = buf.slice(offset, offset + length);
    f.file.change({ kind: 'write', pos: position, bytes });
    this.counters.writes++;
    this.counters.bytesWritten += length;
    return length;
  }

  fsync(fd: number): void {
    const f = this.fd(fd, 'fsync');
    f.file.fsync();
    this.counters.fsyncs++;
  }

  close(fd: number): void {
    this.fd(fd, 'close');
    this.fds.delete(fd);
  }

  fsyncDir(p: string): void {
    const dir = this.dirAt(p, 'fsync');
    dir.synced = new Map(dir.entries);
    this.counters.dirFsyncs++;
  }

  exists(p: string): boolean {
    return this.lookup(p) !== null;
  }

  mkdirp(p: string): void {
    let dir = this.root;
    for (const name of this.parts(p)) {
      const next = dir.entries.get(name);
      if (next === undefined) {
        const made = new MemDir();
        dir.entries.set(name, made);
        dir = made;
      } else if (next.kind === 'dir') {
        dir = next;
      } else {
        throw errno('EEXIST', 'mkdir', p, 'file already exists');
      }
    }
  }

  readdir(p: string): string[] {
    return [...this.dirAt(p, 'scandir').entries.keys()].sort();
  }

  size(p: string): number {
    const n = this.lookup(p);
    if (n === null) throw errno('ENOENT', 'stat', p, 'no such file or directory');
    return n.kind === 'file' ? n.len : 4096;
  }

  truncate(p: string, length: number): void {
    const file = this.fileAt(p, 'truncate');
    file.change({ kind: 'truncate', len: length });
  }

  rename(from: string, to: string): void {
    const src = this.parentOf(from, 'rename');
    const node = src.dir.entries.get(src.name);
    if (node === undefined) throw errno('ENOENT', 'rename', from, 'no such file or directory');
    const dst = this.parentOf(to, 'rename');
    src.dir.entries.delete(src.name);
    dst.dir.entries.set(dst.name, node);
  }

  rmrf(p: string): void {
    if (this.parts(p).length === 0) return;
    const { dir, name } = this.parentOf(p, 'rm');
    dir.entries.delete(name);
  }

  readFile(p: string): Uint8Array {
    return this.fileAt(p, 'open').content().slice();
  }

  writeFile(p: string, data: Uint8Array | string): void {
    const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
    const fd = this.open(p, 'w');
    try {
      if (bytes.length > 0) this.write(fd, bytes, 0, bytes.length, 0);
    } finally {
      this.close(fd);
    }
  }

  copyTree(from: string, to: string): void {
    const src = this.lookup(from);
    if (src === null) throw errno('ENOENT', 'cp', from, 'no such file or directory');
    this.copyNodeInto(src, this, to);
  }

  isDirectory(p: string): boolean {
    const n = this.lookup(p);
    if (n === null) throw errno('ENOENT', 'stat', p, 'no such file or directory');
    return n.kind === 'dir';
  }

  private readonly asyncOps = asyncOpsOf(this);

  openAsync(p: string, flags: 'w', mode?: number): Promise<AsyncFile> {
    return this.asyncOps.openAsync(p, flags, mode);
  }

  renameAsync(from: string, to: string): Promise<void> {
    return this.asyncOps.renameAsync(from, to);
  }

  rmrfAsync(p: string): Promise<void> {
    return this.asyncOps.rmrfAsync(p);
  }

  // ------------------------------------------------------------------------- simulation

  /** Copy a tree of this disk to `to` on `target` (a base backup onto another machine). */
  copyTo(from: string, target: MemDisk, to: string): void {
    const src = this.lookup(from);
    if (src === null) throw errno('ENOENT', 'cp', from, 'no such file or directory');
    this.copyNodeInto(src, target, to);
  }

  private copyNodeInto(src: MemNode, target: MemDisk, to: string): void {
    if (src.kind === 'file') {
      target.writeFile(to, src.content());
      return;
    }
    target.mkdirp(to);
    for (const [name, child] of src.entries)
      this.copyNodeInto(child, target, path.posix.join(to, name));
  }

  /** Make everything durable (initdb and pg_basebackup end with a sync of the whole tree). */
  syncAll(): void {
    const walk = (d: MemDir) => {
      d.synced = new Map(d.entries);
      for (const child of d.entries.values()) {
        if (child.kind === 'dir') walk(child);
        else child.fsync();
      }
    };
    walk(this.root);
  }

  /** A process crash: open files are closed, nothing written is lost (the OS keeps its cache). */
  processCrash(): void {
    this.fds.clear();
  }

  /**
   * A power loss: directory entries revert to their last fsync, every file to its synced bytes
   * plus a random prefix of its pending operations (the last one maybe torn). `rng` null keeps
   * none of the pending operations.
   */
  powerLoss(rng: SeededRandom | null): void {
    this.fds.clear();
    const seen = new Set<MemNode>();
    const walk = (d: MemDir) => {
      d.entries = new Map(d.synced);
      for (const child of d.entries.values()) {
        if (seen.has(child)) continue;
        seen.add(child);
        if (child.kind === 'dir') walk(child);
        else child.loseUnsynced(rng);
      }
    };
    walk(this.root);
  }

  /** Media corruption: flip bits of one byte of a file, durable copy included. */
  flipByte(p: string, offset: number, mask = 0xff): void {
    const file = this.fileAt(p, 'corrupt');
    if (offset >= file.len)
      throw new RangeError(`flipByte: offset ${offset} beyond ${p} (${file.len} bytes)`);
    file.flip(offset, mask);
  }

  /** Open file descriptors (a leak check). */
  openFiles(): number {
    return this.fds.size;
  }
}
