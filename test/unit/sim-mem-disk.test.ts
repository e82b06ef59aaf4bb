/**
 * The simulator's in-memory disk keeps POSIX durability strictly: unsynced bytes and unsynced
 * directory entries are lost at a power loss, the last pending write may be torn, a full disk
 * refuses extending writes. And the production code that writes data images and WAL through it
 * survives a power loss at any point. Method: drive MemDisk directly and through NodeStorage.
 */
import { describe, expect, it } from 'vitest';
import { SeededRandom } from '../../common/random.ts';
import { writeFileAtomic, writeFileSynced } from '../../common/durable-file.ts';
import { MemDisk } from '../../sim/mem-disk.ts';
import { NodeStorage } from '../../storage/node-storage.ts';
import { Scheduler } from '../../sim/scheduler.ts';

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

function fileWith(disk: MemDisk, p: string, text: string, sync: boolean): void {
  const fd = disk.open(p, 'w');
  disk.write(fd, enc(text), 0, text.length, 0);
  if (sync) disk.fsync(fd);
  disk.close(fd);
}

describe('MemDisk', () => {
  it('keeps fsynced bytes and loses unsynced ones at a power loss', () => {
    const d = new MemDisk();
    d.mkdirp('/a');
    fileWith(d, '/a/f', 'hello', true);
    d.syncAll();
    const fd = d.open('/a/f', 'r+');
    d.write(fd, enc(' world'), 0, 6, 5);
    d.close(fd);
    expect(dec(d.readFile('/a/f'))).toBe('hello world');
    d.powerLoss(null);
    expect(dec(d.readFile('/a/f'))).toBe('hello');
  });

  it('keeps everything at a process crash (the page cache survives)', () => {
    const d = new MemDisk();
    d.mkdirp('/a');
    fileWith(d, '/a/f', 'unsynced', false);
    d.processCrash();
    expect(dec(d.readFile('/a/f'))).toBe('unsynced');
  });

  it('loses a created file whose directory was not fsynced, even if the file was', () => {
    const d = new MemDisk();
    d.mkdirp('/a');
    d.fsyncDir('/');
    d.fsyncDir('/a');
    fileWith(d, '/a/f', 'x', true);
    d.powerLoss(null);
    expect(d.exists('/a/f')).toBe(false);
    expect(d.exists('/a')).toBe(true);
  });

  it('reverts an unsynced rename and keeps a synced one', () => {
    const d = new MemDisk();
    d.mkdirp('/a');
    fileWith(d, '/a/old', 'v1', true);
    d.syncAll();
    d.rename('/a/old', '/a/new');
    d.powerLoss(null);
    expect(d.readdir('/a')).toEqual(['old']);
    d.rename('/a/old', '/a/new');
    d.fsyncDir('/a');
    d.powerLoss(null);
    expect(d.readdir('/a')).toEqual(['new']);
  });

  it('writeFileAtomic leaves the old or the new content, never a mix, at any power loss', () => {
    for (let seed = 1; seed <= 50; seed++) {
      const d = new MemDisk();
      d.mkdirp('/a');
      writeFileAtomic('/a/f', 'old content', d, 0o644);
      d.syncAll();
      writeFileAtomic('/a/f', 'new content!', d, 0o644);
      d.powerLoss(new SeededRandom(seed));
      expect(['old content', 'new content!']).toContain(dec(d.readFile('/a/f')));
    }
  });

  it('may tear the last pending write at a power loss (a prefix of it survives)', () => {
    const seen = new Set<string>();
    for (let seed = 1; seed <= 200; seed++) {
      const d = new MemDisk();
      d.mkdirp('/a');
      writeFileSynced('/a/f', 'AAAA', d, 0o644);
      d.syncAll();
      const fd = d.open('/a/f', 'r+');
      d.write(fd, enc('BBBB'), 0, 4, 4);
      d.write(fd, enc('CCCC'), 0, 4, 8);
      d.close(fd);
      d.powerLoss(new SeededRandom(seed));
      const text = dec(d.readFile('/a/f'));
      expect(text).toMatch(/^AAAA(B{0,4}|BBBBC{0,4})$/);
      seen.add(text);
    }
    expect(seen.has('AAAA')).toBe(true);
    expect(seen.has('AAAABBBBCCCC')).toBe(true);
    expect([...seen].some((t) => t.length > 4 && t.length < 8)).toBe(true); // torn
  });

  it('refuses writes that extend a file on a full disk (ENOSPC) and counts them', () => {
    const d = new MemDisk();
    d.mkdirp('/a/pg_wal');
    fileWith(d, '/a/pg_wal/seg', 'abcd', true);
    d.fullPrefixes.add('/a/pg_wal');
    const fd = d.open('/a/pg_wal/seg', 'r+');
    expect(d.write(fd, enc('xy'), 0, 2, 0)).toBe(2); // rewriting allocated bytes is fine
    expect(() => d.write(fd, enc('xyz'), 0, 3, 3)).toThrow(/ENOSPC/);
    expect(d.counters.enospc).toBe(1);
    d.close(fd);
  });

  it('flips a byte in both the cached and the durable copy', () => {
    const d = new MemDisk();
    d.mkdirp('/a');
    fileWith(d, '/a/f', 'abc', true);
    d.syncAll();
    d.flipByte('/a/f', 1, 0x01);
    d.powerLoss(null);
    expect(dec(d.readFile('/a/f'))).toBe('acc');
  });
});

describe('data images on a disk that loses power', () => {
  /**
   * A checkpoint's image must be loadable after a power loss right after writeImage returns:
   * the files inside base.new are synced, and so is base.new itself before it becomes base.
   */
  it('loads the image written just before the power loss', async () => {
    for (let seed = 1; seed <= 20; seed++) {
      const d = new MemDisk();
      d.mkdirp('/n');
      d.syncAll();
      const st = NodeStorage.create(16, {
        strategy: 'full-scan',
        thresholdDivisor: 32,
        forceOptimized: false,
      });
      const io = { disk: d, clock: new Scheduler().clockFor('t') };
      await st.writeImage('/n', { redoLsn: 40, redoPrevLsn: 0, timeline: 1 }, async () => {}, io);
      await st.writeImage('/n', { redoLsn: 80, redoPrevLsn: 40, timeline: 1 }, async () => {}, io);
      d.powerLoss(new SeededRandom(seed));
      const { header } = NodeStorage.loadImage('/n', 16, st.dropSettings, d);
      expect(header.redoLsn).toBe(80);
    }
  });
});
