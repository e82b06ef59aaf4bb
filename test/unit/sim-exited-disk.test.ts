/**
 * sim/exited-disk.ts: once the process has exited, its view of the disk changes nothing (every
 * write, fsync, rename, removal, creation and asynchronous write fails) while reads still work;
 * before that it is the machine's disk unchanged. The simulator's fatal() relies on it so that a
 * PANICked process's queued continuations (a checkpoint behind the failed statement) write nothing.
 */
import { describe, expect, it } from 'vitest';
import { MemDisk } from '../../sim/mem-disk.ts';
import { exitedProcessError, exitFencedDisk } from '../../sim/exited-disk.ts';

describe('exitFencedDisk', () => {
  it('passes every call through while the process lives, refuses every change once it exited', async () => {
    const mem = new MemDisk();
    let exited = false;
    const d = exitFencedDisk(mem, () => exited);
    d.mkdirp('/data');
    d.writeFile('/data/a', 'one');
    const f = await d.openAsync('/data/img', 'w');
    await f.writeFile('image');
    exited = true;
    expect(new TextDecoder().decode(d.readFile('/data/a'))).toBe('one');
    expect(d.exists('/data/a')).toBe(true);
    const fd = d.open('/data/a', 'r');
    d.close(fd);
    expect(() => d.writeFile('/data/a', 'two')).toThrow(/exited/);
    expect(() => d.open('/data/a', 'r+')).toThrow(/exited/);
    expect(() => d.truncate('/data/a', 0)).toThrow(/exited/);
    expect(() => d.rename('/data/a', '/data/b')).toThrow(/exited/);
    expect(() => d.rmrf('/data')).toThrow(/exited/);
    expect(() => d.mkdirp('/data/x')).toThrow(/exited/);
    expect(() => d.fsyncDir('/data')).toThrow(/exited/);
    await expect(f.writeFile('later')).rejects.toThrow(/exited/);
    await expect(f.sync()).rejects.toThrow(/exited/);
    await expect(d.openAsync('/data/img2', 'w')).rejects.toThrow(/exited/);
    expect(new TextDecoder().decode(mem.readFile('/data/a'))).toBe('one');
    expect(new TextDecoder().decode(mem.readFile('/data/img'))).toBe('image');
    expect(mem.exists('/data/x')).toBe(false);
    // A statement failing on it has no answer, also when production wrapped the error.
    let err: unknown;
    try {
      d.writeFile('/data/a', 'three');
    } catch (e) {
      err = e;
    }
    expect(exitedProcessError(new Error('could not write', { cause: err }))).toBe(true);
    expect(exitedProcessError(new Error('could not write'))).toBe(false);
  });
});
