/**
 * The import graph of walsim's sources, read with TypeScript's own parser (not by matching lines):
 * every `import`, `import type`, `export … from`, `import x = require(…)` and `import('…')` of every
 * source file, resolved to a repository file or left as a package name, and the uses of the
 * nondeterministic globals (Date.now, new Date(), performance, Math.random, Node's timers) as
 * syntax nodes, so comments and strings never count and `this.clock.setTimeout` is not `setTimeout`.
 *
 * Entry points: `readImportGraph`, `withOverlay` (file texts replaced in memory, which is how the
 * layering test proves that it catches an injected import), `closureOf` (files reachable through
 * runtime imports, each with the chain that reaches it), `importCycles` (strongly connected
 * components of more than one file).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import ts from 'typescript';

export interface ImportEdge {
  /** The specifier as written. */
  spec: string;
  /** Repository-relative path of the imported file, or null for a package / node: module. */
  target: string | null;
  /** Erased at runtime (`import type`, or every named import is a type). */
  typeOnly: boolean;
  line: number;
}

export interface GlobalUse {
  what: string;
  line: number;
}

export interface SourceFile {
  path: string;
  imports: ImportEdge[];
  globals: GlobalUse[];
}

export type ImportGraph = Map<string, SourceFile>;

/** Top-level folders that hold no sources of the project. */
const NOT_SOURCES = new Set(['node_modules', 'results', 'coverage']);

/** The source folders of the project: every top-level folder but node_modules and outputs. */
export function sourceFolders(root: string): string[] {
  return fs
    .readdirSync(root, { withFileTypes: true })
    .filter((d) => d.isDirectory() && !d.name.startsWith('.') && !NOT_SOURCES.has(d.name))
    .map((d) => d.name)
    .sort();
}

const TIMERS = new Set([
  'setTimeout',
  'setInterval',
  'setImmediate',
  'clearTimeout',
  'clearInterval',
  'clearImmediate',
]);

function lineOf(sf: ts.SourceFile, node: ts.Node): number {
  return sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
}

function importIsTypeOnly(decl: ts.ImportDeclaration): boolean {
  const clause = decl.importClause;
  if (clause === undefined) return false; // `import './x.ts'`: run for its effects
  if (clause.isTypeOnly) return true;
  if (clause.name !== undefined) return false;
  const b = clause.namedBindings;
  if (b === undefined || ts.isNamespaceImport(b)) return false;
  return b.elements.length > 0 && b.elements.every((e) => e.isTypeOnly);
}

function exportIsTypeOnly(decl: ts.ExportDeclaration): boolean {
  if (decl.isTypeOnly) return true;
  const c = decl.exportClause;
  return c !== undefined && ts.isNamedExports(c) && c.elements.every((e) => e.isTypeOnly);
}

/** Is `id` a reference to a global of that name (not a property name, key or declaration)? */
function isFreeReference(id: ts.Identifier): boolean {
  const p = id.parent;
  if (ts.isPropertyAccessExpression(p) && p.name === id) return false;
  if ((ts.isPropertyAssignment(p) || ts.isMethodDeclaration(p)) && p.name === id) return false;
  if (ts.isPropertySignature(p) || ts.isMethodSignature(p) || ts.isPropertyDeclaration(p))
    return p.name !== id;
  if (ts.isVariableDeclaration(p) || ts.isParameter(p) || ts.isFunctionDeclaration(p))
    return p.name !== id;
  if (ts.isImportSpecifier(p) || ts.isExportSpecifier(p) || ts.isShorthandPropertyAssignment(p))
    return false;
  if (ts.isQualifiedName(p)) return false;
  return true;
}

/** Parse one file's text: its imports and its uses of nondeterministic globals. */
export function parseSource(file: string, text: string): SourceFile {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const imports: ImportEdge[] = [];
  const globals: GlobalUse[] = [];
  const resolve = (spec: string): string | null =>
    spec.startsWith('.')
      ? path.posix.normalize(path.posix.join(path.posix.dirname(file), spec))
      : null;
  const addImport = (specNode: ts.Expression, typeOnly: boolean, at: ts.Node) => {
    if (!ts.isStringLiteralLike(specNode)) return;
    const spec = specNode.text;
    imports.push({ spec, target: resolve(spec), typeOnly, line: lineOf(sf, at) });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) addImport(node.moduleSpecifier, importIsTypeOnly(node), node);
    else if (ts.isExportDeclaration(node) && node.moduleSpecifier !== undefined)
      addImport(node.moduleSpecifier, exportIsTypeOnly(node), node);
    else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference)
    )
      addImport(node.moduleReference.expression, node.isTypeOnly, node);
    else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] !== undefined
    )
      addImport(node.arguments[0], false, node);
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument))
      addImport(node.argument.literal as ts.Expression, true, node);
    else if (ts.isPropertyAccessExpression(node) && ts.isIdentifier(node.expression)) {
      const obj = node.expression.text;
      const prop = node.name.text;
      if (obj === 'Date' && prop === 'now')
        globals.push({ what: 'Date.now', line: lineOf(sf, node) });
      if (obj === 'Math' && prop === 'random')
        globals.push({ what: 'Math.random', line: lineOf(sf, node) });
    } else if (
      ts.isNewExpression(node) &&
      ts.isIdentifier(node.expression) &&
      node.expression.text === 'Date' &&
      (node.arguments === undefined || node.arguments.length === 0)
    )
      globals.push({ what: 'new Date()', line: lineOf(sf, node) });
    else if (ts.isIdentifier(node) && isFreeReference(node)) {
      if (TIMERS.has(node.text)) globals.push({ what: node.text, line: lineOf(sf, node) });
      if (node.text === 'performance')
        globals.push({ what: 'performance', line: lineOf(sf, node) });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return { path: file, imports, globals };
}

function listSources(root: string, folder: string): string[] {
  const dir = path.join(root, folder);
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.split(path.sep).includes('node_modules'))
    .map((f) => path.posix.join(folder, f.split(path.sep).join('/')));
}

/** Every source file of the repository at `root`, parsed. */
export function readImportGraph(root: string): ImportGraph {
  const graph: ImportGraph = new Map();
  for (const f of sourceFolders(root)
    .flatMap((d) => listSources(root, d))
    .sort())
    graph.set(f, parseSource(f, fs.readFileSync(path.join(root, f), 'utf8')));
  return graph;
}

/** `graph` with the files of `overlay` (path → text) parsed in place of, or beside, its own. */
export function withOverlay(graph: ImportGraph, overlay: Record<string, string>): ImportGraph {
  const g: ImportGraph = new Map(graph);
  for (const [f, text] of Object.entries(overlay)) g.set(f, parseSource(f, text));
  return g;
}

/** Top folder of a repository-relative path ('server/node.ts' → 'server'). */
export function topFolder(file: string): string {
  return file.split('/')[0]!;
}

/**
 * The files reachable from `roots` through runtime imports (type-only imports are erased and do
 * not count), each with the chain of files that first reaches it (BFS: a shortest chain).
 */
export function closureOf(graph: ImportGraph, roots: readonly string[]): Map<string, string[]> {
  const chains = new Map<string, string[]>();
  const queue: string[] = [];
  for (const r of roots)
    if (graph.has(r) && !chains.has(r)) {
      chains.set(r, [r]);
      queue.push(r);
    }
  while (queue.length > 0) {
    const f = queue.shift()!;
    for (const e of graph.get(f)!.imports) {
      if (e.typeOnly || e.target === null || chains.has(e.target) || !graph.has(e.target)) continue;
      chains.set(e.target, [...chains.get(f)!, e.target]);
      queue.push(e.target);
    }
  }
  return chains;
}

/**
 * Import circles: strongly connected components of more than one file (Tarjan), over every import
 * (type-only ones too: a circle of types still ties the two modules together), each sorted.
 */
export function importCycles(graph: ImportGraph, within?: (f: string) => boolean): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  let next = 0;
  const nodes = [...graph.keys()].filter((f) => within === undefined || within(f));
  const inScope = new Set(nodes);
  const strong = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const e of graph.get(v)!.imports) {
      const w = e.target;
      if (w === null || !inScope.has(w)) continue;
      if (!index.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const comp: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        comp.push(w);
      } while (w !== v);
      if (comp.length > 1) out.push(comp.sort());
    }
  };
  for (const v of nodes) if (!index.has(v)) strong(v);
  return out.sort((a, b) => a[0]!.localeCompare(b[0]!));
}
