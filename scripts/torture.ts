/**
 * `npm run torture -- --seeds N [--from S] [--ops M] [--json] [--keep]`: seeded randomized fault
 * scenarios on real processes (scripts/torture/scenario.ts): per seed a random workload with
 * random faults and a final crash + promotion, then the invariants. A failing seed prints the
 * command that re-runs it (same workload, faults and choices; real process timing, so the
 * interleaving of WAL messages can differ); `--json` prints one object as the last line of stdout with seeds,
 * faults (injected), acked (commits acknowledged) and lost (acknowledged commits missing).
 */
import { parseCli, printJson, runCli, UsageError } from './cli/command.ts';
import { runSeed, type SeedResult } from './torture/scenario.ts';

const USAGE =
  'usage: npm run torture -- --seeds N [--from S] [--ops 40] [--json] [--keep] [--quiet]';

function positiveInt(text: string | undefined, what: string, min: number): number {
  const n = Number(text);
  if (text === undefined || !Number.isSafeInteger(n) || n < min)
    throw new UsageError(`--${what} must be an integer >= ${min}, got "${text ?? ''}"\n${USAGE}`);
  return n;
}

runCli(async () => {
  const { values, positionals } = parseCli(
    process.argv.slice(2),
    {
      seeds: { type: 'string' },
      from: { type: 'string', default: '1' },
      ops: { type: 'string', default: '40' },
      json: { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      quiet: { type: 'boolean', default: false },
    },
    USAGE,
  );
  if (positionals.length > 0)
    throw new UsageError(`unexpected argument "${positionals[0]}"\n${USAGE}`);
  const seeds = positiveInt(values.seeds, 'seeds', 1);
  const from = positiveInt(values.from, 'from', 0);
  const ops = positiveInt(values.ops, 'ops', 1);
  const log = (line: string) => {
    if (!values.quiet) process.stderr.write(line + '\n');
  };
  const results: SeedResult[] = [];
  const started = Date.now();
  for (let seed = from; seed < from + seeds; seed++) {
    const r = await runSeed({ seed, ops, keep: values.keep!, log });
    results.push(r);
    const faults = Object.values(r.faults).reduce((a, b) => a + b, 0);
    if (r.ok)
      console.log(
        `seed ${seed}: ok (${r.level}; ${faults} faults; ${r.acked} commits acknowledged, ${r.lost} lost)`,
      );
    else {
      console.log(`seed ${seed}: FAILED (${r.level}): ${r.error}`);
      console.log(
        `  replay: npm run torture -- --seeds 1 --from ${seed} --ops ${ops}${r.dir ? `  (cluster kept in ${r.dir})` : ' --keep'}`,
      );
    }
  }
  const sum = (f: (r: SeedResult) => number) => results.reduce((a, r) => a + f(r), 0);
  const faultsByKind: Record<string, number> = {};
  for (const r of results)
    for (const [k, v] of Object.entries(r.faults)) faultsByKind[k] = (faultsByKind[k] ?? 0) + v;
  const failed = results
    .filter((r) => !r.ok)
    .map((r) => ({
      seed: r.seed,
      error: r.error,
      replay: `npm run torture -- --seeds 1 --from ${r.seed} --ops ${ops}`,
    }));
  const summary = {
    seeds: results.length,
    from,
    ops,
    faults: sum((r) => Object.values(r.faults).reduce((a, b) => a + b, 0)),
    faultsByKind,
    acked: sum((r) => r.acked),
    lost: sum((r) => r.lost),
    failed,
    seconds: Math.round((Date.now() - started) / 1000),
  };
  if (values.json) printJson(summary);
  else
    console.log(
      `${summary.seeds} seeds, ${summary.faults} faults, ${summary.acked} commits acknowledged, ${summary.lost} lost, ${failed.length} failed`,
    );
  return failed.length === 0 ? 0 : 1;
}, USAGE);
