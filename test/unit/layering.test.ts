/**
 * The import rules of the architecture (house style), checked on the real import graph: every
 * source file parsed with TypeScript's own parser (test/helpers/import-graph.ts), imports resolved
 * to files, and the node core's runtime imports followed transitively — so a core file that reaches
 * node:fs through a server module is caught, which matching lines could not see.
 *
 * The rules: lower folders never import higher ones (FOLLOWS); the node core — everything a
 * simulated node runs — reaches no node:fs, ws, timers, performance or process/network module and
 * no production binding, directly or through what it imports (its clock, disk and dialer are
 * always passed in: server/README.md, "Injected dependencies"); only the node shell creates the
 * roles; the dashboard page imports its own folder and the wire types only; no import circles.
 * The last block proves the checks can fail: it injects each kind of forbidden import into an
 * overlay of the sources and expects it reported.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  closureOf,
  importCycles,
  readImportGraph,
  topFolder,
  withOverlay,
  type ImportGraph,
} from '../helpers/import-graph.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

/**
 * What each folder may import (type-only imports included: a type from a higher layer still ties
 * the layers together). Folders not listed (scripts/, test/) may import anything.
 */
const ENGINE = ['common', 'wal', 'storage'];
const ROLES_FLOOR = [...ENGINE, 'protocol', 'sql', 'lifecycle'];
const FOLLOWS: Record<string, readonly string[]> = {
  common: ['common'],
  wal: ['common', 'wal'],
  // PostgreSQL's own WAL, read from segment files: a floor beside wal/ (its LSNs, CRC-32C and
  // segment names), no sockets, no processes; nothing of walsim's engine or roles.
  'pg-wal': ['common', 'wal', 'pg-wal'],
  storage: ENGINE,
  // The cost model depends on counts only.
  'cost-model': [...ENGINE, 'cost-model'],
  protocol: [...ENGINE, 'protocol'],
  // SQL's home (lexer, parser, AST, function table): below the roles, which execute it.
  sql: ['common', 'protocol', 'sql'],
  // The lifecycle machine governs both roles and the stop: a floor below both, pure (xstate).
  lifecycle: ['common', 'protocol', 'lifecycle'],
  // The roles never import the shell, the CLIs, the simulator or each other; pricing happens at
  // the edges that show seconds (scripts/, dashboard/, the simulator's trace): the server serves
  // counts, so nothing of the node imports cost-model/.
  primary: [...ROLES_FLOOR, 'primary'],
  standby: [...ROLES_FLOOR, 'standby'],
  server: [...ROLES_FLOOR, 'primary', 'standby', 'server'],
  // Only scripts/ and tests import the simulator.
  sim: [...ROLES_FLOOR, 'cost-model', 'primary', 'standby', 'server', 'sim'],
};

/** The node shell: what both roles share (server/README.md, "Roles and the node shell"). */
const NODE_SHELL = [
  'server/node.ts',
  'server/startup-replay.ts',
  'server/node-faults.ts',
  'server/node-status.ts',
  'server/sql-read.ts',
  'server/checkpointer.ts',
  'server/timeline-switch.ts',
  'server/base-backup.ts',
  'server/start-replication.ts',
  'server/pg-promote.ts',
  'server/node-options.ts',
];

/** Folders whose every file is part of the node core. */
const CORE_FOLDERS = [
  'common',
  'wal',
  'storage',
  'protocol',
  'sql',
  'lifecycle',
  'primary',
  'standby',
];

/**
 * The production bindings (server/main.ts and the CLIs bind them): the only files in the core's
 * folders that touch node:fs or Node's clock and timers; the core never imports them.
 */
const BINDINGS = new Set(['common/node-disk.ts', 'common/system-clock.ts']);

/**
 * Allowed inside the core, with the reason: `storage/drop.ts` measures busy time inside drops with
 * performance.now (a benchmark figure, reported and never fed back into what the node does).
 */
const CORE_EXCEPTIONS: Record<string, RegExp> = {
  'storage/drop.ts': /^performance$/,
};

/** Modules that bypass the injected clock, disk and transport, or start processes and sockets. */
const NONDETERMINISTIC_MODULE =
  /^(node:)?(fs|fs\/promises|timers|timers\/promises|perf_hooks|net|http|https|http2|dgram|child_process|worker_threads|cluster)$|^ws$/;

function coreRoots(graph: ImportGraph): string[] {
  return [
    ...[...graph.keys()].filter((f) => CORE_FOLDERS.includes(topFolder(f)) && !BINDINGS.has(f)),
    ...NODE_SHELL,
  ].filter((f) => graph.has(f));
}

/** Core files that reach a forbidden module, a binding or a nondeterministic global. */
function coreViolations(graph: ImportGraph): string[] {
  const bad: string[] = [];
  for (const [file, chain] of closureOf(graph, coreRoots(graph))) {
    const via = chain.join(' -> ');
    const allowed = CORE_EXCEPTIONS[file];
    if (BINDINGS.has(file)) bad.push(`${via}: the core imports a production binding`);
    for (const e of graph.get(file)!.imports)
      if (!e.typeOnly && NONDETERMINISTIC_MODULE.test(e.spec) && !allowed?.test(e.spec))
        bad.push(`${via} -> ${e.spec} (line ${e.line})`);
    for (const g of graph.get(file)!.globals)
      if (!allowed?.test(g.what)) bad.push(`${via}:${g.line} uses ${g.what} (use the Clock)`);
  }
  return bad;
}

/** pg-wal/ reads files and nothing else: no socket, process or driver module, through any import. */
const SOCKET_OR_PROCESS =
  /^(node:)?(net|http|https|http2|dgram|child_process|worker_threads|cluster)$|^(ws|pg)$/;
/** The one thread pg-wal/ starts: the CRC-32C worker, in the file that owns the shared memory. */
const PG_WAL_THREAD = { file: 'pg-wal/scan-wasm.ts', spec: 'node:worker_threads' };

function pgWalViolations(graph: ImportGraph): string[] {
  const roots = [...graph.keys()].filter((f) => topFolder(f) === 'pg-wal');
  const bad: string[] = [];
  for (const [file, chain] of closureOf(graph, roots))
    for (const e of graph.get(file)!.imports)
      if (!e.typeOnly && SOCKET_OR_PROCESS.test(e.spec))
        if (!(file === PG_WAL_THREAD.file && e.spec === PG_WAL_THREAD.spec))
          bad.push(`${chain.join(' -> ')} -> ${e.spec} (line ${e.line})`);
  return bad;
}

/** Imports that go against FOLLOWS. */
function folderViolations(graph: ImportGraph): string[] {
  const bad: string[] = [];
  for (const [file, src] of graph) {
    const may = FOLLOWS[topFolder(file)];
    if (may === undefined) continue;
    for (const e of src.imports)
      if (e.target !== null && !may.includes(topFolder(e.target)))
        bad.push(`${file}:${e.line} -> ${e.spec}`);
  }
  return bad;
}

/** Imports of a role module (the lifecycle machine's actions create them) from anywhere but node.ts. */
function roleCreators(graph: ImportGraph): string[] {
  const bad: string[] = [];
  for (const [file, src] of graph) {
    if (file === 'server/node.ts' || topFolder(file) === 'test') continue;
    for (const e of src.imports)
      if (e.target !== null && /\/(primary|standby)-role\.ts$/.test(e.target))
        bad.push(`${file}:${e.line} -> ${e.spec}`);
  }
  return bad;
}

/**
 * The dashboard page (dashboard/page/, bundled for the browser): it may import its own folder, the
 * wire format the server speaks (dashboard/wire.ts, types only) and uPlot's types (the library is
 * a global of the page); nothing of the server, the CLIs (scripts/) or the simulator, not even a
 * type. wire.ts itself imports nothing, so what the page sees of the server stays that one file.
 */
const PAGE = 'dashboard/page/';
const PAGE_TYPES = new Set(['dashboard/wire.ts']);
const PAGE_PACKAGE_TYPES = /^uplot$/;

function pageViolations(graph: ImportGraph): string[] {
  const bad: string[] = [];
  for (const [file, src] of graph) {
    if (PAGE_TYPES.has(file))
      for (const e of src.imports)
        bad.push(`${file}:${e.line} -> ${e.spec} (wire.ts imports nothing)`);
    if (!file.startsWith(PAGE)) continue;
    for (const e of src.imports) {
      if (e.target !== null && e.target.startsWith(PAGE)) continue;
      const allowed =
        e.target === null ? PAGE_PACKAGE_TYPES.test(e.spec) : PAGE_TYPES.has(e.target);
      if (!allowed || !e.typeOnly) bad.push(`${file}:${e.line} -> ${e.spec}`);
    }
  }
  return bad;
}

const graph = readImportGraph(ROOT);

describe('layering', () => {
  it('each folder imports only the folders below it', () => {
    expect(folderViolations(graph)).toEqual([]);
  });

  it('the node core reaches no node:fs, ws, timers, performance or production binding, through any import', () => {
    expect(coreViolations(graph)).toEqual([]);
  });

  it('the node core is what the README says: the shell reaches the roles, the engine and nothing of the process', () => {
    const reached = [...closureOf(graph, NODE_SHELL).keys()];
    expect(reached).toContain('primary/primary-role.ts');
    expect(reached).toContain('standby/standby-role.ts');
    expect(reached.filter((f) => /^server\/(main|ws-|control-|pg-wire|pg-ctl)/.test(f))).toEqual(
      [],
    );
  });

  it('pg-wal/ reaches no socket, process or driver module, through any import', () => {
    expect([...graph.keys()].some((f) => topFolder(f) === 'pg-wal')).toBe(true);
    expect(pgWalViolations(graph)).toEqual([]);
  });

  it("only the node shell creates the roles (the lifecycle machine's actions), never the process or CLIs", () => {
    expect(roleCreators(graph)).toEqual([]);
  });

  it('the dashboard page imports its own folder, the wire types and uPlot types only', () => {
    expect([...graph.keys()].filter((f) => f.startsWith(PAGE)).length).toBeGreaterThan(5);
    expect(pageViolations(graph)).toEqual([]);
  });

  it('no import circles anywhere (type-only imports included)', () => {
    expect(importCycles(graph)).toEqual([]);
  });
});

describe('layering: the checks catch what they are for', () => {
  /** The sources with `prepend` injected at the top of `file` (nothing on disk changes). */
  const withFile = (file: string, prepend: string): ImportGraph => {
    expect(graph.has(file)).toBe(true);
    return withOverlay(graph, { [file]: prepend + fs.readFileSync(path.join(ROOT, file), 'utf8') });
  };

  it('a core file importing node:fs', () => {
    const g = withFile('wal/lsn.ts', "import * as fs from 'node:fs';\nvoid fs;\n");
    expect(coreViolations(g)).toContain('wal/lsn.ts -> node:fs (line 1)');
  });

  it('a core file reaching node:fs through a server module (transitively)', () => {
    const g = withFile(
      'server/node-status.ts',
      "import { readToken } from './cluster-files.ts';\nvoid readToken;\n",
    );
    // The line of cluster-files.ts's own node:fs import, read from the file (it moves as the file changes).
    const fsLine =
      fs
        .readFileSync(path.join(ROOT, 'server/cluster-files.ts'), 'utf8')
        .split('\n')
        .findIndex((l) => /from 'node:fs'/.test(l)) + 1;
    expect(fsLine).toBeGreaterThan(0);
    expect(coreViolations(g)).toContain(
      `server/node-status.ts -> server/cluster-files.ts -> node:fs (line ${fsLine})`,
    );
  });

  it('a core file importing ws, or node:timers, or using setTimeout and performance', () => {
    const g = withFile(
      'standby/startup.ts',
      "import { WebSocket } from 'ws';\nimport { setTimeout as t } from 'node:timers';\nvoid WebSocket; void t;\nsetTimeout(() => {}, 1); performance.now();\n",
    );
    const bad = coreViolations(g);
    expect(bad).toContain('standby/startup.ts -> ws (line 1)');
    expect(bad).toContain('standby/startup.ts -> node:timers (line 2)');
    expect(bad).toContain('standby/startup.ts:4 uses setTimeout (use the Clock)');
    expect(bad).toContain('standby/startup.ts:4 uses performance (use the Clock)');
  });

  it('a core file falling back to a production binding', () => {
    const g = withFile(
      'primary/syncrep.ts',
      "import { systemClock } from '../common/system-clock.ts';\nvoid systemClock;\n",
    );
    expect(coreViolations(g)).toContain(
      'primary/syncrep.ts -> common/system-clock.ts: the core imports a production binding',
    );
  });

  it('a role importing the server shell (even a type)', () => {
    const g = withFile(
      'standby/walreceiver.ts',
      "import type { ServerNode } from '../server/node.ts';\n",
    );
    expect(folderViolations(g)).toContain('standby/walreceiver.ts:1 -> ../server/node.ts');
    const p = withFile(
      'primary/walsender.ts',
      "import { WalReceiver } from '../standby/walreceiver.ts';\nvoid WalReceiver;\n",
    );
    expect(folderViolations(p)).toContain('primary/walsender.ts:1 -> ../standby/walreceiver.ts');
  });

  it('pg-wal/ importing a process module, or a higher folder', () => {
    const g = withFile(
      'pg-wal/reader.ts',
      "import { spawn } from 'node:child_process';\nimport type { WalReceiver } from '../standby/walreceiver.ts';\nvoid spawn;\n",
    );
    expect(pgWalViolations(g)).toContain('pg-wal/reader.ts -> node:child_process (line 1)');
    expect(folderViolations(g)).toContain('pg-wal/reader.ts:2 -> ../standby/walreceiver.ts');
    // The CRC worker's thread is allowed in scan-wasm.ts only.
    const t = withFile(
      'pg-wal/reader.ts',
      "import { Worker } from 'node:worker_threads';\nvoid Worker;\n",
    );
    expect(pgWalViolations(t)).toContain('pg-wal/reader.ts -> node:worker_threads (line 1)');
  });

  it('the dashboard page importing scripts/ (even a type), the server, or code at run time', () => {
    const g = withFile(
      'dashboard/page/results.ts',
      "import type { CellSummary } from '../../scripts/report/records.ts';\n" +
        "import { loadProfile } from '../../cost-model/profile.ts';\n" +
        "import type { NodeView } from '../view.ts';\n" +
        "import uPlot from 'uplot';\n",
    );
    expect(pageViolations(g)).toEqual([
      'dashboard/page/results.ts:1 -> ../../scripts/report/records.ts',
      'dashboard/page/results.ts:2 -> ../../cost-model/profile.ts',
      'dashboard/page/results.ts:3 -> ../view.ts',
      'dashboard/page/results.ts:4 -> uplot',
    ]);
    const w = withFile(
      'dashboard/wire.ts',
      "import type { Priced } from '../cost-model/price.ts';\n",
    );
    expect(pageViolations(w)).toEqual([
      'dashboard/wire.ts:1 -> ../cost-model/price.ts (wire.ts imports nothing)',
    ]);
  });

  it('comments and strings are not imports or calls', () => {
    const g = withFile(
      'wal/lsn.ts',
      "// import * as fs from 'node:fs'; setTimeout(f, 1)\nconst s = \"Date.now() from 'ws'\";\nvoid s;\n",
    );
    expect(coreViolations(g)).toEqual([]);
  });

  it('an import circle', () => {
    const g = withFile('server/node-faults.ts', "import type { ServerNode } from './node.ts';\n");
    expect(importCycles(g, (f) => topFolder(f) === 'server')).toContainEqual(
      expect.arrayContaining(['server/node-faults.ts', 'server/node.ts']),
    );
  });
});
