/**
 * `npm run workload -- --seed N`: print the backlog the workload generator draws from seed N as the
 * SQL it runs (scripts/generator/README.md): the setup, where the standby restarts and where its
 * replay pauses, then the statements a promotion replays. `--json`: the drawn backlog as one object
 * (relations, statements, history, kinds drawn) as the last line.
 */
import {
  parseCli,
  nonNegativeInt,
  positiveInt,
  printJson,
  runCli,
  UsageError,
} from './cli/command.ts';
import { parseSharedBuffers } from '../storage/shared-buffers.ts';
import {
  generateBacklog,
  machineGeneratorLimits,
  renderBacklogSql,
  type GeneratorLimits,
} from './generator/backlog.ts';

const USAGE = `usage: npm run workload -- --seed N [--shared-buffers SIZE] [--max-shared-buffers SIZE]
                          [--max-locks 10000] [--max-pages 16384] [--json]
  Prints the backlog seed N draws as the SQL it runs. The pool is drawn from 128MB–20GB, at most
  the largest this machine can start (--max-shared-buffers overrides it; a larger draw is drawn
  again); --shared-buffers fixes the pool (relation sizes follow it). --max-locks: relation locks
  one transaction may hold (max_locks_per_transaction); --max-pages: heap pages the setup and the
  backlog may write.`;

const OPTIONS = {
  seed: { type: 'string' },
  'shared-buffers': { type: 'string' },
  'max-shared-buffers': { type: 'string' },
  'max-locks': { type: 'string' },
  'max-pages': { type: 'string' },
  json: { type: 'boolean', default: false },
} as const;

/** The limits: this machine's, with the options' overrides (each checked). */
function limitsOf(values: ReturnType<typeof parseCli<typeof OPTIONS>>['values']): GeneratorLimits {
  const size = (text: string, what: string) => {
    try {
      parseSharedBuffers(text);
    } catch (e) {
      throw new UsageError(`--${what}: ${(e as Error).message}`);
    }
    return text;
  };
  const base = machineGeneratorLimits();
  return {
    ...base,
    ...(values['max-shared-buffers'] !== undefined
      ? { maxSharedBuffers: size(values['max-shared-buffers'], 'max-shared-buffers') }
      : {}),
    ...(values['max-locks'] !== undefined
      ? { maxLocksPerTransaction: positiveInt(values['max-locks'], 'max-locks') }
      : {}),
    ...(values['max-pages'] !== undefined
      ? { maxPages: positiveInt(values['max-pages'], 'max-pages') }
      : {}),
  };
}

runCli(async () => {
  const { values, positionals } = parseCli(process.argv.slice(2), OPTIONS, USAGE);
  if (positionals.length > 0)
    throw new UsageError(`unexpected argument "${positionals[0]}"\n${USAGE}`);
  if (values.seed === undefined) throw new UsageError(`--seed is required\n${USAGE}`);
  const seed = nonNegativeInt(values.seed, 'seed');
  const limits = limitsOf(values);
  if (values['shared-buffers'] !== undefined) {
    const p = parseSharedBuffers(values['shared-buffers']).nBuffers;
    if (p > parseSharedBuffers(limits.maxSharedBuffers).nBuffers)
      throw new UsageError(
        `--shared-buffers ${values['shared-buffers']} is above the largest pool this machine starts (${limits.maxSharedBuffers})`,
      );
  }
  const b = generateBacklog(seed, limits, values['shared-buffers']);
  if (values.json) printJson(b);
  else process.stdout.write(renderBacklogSql(b));
  return 0;
}, USAGE);
