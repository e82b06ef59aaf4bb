/**
 * The timing commands' guard against ext4's inode-reuse delay (scripts/postgres/inode-reuse.ts):
 * the wait arithmetic, what a retired pair keeps, and the work directory's removal record. No
 * PostgreSQL, no timing.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  INODE_REUSE_DELAY_S,
  inodeReuseWaitMs,
  journalless,
  markerFile,
  removeWorkDir,
  retireCluster,
} from '../../scripts/postgres/inode-reuse.ts';

const dirs: string[] = [];
const scratch = () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-inode-reuse-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

describe('inode-reuse guard', () => {
  it('waits what is left of the 60 s after a removal, never a negative time', () => {
    expect(INODE_REUSE_DELAY_S).toBe(60);
    expect(inodeReuseWaitMs(null, 5_000)).toBe(0);
    expect(inodeReuseWaitMs(Number.NaN, 5_000)).toBe(0);
    expect(inodeReuseWaitMs(1_000, 31_000)).toBe(30_000);
    expect(inodeReuseWaitMs(1_000, 61_000)).toBe(0);
    expect(inodeReuseWaitMs(1_000, 500_000)).toBe(0);
  });

  it('tells a journal-less ext4 only from its sysfs entry; anything unknown is not', () => {
    expect(journalless('/nonexistent-walsim-dir')).toBe(false);
    expect(journalless('/proc')).toBe(false); // not a block device's file system
    expect(typeof journalless(os.tmpdir())).toBe('boolean');
  });

  it('a retired pair keeps its small files and loses only its WAL segments', async () => {
    const pair = path.join(scratch(), 'pair');
    for (const node of ['primary', 'standby']) {
      fs.mkdirSync(path.join(pair, node, 'pg_wal', 'archive_status'), { recursive: true });
      fs.mkdirSync(path.join(pair, node, 'base', '5'), { recursive: true });
      fs.writeFileSync(path.join(pair, node, 'pg_wal', '000000010000000000000003'), 'x');
      fs.writeFileSync(path.join(pair, node, 'pg_wal', '00000002.history'), 'x');
      fs.writeFileSync(path.join(pair, node, 'base', '5', '16384'), 'x');
    }
    await retireCluster(pair); // no cluster file: nothing to stop
    for (const node of ['primary', 'standby']) {
      expect(fs.readdirSync(path.join(pair, node, 'pg_wal')).sort()).toEqual([
        '00000002.history',
        'archive_status',
      ]);
      expect(fs.existsSync(path.join(pair, node, 'base', '5', '16384'))).toBe(true);
    }
  });

  it('removing the work directory records when, on its file system', () => {
    const root = scratch();
    const work = path.join(root, 'work');
    fs.mkdirSync(path.join(work, 'pg-bench-x'), { recursive: true });
    const marker = markerFile(work, root);
    expect(marker).toBe(path.join(root, `walsim-removed-at-${fs.statSync(work).dev}`));
    const before = Date.now();
    removeWorkDir(work, root);
    expect(fs.existsSync(work)).toBe(false);
    const at = Number(fs.readFileSync(marker, 'utf8'));
    expect(at).toBeGreaterThanOrEqual(before);
    expect(at).toBeLessThanOrEqual(Date.now());
  });
});
