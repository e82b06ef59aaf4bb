/**
 * `cluster start --dashboard`: the dashboard (dashboard/main.ts) as a background process of the
 * cluster, like its nodes: started detached with its output in `<dir>/dashboard.log` and its pid
 * and URL in `<dir>/dashboard.pid`; `cluster stop` (the whole cluster) ends it. Spawned by path,
 * never imported: the dashboard uses the CLIs' code, not the other way round. Only a pid whose
 * command line names the dashboard's entry point and this cluster directory is ever signalled.
 *
 * Entry points: `startDashboardProcess`, `stopDashboardProcess`.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { entryArgs } from '../../server/entry.ts';
import { pollUntil, StopPolling } from '../../server/poll.ts';

const ENTRY = 'dashboard/main.ts';
const pidPath = (dir: string) => path.join(dir, 'dashboard.pid');
const logPath = (dir: string) => path.join(dir, 'dashboard.log');

function isOurDashboard(pid: number, dir: string): boolean {
  try {
    const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return cmd.some((a) => a.includes('dashboard/main')) && cmd.includes(dir);
  } catch {
    return false;
  }
}

/** The running dashboard's URL, or null. */
export function runningDashboard(dir: string): { pid: number; url: string } | null {
  try {
    const v = JSON.parse(fs.readFileSync(pidPath(dir), 'utf8')) as { pid: number; url: string };
    return isOurDashboard(v.pid, dir) ? v : null;
  } catch {
    return null;
  }
}

/** Start the dashboard for `dir` in the background; resolves with its URL once it serves. */
export async function startDashboardProcess(dir: string, port: number): Promise<string> {
  const running = runningDashboard(dir);
  if (running !== null) return running.url;
  const out = fs.openSync(logPath(dir), 'w');
  const child = spawn(
    process.execPath,
    [...entryArgs(ENTRY), '--dir', dir, '--port', String(port)],
    { detached: true, stdio: ['ignore', out, out] },
  );
  fs.closeSync(out);
  child.unref();
  let url: string | null = null;
  await pollUntil(
    async () => {
      if (child.exitCode !== null)
        throw new StopPolling(`the dashboard exited (${child.exitCode}); see ${logPath(dir)}`);
      url =
        /dashboard for .*: (http:\/\/\S+)/.exec(fs.readFileSync(logPath(dir), 'utf8'))?.[1] ?? null;
      return url !== null;
    },
    'the dashboard to serve',
    60_000,
  );
  fs.writeFileSync(pidPath(dir), JSON.stringify({ pid: child.pid, url }) + '\n');
  return url!;
}

/** End the cluster's dashboard (SIGTERM) if one runs; true when one was running. */
export function stopDashboardProcess(dir: string): boolean {
  const d = runningDashboard(dir);
  fs.rmSync(pidPath(dir), { force: true });
  if (d === null) return false;
  process.kill(d.pid, 'SIGTERM');
  return true;
}
