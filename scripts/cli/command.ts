/**
 * Shared plumbing of the user-facing CLIs: argument parsing with one-line errors, the cluster
 * directory option, and connecting to a node's control endpoint.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import * as path from 'node:path';
import { isWalsimError } from '../../common/errors.ts';
import { interrupted } from './interrupt.ts';
import { exitWhenFlushed } from '../../server/process-exit.ts';
import { ControlClient, ControlError } from '../../server/control-client.ts';
import {
  isWalsimServer,
  nodeDir,
  readNodeConfig,
  readPidFile,
  readToken,
  type NodeName,
} from '../../server/cluster-files.ts';

export const DEFAULT_CLUSTER_DIR = '.walsim';

export class UsageError extends Error {}

export function parseCli<T extends NonNullable<ParseArgsConfig['options']>>(
  argv: string[],
  options: T,
  usage: string,
) {
  try {
    return parseArgs({
      args: negativeValuesJoined(argv, options),
      options,
      allowPositionals: true,
      strict: true,
    });
  } catch (e) {
    throw new UsageError(`${(e as Error).message.split('\n')[0]}\n${usage}`);
  }
}

/**
 * `--standbys -1` → `--standbys=-1`: node:util's parseArgs takes a value that starts with "-" for
 * an option ("argument is ambiguous"), so a negative number would never reach the option's own
 * check and its clear message ("must be an integer from 0 to 16, got \"-1\"").
 */
function negativeValuesJoined(
  argv: string[],
  options: NonNullable<ParseArgsConfig['options']>,
): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const next = argv[i + 1];
    const name = a.startsWith('--') && !a.includes('=') ? a.slice(2) : null;
    if (
      name !== null &&
      options[name]?.type === 'string' &&
      next !== undefined &&
      /^-\d/.test(next)
    ) {
      out.push(`${a}=${next}`);
      i++;
    } else out.push(a);
  }
  return out;
}

/** File-system errors a user causes (a --dir that is a file, read-only, busy): no stack needed. */
const USER_ERRNO = new Set([
  'ENOTDIR',
  'EACCES',
  'EPERM',
  'EROFS',
  'ENOSPC',
  'EEXIST',
  'ENOTEMPTY',
  'EISDIR',
  'ENOENT',
  'EADDRINUSE',
]);

/**
 * `--help` or `-h` anywhere in `argv`: print `usage` on stdout and exit 0 (the returned promise
 * then never resolves, so `await` it before doing anything else).
 */
export async function exitWithUsageIfHelp(argv: readonly string[], usage: string): Promise<void> {
  if (argv.some((a) => a === '--help' || a === '-h')) {
    process.stdout.write(`${usage}\n`);
    await exitWhenFlushed(0);
  }
}

/** Print a CLI's failure as one line (a stack only for what is not the user's doing). */
function printFailure(e: unknown): void {
  if (e instanceof UsageError) console.error(`error: ${e.message}`);
  else if (e instanceof ControlError)
    console.error(`ERROR:  ${e.message}${e.detail === undefined ? '' : `\nDETAIL:  ${e.detail}`}`);
  else if (isWalsimError(e)) console.error(`error: ${e.message}`);
  else if (USER_ERRNO.has((e as NodeJS.ErrnoException)?.code ?? ''))
    console.error(`error: ${(e as Error).message}`);
  else console.error(`error: ${(e as Error)?.stack ?? String(e)}`);
}

/**
 * Run a CLI main: print a one-line error and exit non-zero on failure. With `usage`, `--help`/`-h`
 * prints it and exits 0 before anything else runs. Every exit waits until stdout and stderr are
 * flushed (server/process-exit.ts): a `--json` piped into a slow reader arrives whole.
 */
export function runCli(main: () => Promise<number | void>, usage?: string): void {
  void (async () => {
    if (usage !== undefined) await exitWithUsageIfHelp(process.argv.slice(2), usage);
    let code: number;
    try {
      code = (await main()) ?? 0;
    } catch (e) {
      if (interrupted()) return; // the run failed because the clean-up stopped its servers
      printFailure(e);
      code = e instanceof UsageError ? 2 : 1;
    }
    // After Ctrl-C the clean-up in interrupt.ts exits 130 once the clusters are stopped.
    if (!interrupted()) await exitWhenFlushed(code);
  })();
}

export function clusterDirOf(dir: string | undefined): string {
  return path.resolve(dir ?? DEFAULT_CLUSTER_DIR);
}

/** Connect to a running node of the cluster, with a clear error when it is not running. */
export async function connectNode(clusterDir: string, name: NodeName): Promise<ControlClient> {
  const config = readNodeConfig(clusterDir, name);
  const dataDir = nodeDir(clusterDir, name);
  const pid = readPidFile(dataDir);
  if (pid === null || !isWalsimServer(pid.pid, dataDir)) {
    throw new UsageError(
      `node "${name}" of the cluster at ${clusterDir} is not running; start it with "npm run cluster -- start --dir ${clusterDir}"`,
    );
  }
  return ControlClient.connect(
    config.listen === '0.0.0.0' ? '127.0.0.1' : config.listen,
    pid.port,
    readToken(clusterDir),
  );
}

/**
 * The command of a multi-command CLI and the rest of its arguments, options given before the
 * command included: `cluster --dir D stop` is `cluster stop --dir D`, as `git -C D status` and
 * `pg_ctl -D D stop`. The command is the first argument that is neither an option nor an option's
 * value; every option takes a value (the next argument, or `--name=value`) except those in
 * `flags`, so `--dir stop stop` stops the cluster in a directory named "stop".
 */
export function splitCommand(
  argv: readonly string[],
  flags: ReadonlySet<string>,
): { cmd: string | undefined; rest: string[] } {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') break;
    if (!a.startsWith('-') || a === '-') return { cmd: a, rest: argv.filter((_, j) => j !== i) };
    const name = a.replace(/^--?/, '');
    if (!a.includes('=') && !flags.has(name)) i++; // its value
  }
  return { cmd: undefined, rest: [...argv] };
}

/** Print `value` as the last line of stdout (the --json contract). */
export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value) + '\n');
}

/** A comma-separated option value (`--what a,b`): at least one item. */
export function list(text: string, what: string): string[] {
  const items = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  if (items.length === 0) throw new UsageError(`--${what} needs at least one value`);
  return items;
}

/** An option value that must be a positive integer. */
export function positiveInt(text: string, what: string): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 1)
    throw new UsageError(`--${what} must be a positive integer, got "${text}"`);
  return n;
}

/** `--what N` with N ≥ 0. */
export function nonNegativeInt(text: string, what: string): number {
  const n = Number(text);
  if (text.trim() === '' || !Number.isSafeInteger(n) || n < 0)
    throw new UsageError(`--${what} must be a non-negative integer, got "${text}"`);
  return n;
}
