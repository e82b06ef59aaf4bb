/**
 * One real PostgreSQL server of a given bin folder (Debian's or an installed embedded major) for
 * WAL tests: initdb with small WAL segments, loopback only, as the `postgres` OS user when we are
 * root; a client; a stop. Its pg_wal is read after the stop.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import pg from 'pg';
import { pgServerUser } from '../../scripts/postgres/pg-bin.ts';
import { runPgProgram } from '../../scripts/postgres/pg-cluster.ts';
import { freePort } from '../../server/ports.ts';
import type { PgDirs } from './postgres.ts';

export interface OneServer {
  data: string;
  walDir: string;
  port: number;
  client(): Promise<pg.Client>;
  stop(): Promise<void>;
}

/** initdb (1 MB segments) and start; `settings` are `-c` options. */
export async function startOneServer(
  dirs: PgDirs,
  binDir: string,
  settings: Record<string, string>,
): Promise<OneServer> {
  const user = pgServerUser();
  const engine = { binDir, user };
  const data = dirs.fresh('pgwal');
  fs.mkdirSync(data, { mode: 0o700 });
  if (user !== null) fs.chownSync(data, user.uid, user.gid);
  await runPgProgram(
    engine,
    'initdb',
    [
      '-D',
      data,
      '-U',
      'postgres',
      '-A',
      'trust',
      '--locale=C',
      '-E',
      'UTF8',
      '--no-sync',
      '--wal-segsize=1',
    ],
    { cwd: '/' },
  );
  const port = await freePort('127.0.0.1');
  const opts = [
    `-p ${port}`,
    '-c listen_addresses=127.0.0.1',
    "-c unix_socket_directories=''",
    ...Object.entries(settings).map(([k, v]) => `-c ${k}=${v}`),
  ].join(' ');
  const log = path.join(path.dirname(data), 'server.log');
  fs.writeFileSync(log, '');
  if (user !== null) fs.chownSync(log, user.uid, user.gid);
  await runPgProgram(engine, 'pg_ctl', ['start', '-D', data, '-o', opts, '-l', log, '-w']);
  return {
    data,
    walDir: path.join(data, 'pg_wal'),
    port,
    client: async () => {
      const c = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
      await c.connect();
      return c;
    },
    stop: async () => {
      await runPgProgram(engine, 'pg_ctl', ['stop', '-D', data, '-m', 'fast', '-w']);
    },
  };
}
