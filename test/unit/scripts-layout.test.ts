/**
 * The rule of scripts/ a newcomer can see (scripts/README.md, "Layout"): its top level holds
 * exactly one file per npm command, the entry file package.json runs; everything else lives in a
 * room (a subfolder) named for what it is; no two files share a name; the rooms import each other
 * without a circle, so each can be read knowing only the rooms below it. Checked on the real
 * import graph (test/helpers/import-graph.ts), type-only imports included. The last block proves
 * the checks can fail.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  importCycles,
  readImportGraph,
  withOverlay,
  type ImportGraph,
} from '../helpers/import-graph.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

const graph = readImportGraph(ROOT);
const packageScripts = (
  JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  }
).scripts;

/** The scripts/ files the npm commands run (`tsx scripts/X.ts …`), repository-relative. */
function commandEntries(scripts: Record<string, string>): Set<string> {
  const out = new Set<string>();
  for (const line of Object.values(scripts))
    for (const m of line.matchAll(/\b(scripts\/[^\s'"]+\.ts)\b/g)) out.add(m[1]!);
  return out;
}

/** Source files of scripts/ (the import graph's view: .ts, .mts, .js …). */
function scriptFiles(g: ImportGraph): string[] {
  return [...g.keys()].filter((f) => f.startsWith('scripts/'));
}

/** Top-level scripts/ files that no npm command runs, and commands whose file is not there. */
function topLevelMismatch(g: ImportGraph, scripts: Record<string, string>): string[] {
  const top = new Set(scriptFiles(g).filter((f) => f.split('/').length === 2));
  const entries = commandEntries(scripts);
  return [
    ...[...top].filter((f) => !entries.has(f)).map((f) => `${f}: not an npm command's entry`),
    ...[...entries].filter((f) => !top.has(f)).map((f) => `${f}: an npm command's missing entry`),
  ].sort();
}

/** Basenames held by more than one scripts/ file, each with its files. */
function duplicateNames(g: ImportGraph): string[] {
  const byName = new Map<string, string[]>();
  for (const f of scriptFiles(g)) {
    const name = path.basename(f);
    byName.set(name, [...(byName.get(name) ?? []), f]);
  }
  return [...byName.values()].filter((fs) => fs.length > 1).map((fs) => fs.sort().join(' = '));
}

/** The room of a scripts/ file (`scripts/engines/pg-engine.ts` → `engines`), or null at the top. */
function roomOf(file: string): string | null {
  const parts = file.split('/');
  return parts[0] === 'scripts' && parts.length > 2 ? parts[1]! : null;
}

/** The rooms as a graph of their own: room A imports room B if any file of A imports one of B. */
function roomGraph(g: ImportGraph): ImportGraph {
  const rooms: ImportGraph = new Map();
  for (const [file, src] of g) {
    const from = roomOf(file);
    if (from === null) continue;
    const node = rooms.get(from) ?? { path: from, imports: [], globals: [] };
    rooms.set(from, node);
    for (const e of src.imports) {
      const to = e.target === null ? null : roomOf(e.target);
      if (to !== null && to !== from && !node.imports.some((i) => i.target === to))
        node.imports.push({ spec: e.target!, target: to, typeOnly: e.typeOnly, line: e.line });
    }
  }
  return rooms;
}

describe('scripts/ layout', () => {
  it('the top level holds exactly the npm commands’ entry files', () => {
    expect(commandEntries(packageScripts).size).toBeGreaterThan(5);
    expect(topLevelMismatch(graph, packageScripts)).toEqual([]);
  });

  it('no two files share a name', () => {
    expect(duplicateNames(graph)).toEqual([]);
  });

  it('no circle among the rooms (type-only imports included)', () => {
    expect(roomGraph(graph).size).toBeGreaterThan(5);
    expect(importCycles(roomGraph(graph))).toEqual([]);
  });
});

describe('scripts/ layout: the checks catch what they are for', () => {
  it('a helper at the top level, and a command whose entry is gone', () => {
    const g = withOverlay(graph, { 'scripts/helper.ts': 'export const x = 1;\n' });
    const scripts = { ...packageScripts, gone: 'tsx scripts/gone.ts' };
    expect(topLevelMismatch(g, scripts)).toEqual([
      "scripts/gone.ts: an npm command's missing entry",
      "scripts/helper.ts: not an npm command's entry",
    ]);
  });

  it('two files of one name in different rooms', () => {
    const g = withOverlay(graph, { 'scripts/report/steps.ts': 'export const x = 1;\n' });
    expect(duplicateNames(g)).toContain('scripts/experiment/steps.ts = scripts/report/steps.ts');
  });

  it('a room circle through a type-only import', () => {
    const file = 'scripts/report/records.ts';
    const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
    const g = withOverlay(graph, {
      [file]: "import type { StepSession } from '../experiment/steps.ts';\n" + text,
    });
    expect(importCycles(roomGraph(g)).some((c) => c.includes('report'))).toBe(true);
  });
});
