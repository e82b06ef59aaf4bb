/**
 * initdb and pg_basebackup for walsim: create a primary's data directory (an empty data image and a
 * first shutdown checkpoint), and a standby's as a copy of it with standby.signal — the state a
 * fresh base backup of a cleanly shut down primary gives.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { ImageIo } from '../storage/data-image.ts';
import { nodeDisk } from '../common/node-disk.ts';
import { systemClock } from '../common/system-clock.ts';
import { WalWriter } from '../wal/wal-writer.ts';
import { NodeStorage } from '../storage/node-storage.ts';
import { MIN_SHARED_BUFFERS } from '../storage/shared-buffers.ts';
import { dropSettingsForRules } from '../storage/drop.ts';
import { pgDropRules } from '../storage/pg-drop-rules.ts';
import { WalsimError } from '../common/errors.ts';
import { fsyncDir, makeDir, writeFileSynced } from '../common/durable-file.ts';
import {
  copyDataDirectory,
  ensureToken,
  listNodes,
  nodeDir,
  writeNodeConfig,
  writePgPassword,
  type NodeConfig,
  type PasswordEncryption,
} from './cluster-files.ts';
import { writeControlFile } from '../wal/control-file.ts';
import { freePort } from './ports.ts';
import { dropSettingsOf, STANDBY_SIGNAL } from './startup-replay.ts';
import {
  DEFAULT_WAL_SETTINGS,
  type DropStrategy,
  type SynchronousCommit,
  type WalSettings,
} from './settings.ts';
import { parseSynchronousStandbyNames } from '../primary/sync-standby-names.ts';

export interface InitOptions {
  sharedBuffers: string;
  standbySharedBuffers: string;
  synchronousCommit: SynchronousCommit;
  dropStrategy: DropStrategy;
  thresholdDivisor: number;
  forceOptimized: boolean;
  /** Follow a real PostgreSQL major's drop rules (NodeConfig.pgVersion); absent: `dropStrategy`. */
  pgVersion?: number;
  walSegmentSize: number;
  listen: string;
  /** First PostgreSQL wire-protocol port (primary; the standbys take the next ones); absent: free ports. */
  pgPortBase?: number;
  /** Password PostgreSQL-protocol clients must give; absent: trust, loopback clients only. */
  password?: string;
  /** How they prove it (password_encryption); default scram-sha-256, PostgreSQL 14+'s default. */
  passwordEncryption?: PasswordEncryption;
  /**
   * Names of the standbys to create, each streaming from the primary with application_name = its
   * name. Omitted: one standby named "standby" with application_name "walreceiver" (the seed's).
   */
  standbys?: string[];
  /** The primary's synchronous_standby_names. Omitted: every standby, in order ("walreceiver" for the seed's). */
  synchronousStandbyNames?: string;
  /** checkpoint_timeout, max_wal_size, wal_keep_size of both nodes; PostgreSQL's defaults when absent. */
  wal?: Partial<WalSettings>;
}

/**
 * A node following PostgreSQL `major`'s drop rules: the major, and the strategy and threshold
 * divisor those rules make (so status and SHOW say what replay does); 13 has no lookup to force.
 */
function majorSettings(major: number, forceOptimized: boolean) {
  const d = dropSettingsForRules(pgDropRules({ major, minor: null }), forceOptimized);
  return {
    pgVersion: major,
    dropStrategy: d.strategy,
    thresholdDivisor: d.thresholdDivisor,
    forceOptimized: d.forceOptimized,
  };
}

/** A node name: a lower-case identifier (it is a directory and an application_name). */
export const NODE_NAME_RE = /^[a-z][a-z0-9_]{0,30}$/;

/** The standbys initCluster creates and the primary's synchronous_standby_names, validated. */
export function plannedStandbys(opts: Pick<InitOptions, 'standbys' | 'synchronousStandbyNames'>): {
  standbys: Array<{ name: string; applicationName: string }>;
  synchronousStandbyNames: string;
} {
  if (opts.standbys === undefined) {
    const ssn = opts.synchronousStandbyNames ?? 'walreceiver';
    parseSynchronousStandbyNames(ssn);
    return {
      standbys: [{ name: 'standby', applicationName: 'walreceiver' }],
      synchronousStandbyNames: ssn,
    };
  }
  const seen = new Set<string>();
  for (const n of opts.standbys) {
    if (!NODE_NAME_RE.test(n))
      throw new WalsimError(
        'invalid_input',
        `standby name must be a lower-case identifier (a-z, 0-9, _; at most 31 characters), got "${n}"`,
      );
    if (n === 'primary')
      throw new WalsimError('invalid_input', 'a standby cannot be named "primary"');
    if (seen.has(n)) throw new WalsimError('invalid_input', `standby "${n}" is named twice`);
    seen.add(n);
  }
  const ssn = opts.synchronousStandbyNames ?? opts.standbys.join(', ');
  parseSynchronousStandbyNames(ssn);
  return {
    standbys: opts.standbys.map((name) => ({ name, applicationName: name })),
    synchronousStandbyNames: ssn,
  };
}

/**
 * initdb: an empty cluster whose WAL starts with a shutdown checkpoint. The simulator passes its
 * disk, its clock and a seeded system identifier; the CLI node:fs, Node's clock and a random one.
 */
export async function initdb(
  dataDir: string,
  config: NodeConfig,
  io: ImageIo,
  systemIdentifier = BigInt('0x' + randomBytes(8).toString('hex')).toString(),
): Promise<void> {
  const { disk } = io;
  const nowMs = io.clock.now();
  makeDir(path.join(dataDir, 'pg_wal'), disk);
  makeDir(path.join(dataDir, 'global'), disk);
  // The data image of an empty cluster does not depend on shared_buffers (nothing is cached):
  // the smallest pool writes it, and initdb reads no setting it does not need.
  const storage = NodeStorage.create(MIN_SHARED_BUFFERS, dropSettingsOf(config));
  const wal = WalWriter.open(dataDir, { segmentSize: config.walSegmentSize, timeline: 1, disk });
  const redoLsn = wal.insertLsn;
  await storage.writeImage(dataDir, { redoLsn, redoPrevLsn: 0, timeline: 1 }, async () => {}, io);
  const { startLsn } = wal.insert(
    {
      kind: 'CHECKPOINT_SHUTDOWN',
      redo: redoLsn,
      timeline: 1,
      prevTimeline: 1,
      nextXid: storage.catalog.nextXid,
      nextRelFileNumber: storage.catalog.nextRelFileNumber,
      time: nowMs,
    },
    0,
  );
  wal.flush();
  wal.close();
  writeControlFile(
    dataDir,
    {
      systemIdentifier,
      state: 'shut down',
      timeline: 1,
      checkpointLsn: startLsn,
      redoLsn,
      walSegmentSize: config.walSegmentSize,
      time: '',
    },
    disk,
    nowMs,
  );
}

/** pg_basebackup of a stopped primary: copy its data directory and mark the copy a standby. */
export function baseBackup(fromDir: string, toDir: string): void {
  copyDataDirectory(fromDir, toDir, nodeDisk);
  writeFileSynced(path.join(toDir, STANDBY_SIGNAL), '', nodeDisk);
}

/** Most entries a refusal names (a directory full of files gets "… and N more"). */
const LISTED_ENTRIES_MAX = 10;

/**
 * What `dir` holds, as paths relative to it (depth first, sorted), at most `max` of them and the
 * total count; a missing directory holds nothing.
 */
export function listDirectoryEntries(
  dir: string,
  max = LISTED_ENTRIES_MAX,
): { listed: string[]; total: number } {
  const listed: string[] = [];
  let total = 0;
  const walk = (rel: string): void => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(path.join(dir, rel), { withFileTypes: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT' && rel === '') return;
      throw e;
    }
    for (const d of entries.sort((a, b) => a.name.localeCompare(b.name))) {
      const p = rel === '' ? d.name : `${rel}/${d.name}`;
      total++;
      if (listed.length < max) listed.push(d.isDirectory() ? `${p}/` : p);
      if (d.isDirectory()) walk(p);
    }
  };
  walk('');
  return { listed, total };
}

/**
 * initdb's rule: a new cluster goes only into a directory that is missing or empty. Anything else
 * is refused with the files found, and nothing is touched (a foreign `token` is never adopted).
 */
export function checkClusterDirectoryEmpty(clusterDir: string): void {
  if (fs.existsSync(clusterDir) && !fs.statSync(clusterDir).isDirectory()) {
    throw new WalsimError('invalid_input', `"${clusterDir}" exists and is not a directory`);
  }
  const { listed, total } = listDirectoryEntries(clusterDir);
  if (total === 0) return;
  if (listNodes(clusterDir).length > 0)
    // Two `cluster start`s on one new directory: the other one's cluster landed first.
    throw new WalsimError(
      'invalid_input',
      `directory "${clusterDir}" now holds a walsim cluster created meanwhile by another command; ` +
        `this one created nothing (start that cluster with "npm run cluster -- start --dir ${clusterDir}")`,
    );
  const more = total > listed.length ? ` and ${total - listed.length} more` : '';
  throw new WalsimError(
    'invalid_input',
    `directory "${clusterDir}" exists but is not empty and holds no walsim cluster (found: ${listed.join(', ')}${more}); ` +
      'walsim creates a cluster only in a missing or empty directory, like initdb: remove or empty it, or pass another --dir',
  );
}

/**
 * initdb + base backup of a new cluster in `clusterDir` (missing or empty), atomically: everything
 * is built in a temporary sibling directory (mode 0700) and renamed into place at the end, so a
 * failure at any step leaves nothing behind and a reader never sees half a cluster.
 */
export async function initCluster(
  clusterDir: string,
  opts: InitOptions,
  /** Called on the finished cluster just before it is renamed into place (the CLI locks it). */
  beforeRename?: (buildingDir: string) => void,
): Promise<void> {
  plannedStandbys(opts); // refuse bad names before anything is created
  checkClusterDirectoryEmpty(clusterDir);
  const target = path.resolve(clusterDir);
  const parent = path.dirname(target);
  fs.mkdirSync(parent, { recursive: true });
  const building = fs.mkdtempSync(path.join(parent, `.${path.basename(target)}.initdb-`));
  try {
    await buildCluster(building, opts);
    beforeRename?.(building);
    // rename(2) replaces an empty directory; a file created in `target` meanwhile makes it fail
    // (ENOTEMPTY) rather than mix the two.
    try {
      fs.renameSync(building, target);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOTEMPTY' || code === 'EEXIST') checkClusterDirectoryEmpty(clusterDir);
      throw e;
    }
    fsyncDir(parent, nodeDisk);
  } catch (e) {
    fs.rmSync(building, { recursive: true, force: true });
    throw e;
  }
}

async function buildCluster(clusterDir: string, opts: InitOptions): Promise<void> {
  const plan = plannedStandbys(opts);
  ensureToken(clusterDir);
  if (opts.password !== undefined) {
    writePgPassword(clusterDir, {
      passwordEncryption: opts.passwordEncryption ?? 'scram-sha-256',
      password: opts.password,
    });
  }
  // Ports are picked one after the other; never hand the same one out twice.
  const nodes = 1 + plan.standbys.length;
  const taken = new Set<number>(
    opts.pgPortBase !== undefined
      ? Array.from({ length: nodes }, (_, i) => opts.pgPortBase! + i)
      : [],
  );
  const free = async (): Promise<number> => {
    for (;;) {
      const port = await freePort(opts.listen);
      if (!taken.has(port)) return (taken.add(port), port);
    }
  };
  const pgPort = async (offset: number) =>
    opts.pgPortBase !== undefined ? opts.pgPortBase + offset : free();
  const common = {
    listen: opts.listen,
    dropStrategy: opts.dropStrategy,
    thresholdDivisor: opts.thresholdDivisor,
    forceOptimized: opts.forceOptimized,
    ...(opts.pgVersion !== undefined ? majorSettings(opts.pgVersion, opts.forceOptimized) : {}),
    synchronousCommit: opts.synchronousCommit,
    walSegmentSize: opts.walSegmentSize,
    hotStandby: true,
    wal: { ...DEFAULT_WAL_SETTINGS, ...opts.wal },
  };
  const primary: NodeConfig = {
    ...common,
    name: 'primary',
    role: 'primary',
    port: await free(),
    pgPort: await pgPort(0),
    sharedBuffers: opts.sharedBuffers,
    synchronousStandbyNames: plan.synchronousStandbyNames,
    primaryHost: null,
    primaryPort: null,
    applicationName: 'primary',
  };
  const primaryDir = nodeDir(clusterDir, 'primary');
  await initdb(primaryDir, primary, { disk: nodeDisk, clock: systemClock });
  writeNodeConfig(clusterDir, primary);
  for (const [i, sb] of plan.standbys.entries()) {
    const standby: NodeConfig = {
      ...common,
      name: sb.name,
      role: 'standby',
      port: await free(),
      pgPort: await pgPort(1 + i),
      sharedBuffers: opts.standbySharedBuffers,
      synchronousStandbyNames: '',
      primaryHost: opts.listen === '0.0.0.0' ? '127.0.0.1' : opts.listen,
      primaryPort: primary.port,
      applicationName: sb.applicationName,
    };
    baseBackup(primaryDir, nodeDir(clusterDir, sb.name));
    writeNodeConfig(clusterDir, standby);
  }
  fsyncDir(clusterDir, nodeDisk);
}
