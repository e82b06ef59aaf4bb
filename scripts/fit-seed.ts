/**
 * `npm run fit-seed [-- --reuse-counts] [--out-profile FILE]`: compute walsim's exact failover counts
 * for every cell of seed 001's Test A and Test B in-process (the sweeps' model-only path), fit the
 * `seed-001` cost profile to the seed's figures by weighted NNLS, and print the fit, the
 * comparison per cell and the leave-one-size-out cross-validation as Markdown.
 *
 * Writes cost-model/profiles/seed-001.json (the profile) and
 * cost-model/fits/seed-001-cells.json (the cells with their counts, so the fit can be
 * redone and checked without recomputing them: `--reuse-counts`, and test/unit/seed-001-fit.test.ts).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { profileToJson, PROFILES_DIR } from '../cost-model/profile.ts';
import { parseCli, runCli, UsageError } from './cli/command.ts';
import {
  fitReportMarkdown,
  fitSeed001,
  SEED_CELLS_FILE,
  seedComparisonMarkdown,
  type CountedSeedCell,
} from './experiment/fit-seed-001.ts';
import { countCellsInProcess } from './experiment/in-process.ts';
import { seedCells } from './experiment/seed-001.ts';

const USAGE =
  'usage: npm run fit-seed -- [--reuse-counts] [--out-profile FILE] [--cells-file FILE]';

runCli(async () => {
  const { values, positionals } = parseCli(
    process.argv.slice(2),
    {
      'reuse-counts': { type: 'boolean', default: false },
      'out-profile': { type: 'string', default: path.join(PROFILES_DIR, 'seed-001.json') },
      'cells-file': { type: 'string', default: SEED_CELLS_FILE },
    },
    USAGE,
  );
  if (positionals.length > 0)
    throw new UsageError(`unexpected argument "${positionals[0]}"\n${USAGE}`);
  let cells: CountedSeedCell[];
  if (values['reuse-counts']) {
    cells = JSON.parse(fs.readFileSync(values['cells-file']!, 'utf8')) as CountedSeedCell[];
  } else {
    const seed = seedCells();
    const t0 = performance.now();
    const counts = await countCellsInProcess(
      seed.map((s) => s.cell),
      { thresholdDivisor: 32 },
    );
    console.error(
      `counted ${seed.length} cells in-process in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    cells = seed.map((s, i) => ({ ...s, counts: counts[i]! }));
    fs.mkdirSync(path.dirname(values['cells-file']!), { recursive: true });
    fs.writeFileSync(values['cells-file']!, JSON.stringify(cells, null, 1) + '\n');
  }
  const profile = fitSeed001(cells);
  fs.writeFileSync(values['out-profile']!, profileToJson(profile));
  console.log(seedComparisonMarkdown(cells, profile));
  console.log('');
  console.log(fitReportMarkdown(cells, profile));
  return 0;
}, USAGE);
