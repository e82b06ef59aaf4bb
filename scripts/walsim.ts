/**
 * `walsim <command> …`: the installed command of the packed package (package.json of
 * `npm run package`'s output names this file's bundle as its `bin`). It dispatches to the same
 * CLIs `npm run exporter` and `npm run predict` run, with the command word removed from argv.
 */
import { runAsInstalled } from './cli/invocation.ts';
import { isCycleThread } from './exporter/thread-mark.ts';

const USAGE = `usage: walsim <command> [options]
  walsim exporter --standby URL --pgdata DIR [...]   Prometheus exporter of each standby's predicted time to writable
  walsim predict --standby URL [--pgdata DIR] [...]  how long a PostgreSQL 15 standby takes to accept writes if promoted now
  walsim <command> --help                            the command's options`;

const COMMANDS: Record<string, () => Promise<unknown>> = {
  exporter: () => import('./exporter.ts'),
  predict: () => import('./predict.ts'),
};

const command = process.argv[2];
if (isCycleThread()) {
  // The packed package is one file: the exporter's cycle thread runs this bundle too.
  await import('./exporter/cycle-worker.ts');
} else if (command === undefined || command === '--help' || command === '-h') {
  process.stdout.write(`${USAGE}\n`);
} else if (!Object.hasOwn(COMMANDS, command)) {
  process.stderr.write(`error: unknown command "${command}"\n${USAGE}\n`);
  process.exitCode = 2;
} else {
  process.argv.splice(2, 1);
  // The command's usage and hints then say `walsim exporter`, what the user typed.
  runAsInstalled('walsim');
  await COMMANDS[command]!();
}
