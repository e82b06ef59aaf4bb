/**
 * `cluster start --dir` follows initdb: a directory that holds anything but a walsim cluster is
 * refused, naming what was found, and left untouched; a new cluster appears all at once (built in a
 * temporary sibling and renamed) or not at all; directories are 0700 and files 0600.
 * Method: run the real CLI against a directory with foreign files (including a world-readable
 * `token`), and compare the tree before and after; make initCluster fail half-way (a listen address
 * it cannot bind, after the token was written) and check nothing is left; initialise a cluster,
 * start the primary, checkpoint and stop it, and check the mode of every entry.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { expectOneLineError, runScript } from '../helpers/cli.ts';
import { initCluster, type InitOptions } from '../../server/initdb.ts';
import { ClusterHandle } from '../../server/cluster-handle.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-dir-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const OPTS: InitOptions = {
  sharedBuffers: '16MB',
  standbySharedBuffers: '16MB',
  synchronousCommit: 'remote_write',
  dropStrategy: 'cached-lookup',
  thresholdDivisor: 32,
  forceOptimized: false,
  walSegmentSize: 1 << 20,
  listen: '127.0.0.1',
};

/** Every entry under `dir` with its mode and (for files) content, sorted. */
function snapshot(dir: string): Array<[string, string, string]> {
  const out: Array<[string, string, string]> = [];
  const walk = (rel: string): void => {
    for (const name of fs.readdirSync(path.join(dir, rel)).sort()) {
      const p = path.join(rel, name);
      const st = fs.statSync(path.join(dir, p));
      out.push([
        p,
        (st.mode & 0o777).toString(8),
        st.isDirectory() ? '<dir>' : fs.readFileSync(path.join(dir, p), 'utf8'),
      ]);
      if (st.isDirectory()) walk(p);
    }
  };
  walk('');
  return out;
}

describe('cluster directory', () => {
  it('refuses a non-empty directory, names the files found and touches nothing', async () => {
    const dir = path.join(tmp, 'foreign');
    fs.mkdirSync(path.join(dir, 'primary', 'base'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'notes.txt'), 'my notes\n');
    fs.writeFileSync(path.join(dir, 'primary', 'base', 'important.txt'), 'do not delete\n');
    fs.writeFileSync(path.join(dir, 'token'), 'not-a-walsim-secret\n', { mode: 0o644 });
    fs.chmodSync(path.join(dir, 'token'), 0o644);
    const before = snapshot(dir);
    const siblingsBefore = fs.readdirSync(tmp).sort();

    const r = await runScript('cluster.ts', ['start', '--dir', dir, '--shared-buffers', '16MB']);
    const first = expectOneLineError(r, /^error: directory ".*foreign" exists but is not empty/);
    expect(first).toContain(
      'found: notes.txt, primary/, primary/base/, primary/base/important.txt, token',
    );
    expect(snapshot(dir)).toEqual(before); // same files, contents and modes: nothing adopted or deleted
    expect(fs.readdirSync(tmp).sort()).toEqual(siblingsBefore); // no temporary sibling left behind
  });

  it('leaves nothing behind when initialisation fails half-way', async () => {
    const missing = path.join(tmp, 'half', 'c');
    const empty = path.join(tmp, 'empty');
    fs.mkdirSync(empty);
    // 192.0.2.1 (TEST-NET-1) is not a local address: the port search fails after the token exists.
    const bad = { ...OPTS, listen: '192.0.2.1' };
    await expect(initCluster(missing, bad)).rejects.toThrow(/EADDRNOTAVAIL/);
    await expect(initCluster(empty, bad)).rejects.toThrow(/EADDRNOTAVAIL/);
    expect(fs.readdirSync(path.join(tmp, 'half'))).toEqual([]); // neither the cluster nor its temporary sibling
    expect(fs.readdirSync(empty)).toEqual([]);
    expect(fs.readdirSync(tmp).filter((f) => f.startsWith('.'))).toEqual([]);
  });

  it('creates directories 0700 and files 0600, also those the server writes', async () => {
    const dir = path.join(tmp, 'fresh');
    await initCluster(dir, { ...OPTS, synchronousCommit: 'local' }); // the standby stays down
    const c = new ClusterHandle(dir);
    try {
      await c.startNode('primary');
      await c.sql('primary', 'CREATE TABLE t (c int)');
      await c.sql('primary', 'INSERT INTO t SELECT generate_series(1, 1000)');
      await c.sql('primary', 'CHECKPOINT');
      await c.stopNode('primary', 'fast');
    } finally {
      await c.destroy(true);
    }
    const entries = snapshot(dir);
    expect(entries.map(([p]) => p)).toEqual(
      expect.arrayContaining([
        'token',
        'primary/server.log',
        'primary/global/pg_control',
        'primary/base/image.json',
        'standby/standby.signal',
      ]),
    );
    expect((fs.statSync(dir).mode & 0o777).toString(8)).toBe('700');
    const wrong = entries.filter(
      ([, mode, content]) => mode !== (content === '<dir>' ? '700' : '600'),
    );
    expect(wrong.map(([p, mode]) => `${p} ${mode}`)).toEqual([]);
  });
});
