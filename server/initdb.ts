/**
 * initdb and pg_basebackup for walsim: create a primary's data directory (an empty data image and a
 * first shutdown checkpoint), and a standby's as a copy of it with standby.signal — the state a
 * fresh base backup of a cleanly shut down primary gives.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { WalWriter } from '../wal/wal-writer.ts';
import { NodeStorage } from '../storage/node-storage.ts';
import { parseSharedBuffers } from '../storage/shared-buffers.ts';
import { ensureToken, nodeDir, writeNodeConfig, type NodeConfig } from './cluster-files.ts';
import { writeControlFile } from './control-file.ts';
import { STANDBY_SIGNAL, ServerNode } from './node.ts';
import type { DropStrategy, SynchronousCommit } from './settings.ts';

export interface InitOptions {
  sharedBuffers: string;
  standbySharedBuffers: string;
  synchronousCommit: SynchronousCommit;
  dropStrategy: DropStrategy;
  thresholdDivisor: number;
  forceOptimized: boolean;
  walSegmentSize: number;
  listen: string;
}

/** A free TCP port on the listen address (the server binds it at start). */
export function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

/** initdb: an empty cluster whose WAL starts with a shutdown checkpoint. */
export function initdb(dataDir: string, config: NodeConfig): void {
  fs.mkdirSync(path.join(dataDir, 'pg_wal'), { recursive: true });
  fs.mkdirSync(path.join(dataDir, 'global'), { recursive: true });
  const { nBuffers } = parseSharedBuffers(config.sharedBuffers);
  // The data image does not depend on shared_buffers; a small pool is enough to write it.
  const storage = NodeStorage.create(Math.min(nBuffers, 1024), ServerNode.dropSettingsOf(config));
  const wal = WalWriter.open(dataDir, { segmentSize: config.walSegmentSize, timeline: 1 });
  const redoLsn = wal.insertLsn;
  storage.writeImage(dataDir, { redoLsn, redoPrevLsn: 0, timeline: 1 });
  const { startLsn } = wal.insert({
    kind: 'CHECKPOINT_SHUTDOWN', redo: redoLsn, timeline: 1, prevTimeline: 1,
    nextXid: storage.catalog.nextXid, nextRelFileNumber: storage.catalog.nextRelFileNumber, time: Date.now(),
  }, 0);
  wal.flush();
  wal.close();
  writeControlFile(dataDir, {
    systemIdentifier: BigInt('0x' + randomBytes(8).toString('hex')).toString(),
    state: 'shut down', timeline: 1, checkpointLsn: startLsn, redoLsn, walSegmentSize: config.walSegmentSize, time: '',
  });
}

/** pg_basebackup of a stopped primary: copy its data directory and mark the copy a standby. */
export function baseBackup(fromDir: string, toDir: string): void {
  fs.mkdirSync(toDir, { recursive: true });
  for (const entry of ['pg_wal', 'base', 'global']) {
    fs.cpSync(path.join(fromDir, entry), path.join(toDir, entry), { recursive: true });
  }
  fs.writeFileSync(path.join(toDir, STANDBY_SIGNAL), '');
}

export async function initCluster(clusterDir: string, opts: InitOptions): Promise<void> {
  ensureToken(clusterDir);
  const common = {
    listen: opts.listen,
    dropStrategy: opts.dropStrategy,
    thresholdDivisor: opts.thresholdDivisor,
    forceOptimized: opts.forceOptimized,
    synchronousCommit: opts.synchronousCommit,
    walSegmentSize: opts.walSegmentSize,
    hotStandby: true,
  };
  const primary: NodeConfig = {
    ...common, name: 'primary', role: 'primary', port: await freePort(opts.listen), sharedBuffers: opts.sharedBuffers,
    synchronousStandbyNames: 'walreceiver', primaryHost: null, primaryPort: null, applicationName: 'primary',
  };
  const standby: NodeConfig = {
    ...common, name: 'standby', role: 'standby', port: await freePort(opts.listen), sharedBuffers: opts.standbySharedBuffers,
    synchronousStandbyNames: '', primaryHost: opts.listen === '0.0.0.0' ? '127.0.0.1' : opts.listen, primaryPort: primary.port,
    applicationName: 'walreceiver',
  };
  const primaryDir = nodeDir(clusterDir, 'primary');
  initdb(primaryDir, primary);
  writeNodeConfig(clusterDir, primary);
  baseBackup(primaryDir, nodeDir(clusterDir, 'standby'));
  writeNodeConfig(clusterDir, standby);
}
