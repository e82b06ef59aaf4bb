/**
 * The installable package: `walsim` (scripts/walsim.ts) and everything it imports — walsim's
 * sources and its runtime dependencies (pg, prom-client, yaml, bcryptjs …) — bundled by esbuild
 * into one ESM file, beside the cost profiles, with a package.json whose only field of substance
 * is `bin`. No dependencies to install and no tsx at run time: Node 20 alone runs it. `npm pack`
 * in that directory makes the tarball.
 *
 * Entry points: `buildPackage`, `packPackage`.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { build, type Plugin } from 'esbuild';
import { PROJECT_ROOT } from '../../server/entry.ts';

/**
 * cost-model/profile.ts finds its profiles next to itself (`import.meta.dirname`); in the bundle
 * that is the package's directory, where the profiles are copied under cost-model/.
 */
// Spelled in pieces: the test suite's entry bundle rewrites that expression wherever it appears
// in a source file (server/entry-bundle.ts), this string included.
const META_DIRNAME = ['import', 'meta', 'dirname'].join('.');
const META_URL = ['import', 'meta', 'url'].join('.');

const profilesBesideBundle: Plugin = {
  name: 'profiles-beside-bundle',
  setup(b) {
    b.onLoad({ filter: /cost-model[\\/]profile\.ts$/ }, (args) => ({
      contents: fs
        .readFileSync(args.path, 'utf8')
        .replaceAll(META_DIRNAME, `(${META_DIRNAME} + '/cost-model')`),
      loader: 'ts',
    }));
  },
};

/** Build the package directory `outDir` (replaced whole); returns its package.json's version. */
export async function buildPackage(outDir: string): Promise<string> {
  const root = JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as {
    version: string;
    description: string;
    engines: Record<string, string>;
  };
  fs.rmSync(outDir, { recursive: true, force: true });
  fs.mkdirSync(path.join(outDir, 'cost-model'), { recursive: true });
  await build({
    entryPoints: [path.join(PROJECT_ROOT, 'scripts', 'walsim.ts')],
    outfile: path.join(outDir, 'walsim.mjs'),
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    // pg's optional native binding is loaded only when asked for (pg.native): never here.
    external: ['pg-native'],
    // CommonJS dependencies (pg) call require() on Node's built-ins.
    banner: {
      js: `#!/usr/bin/env node\nimport { createRequire as __walsimCreateRequire } from 'node:module';\nconst require = __walsimCreateRequire(${META_URL});`,
    },
    plugins: [profilesBesideBundle],
    logLevel: 'warning',
  });
  fs.chmodSync(path.join(outDir, 'walsim.mjs'), 0o755);
  fs.cpSync(
    path.join(PROJECT_ROOT, 'cost-model', 'profiles'),
    path.join(outDir, 'cost-model', 'profiles'),
    { recursive: true },
  );
  const pkg = {
    name: 'walsim',
    version: root.version,
    description: root.description,
    type: 'module',
    engines: root.engines,
    bin: { walsim: 'walsim.mjs' },
    files: ['walsim.mjs', 'cost-model/profiles/*.json', 'walsim-exporter.service'],
  };
  fs.writeFileSync(path.join(outDir, 'package.json'), JSON.stringify(pkg, null, 2) + '\n');
  fs.copyFileSync(
    path.join(PROJECT_ROOT, 'scripts', 'package', 'walsim-exporter.service'),
    path.join(outDir, 'walsim-exporter.service'),
  );
  return root.version;
}

/** `npm pack` of the built directory into `destDir`; returns the tarball's path. */
export function packPackage(pkgDir: string, destDir: string): string {
  fs.mkdirSync(destDir, { recursive: true });
  const out = execFileSync(
    'npm',
    ['pack', '--pack-destination', destDir, '--json', '--ignore-scripts'],
    { cwd: pkgDir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const [info] = JSON.parse(out) as Array<{ filename: string }>;
  return path.join(destDir, info!.filename);
}
