/**
 * `npm run package [-- --out DIR]`: build the installable `walsim` package (scripts/package/) and
 * `npm pack` it; prints the tarball's path. Install it where the standby runs with
 * `npm install -g walsim-<version>.tgz` (Node 20, nothing else), then `walsim exporter …`.
 */
import * as path from 'node:path';
import { parseCli, runCli } from './cli/command.ts';
import { buildPackage, packPackage } from './package/build.ts';

const USAGE = `usage: npm run package [-- --out DIR]
  --out DIR   where the package directory (DIR/package) and the tarball go (default dist)`;

async function main(): Promise<number> {
  const { values } = parseCli(process.argv.slice(2), { out: { type: 'string' } }, USAGE);
  const out = path.resolve(values.out ?? 'dist');
  const pkgDir = path.join(out, 'package');
  await buildPackage(pkgDir);
  console.log(packPackage(pkgDir, out));
  return 0;
}

runCli(main, USAGE);
