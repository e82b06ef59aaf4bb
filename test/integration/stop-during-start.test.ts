/**
 * pg_ctl stop while the server's start is still under way (INV-SCRIPTS-3's race: a sweep's Ctrl-C
 * while a cell's nodes start at once). The server has not written postmaster.pid yet, so a stop
 * that looked only there found nothing, and the server came up afterwards with nobody to stop it.
 * Method: start a real node and stop it (each mode) in the same turn of the event loop, before its
 * process can have written anything; the stop must report it stopped, and no process may serve
 * the data directory afterwards (an immediate stop: the start fails with "exited during start").
 */
import * as fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { clustersPerTest } from '../helpers/cluster.ts';
import { isWalsimServer, nodeDir } from '../../server/cluster-files.ts';
import { runningPid, startNode, stopNode } from '../../server/pg-ctl.ts';
import type { StopMode } from '../../server/control-protocol.ts';

/** Every process whose command line names `dataDir` as a walsim server's. */
function serversOf(dataDir: string): number[] {
  return fs
    .readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((pid) => isWalsimServer(pid, dataDir));
}

describe('stop during start', () => {
  const clusters = clustersPerTest();

  for (const mode of ['immediate', 'fast'] as StopMode[]) {
    it(`${mode === 'immediate' ? 'an' : 'a'} ${mode} stop finds a server whose start is under way and stops it`, async () => {
      const c = await clusters.create();
      const dataDir = nodeDir(c.dir, 'primary');
      const start = startNode(c.dir, 'primary');
      start.catch(() => {}); // awaited below
      expect(runningPid(c.dir, 'primary')).toBeNull(); // nothing in postmaster.pid yet
      expect(serversOf(dataDir)).toHaveLength(1);
      expect(await stopNode(c.dir, 'primary', mode)).toBe(true);
      // Killed outright (immediate) it never writes postmaster.pid; a fast stop is the server's
      // own SIGINT handling once installed, which may come after postmaster.pid, so either ending
      // of the start is right there: what matters is that nothing serves afterwards.
      if (mode === 'immediate') await expect(start).rejects.toThrow(/exited during start/);
      else await start.catch(() => {});
      expect(serversOf(dataDir)).toEqual([]);
      expect(runningPid(c.dir, 'primary')).toBeNull();
      // Nothing left to stop, and the node starts normally afterwards.
      expect(await stopNode(c.dir, 'primary', mode)).toBe(false);
      await startNode(c.dir, 'primary');
      expect(runningPid(c.dir, 'primary')).not.toBeNull();
    });
  }
});
