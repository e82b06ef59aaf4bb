/**
 * Which path PostgreSQL's own buffer drops take during replay, observed on the real startup
 * process: gdb attached to it with breakpoints on the exported drop functions of its major
 * (`dropFunctions`: 13–15 DropRelFileNodeBuffers / DropRelFileNodesAllBuffers, 16+
 * DropRelationBuffers / DropRelationsAllBuffers), DropDatabaseBuffers, BufTableLookup and
 * CacheInvalidateSmgr (the same names in 13–18; the npm registry's builds keep their symbol
 * tables). The lookup path (14+: FindAndDropRelFileNodeBuffers / FindAndDropRelationBuffers,
 * static) calls BufTableLookup once per block between the drop call and the CacheInvalidateSmgr
 * that follows it in smgrtruncate / smgrdounlinkall; the full scan never does (InvalidateBuffer
 * deletes, it does not look up), and 13 has only the full scan. No timing is involved.
 *
 * Entry points: `gdbUnavailableReason`, `traceDrops`, `dropFunctions`.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pollUntil } from '../../server/poll.ts';
import { pgDropRules } from '../../storage/pg-drop-rules.ts';

export type DropFunction =
  | 'DropRelFileNodeBuffers'
  | 'DropRelFileNodesAllBuffers'
  | 'DropRelationBuffers'
  | 'DropRelationsAllBuffers'
  | 'DropDatabaseBuffers';

/** The drop functions of a major (storage/pg-drop-rules.ts: 16 renamed them with RelFileLocator). */
export function dropFunctions(major: number): {
  ALL: DropFunction;
  ONE: DropFunction;
  DB: DropFunction;
} {
  const { fn } = pgDropRules({ major, minor: null });
  return { ALL: fn.dropRelations, ONE: fn.truncate, DB: fn.dropDatabase };
}

export interface ObservedDrop {
  fn: DropFunction;
  /** BufTableLookup calls before the next CacheInvalidateSmgr: the lookup path's probes. */
  lookups: number;
  path: 'cached-lookup' | 'full-scan';
}

/** null when gdb can attach to a server process here (gdb installed, root, ptrace allowed), else why not. */
export function gdbUnavailableReason(): string | null {
  try {
    execFileSync('gdb', ['--version'], { stdio: 'ignore' });
  } catch {
    return 'gdb is not installed (apt-get install -y gdb)';
  }
  if (process.getuid?.() !== 0) return 'attaching gdb to the server needs root';
  // Root is not enough where ptrace is switched off or the capability dropped (containers).
  const scope = readOr('/proc/sys/kernel/yama/ptrace_scope');
  if (scope?.trim() === '3') return 'ptrace is disabled (kernel.yama.ptrace_scope = 3)';
  const capEff = /^CapEff:\s*([0-9a-f]+)$/m.exec(readOr('/proc/self/status') ?? '')?.[1];
  if (capEff !== undefined && (BigInt(`0x${capEff}`) & (1n << CAP_SYS_PTRACE)) === 0n)
    return 'this process lacks CAP_SYS_PTRACE (a container without --cap-add SYS_PTRACE)';
  return null;
}

/** linux/capability.h */
const CAP_SYS_PTRACE = 19n;

function readOr(file: string): string | null {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

/** The gdb commands: one event line per call of a drop function, BufTableLookup, CacheInvalidateSmgr. */
function script(major: number): string {
  const fns = dropFunctions(major);
  return [
    'set pagination off',
    'set confirm off',
    'handle all nostop noprint pass',
    ...(
      [
        [fns.ALL, 'ALL'],
        [fns.ONE, 'ONE'],
        [fns.DB, 'DB'],
        ['BufTableLookup', 'L'],
        ['CacheInvalidateSmgr', 'C'],
      ] as const
    ).flatMap(([fn, tag]) => [
      `break ${fn}`,
      'commands',
      'silent',
      `printf "EV ${tag}\\n"`,
      'continue',
      'end',
    ]),
    'printf "EV READY\\n"',
    'continue',
  ].join('\n');
}

/** Parse gdb's event lines into drop calls (function names of `major`, default 15). */
export function parseDropEvents(text: string, major = 15): ObservedDrop[] {
  const FN = dropFunctions(major);
  const out: ObservedDrop[] = [];
  let cur: ObservedDrop | null = null;
  for (const line of text.split('\n')) {
    const m = /^EV (ALL|ONE|DB|L|C)$/.exec(line.trim());
    if (m === null) continue;
    const ev = m[1]!;
    if (ev === 'ALL' || ev === 'ONE' || ev === 'DB') {
      cur = { fn: FN[ev], lookups: 0, path: 'full-scan' };
      out.push(cur);
      if (ev === 'DB') cur = null;
    } else if (ev === 'L' && cur !== null) {
      cur.lookups += 1;
      cur.path = 'cached-lookup';
    } else if (ev === 'C') cur = null;
  }
  return out;
}

export interface DropTrace {
  /** Wait for the traced process to exit (the startup process ends at promotion) and parse. */
  finish(): Promise<ObservedDrop[]>;
  kill(): void;
}

/**
 * Attach gdb to `pid`, a startup process of PostgreSQL `major` (default 15); resolves once the
 * breakpoints are set and the process runs again. A breakpoint gdb cannot set (a function this
 * binary lacks) fails here, naming it.
 */
export async function traceDrops(pid: number, major = 15): Promise<DropTrace> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-gdb-'));
  const file = path.join(dir, 'drops.gdb');
  fs.writeFileSync(file, script(major) + '\n');
  let out = '';
  const child: ChildProcess = spawn('gdb', ['-p', String(pid), '-batch', '-x', file], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  await pollUntil(
    async () => out.includes('EV READY'),
    'gdb to attach to the startup process',
    60_000,
    50,
  );
  const missing = /Function "(\w+)" not defined/.exec(out);
  if (missing !== null) {
    child.kill('SIGKILL');
    throw new Error(`gdb: PostgreSQL ${major}'s startup process has no function ${missing[1]}`);
  }
  return {
    async finish() {
      await closed;
      fs.rmSync(dir, { recursive: true, force: true });
      return parseDropEvents(out, major);
    },
    kill() {
      child.kill('SIGKILL');
    },
  };
}
