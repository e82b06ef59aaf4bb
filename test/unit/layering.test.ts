/**
 * The import rules of the architecture (house style): wal/ and storage/ know nothing of the server
 * roles, the process shell or the CLIs, and use no sockets, timers or child processes; the roles
 * never import each other. Method: scan every source file's import specifiers.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  return fs
    .readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join(dir, f));
}

function importsOf(file: string): string[] {
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
  return [...text.matchAll(/^\s*(?:import|export)[^'"]*from\s+['"]([^'"]+)['"]/gm)].map(
    (m) => m[1]!,
  );
}

function topFolderOf(file: string, spec: string): string | null {
  if (!spec.startsWith('.')) return null;
  return path.relative(ROOT, path.resolve(ROOT, path.dirname(file), spec)).split(path.sep)[0]!;
}

/** The node shell: what both roles share (server/README.md, "Roles and the node shell"). */
const NODE_SHELL = [
  'server/node.ts',
  'server/startup-replay.ts',
  'server/node-faults.ts',
  'server/node-status.ts',
  'server/sql-functions.ts',
  'server/checkpointer.ts',
];

/** Source files of the node core: everything a simulated node runs. */
function coreSources(): string[] {
  return (
    [
      ...sources('wal'),
      ...sources('storage'),
      ...sources('primary'),
      ...sources('standby'),
      ...sources('protocol'),
      ...NODE_SHELL,
    ]
      // A benchmark entry point: not state the node writes or times it keeps.
      .filter((f) => !f.endsWith('bench-codec.ts'))
  );
}

/** Calls and imports that bypass the injected clock, timers, disk and transport. */
const NONDETERMINISM: Array<[RegExp, string]> = [
  [/\bDate\.now\(|new Date\(\)/, 'the wall clock (use Clock.now)'],
  [
    /(?<![.\w])(setTimeout|setInterval|setImmediate|clearTimeout|clearInterval)\(/,
    'timers (use Clock)',
  ],
  [/\bMath\.random\(/, 'Math.random (use a seeded PRNG)'],
  [/from\s+['"](node:)?fs['"]/, 'node:fs (use Disk)'],
  [/from\s+['"]ws['"]/, 'ws (use MessageConn / Dialer)'],
  [/from\s+['"](node:)?timers(\/promises)?['"]/, 'node:timers (use Clock)'],
];

describe('layering', () => {
  it('the node core uses only the injected clock, timers, disk and transport', () => {
    const bad: string[] = [];
    for (const file of coreSources()) {
      const lines = fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n');
      lines.forEach((line, i) => {
        if (/^\s*(\*|\/\/|\/\*)/.test(line)) return; // comments
        for (const [re, what] of NONDETERMINISM)
          if (re.test(line)) bad.push(`${file}:${i + 1} uses ${what}`);
        // performance.now is allowed only to measure busy time inside drops (a benchmark figure).
        if (/performance\.now\(/.test(line) && file !== 'storage/drop.ts')
          bad.push(`${file}:${i + 1} uses performance.now (use Clock.monoMs)`);
      });
    }
    expect(bad).toEqual([]);
  });

  it('only scripts/ and tests import the simulator (sim/)', () => {
    const bad: string[] = [];
    for (const dir of ['common', 'wal', 'storage', 'cost-model', 'primary', 'standby', 'server']) {
      for (const file of sources(dir))
        for (const spec of importsOf(file))
          if (topFolderOf(file, spec) === 'sim') bad.push(`${file} -> ${spec}`);
    }
    expect(bad).toEqual([]);
  });

  it('common/ imports nothing of walsim but common/', () => {
    const bad: string[] = [];
    for (const file of sources('common')) {
      for (const spec of importsOf(file)) {
        const top = topFolderOf(file, spec);
        if (top !== null && top !== 'common') bad.push(`${file} -> ${spec}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('wal/ and storage/ import only common/, wal/, storage/ and no process or network modules', () => {
    const bad: string[] = [];
    for (const file of [...sources('wal'), ...sources('storage')]) {
      for (const spec of importsOf(file)) {
        const top = topFolderOf(file, spec);
        if (top !== null && !['common', 'wal', 'storage'].includes(top))
          bad.push(`${file} -> ${spec}`);
        if (
          /^(node:)?(net|http|https|child_process|worker_threads|timers)(\/|$)/.test(spec) ||
          spec === 'ws'
        )
          bad.push(`${file} -> ${spec}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('cost-model/ depends on counts only: it imports only common/, wal/ and storage/', () => {
    const bad: string[] = [];
    for (const file of sources('cost-model')) {
      for (const spec of importsOf(file)) {
        const top = topFolderOf(file, spec);
        if (top !== null && !['common', 'wal', 'storage', 'cost-model'].includes(top))
          bad.push(`${file} -> ${spec}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('pricing happens at the edges: below server/ nothing imports cost-model/', () => {
    const bad: string[] = [];
    for (const dir of ['common', 'wal', 'storage', 'protocol', 'primary', 'standby']) {
      for (const file of sources(dir))
        for (const spec of importsOf(file))
          if (topFolderOf(file, spec) === 'cost-model') bad.push(`${file} -> ${spec}`);
    }
    expect(bad).toEqual([]);
  });

  it('protocol/ imports only common/, wal/ and storage/', () => {
    const bad: string[] = [];
    for (const file of sources('protocol')) {
      for (const spec of importsOf(file)) {
        const top = topFolderOf(file, spec);
        if (top !== null && !['common', 'wal', 'storage', 'protocol'].includes(top))
          bad.push(`${file} -> ${spec}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('the roles (primary/, standby/) never import the server shell, the CLIs or the simulator', () => {
    const bad: string[] = [];
    for (const file of [...sources('primary'), ...sources('standby')]) {
      for (const spec of importsOf(file)) {
        const top = topFolderOf(file, spec);
        if (top === 'server' || top === 'scripts' || top === 'sim') bad.push(`${file} -> ${spec}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('the SQL read functions take a narrow view of the node, not the node (no import circle)', () => {
    expect(importsOf('server/sql-functions.ts').filter((s) => s.endsWith('/node.ts'))).toEqual([]);
  });

  it("only the node shell creates the roles (the lifecycle machine's actions), never the process or CLIs", () => {
    const bad: string[] = [];
    for (const dir of [
      'common',
      'wal',
      'storage',
      'protocol',
      'primary',
      'standby',
      'server',
      'scripts',
      'sim',
    ]) {
      for (const file of sources(dir)) {
        for (const spec of importsOf(file)) {
          if (!/\/(primary|standby)-role\.ts$/.test(spec) || file === 'server/node.ts') continue;
          bad.push(`${file} -> ${spec}`);
        }
      }
    }
    expect(bad).toEqual([]);
  });

  it('primary/ and standby/ do not import each other', () => {
    const bad: string[] = [];
    for (const [from, forbidden] of [
      ['primary', 'standby'],
      ['standby', 'primary'],
    ] as const) {
      for (const file of sources(from)) {
        for (const spec of importsOf(file))
          if (topFolderOf(file, spec) === forbidden) bad.push(`${file} -> ${spec}`);
      }
    }
    expect(bad).toEqual([]);
  });
});
