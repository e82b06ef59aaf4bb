/**
 * Functions are at most about 70 lines (house style, after TigerBeetle's rule): a function a reader
 * can hold at once. Every function of the sources (declarations, methods, arrow functions and
 * function expressions; tests excluded: a describe() block is a list, not a function) is measured
 * with TypeScript's parser from its first line to its closing brace. The exemptions are named here,
 * each with its length when it was listed, and may only shrink: a listed function that is split
 * below the limit must leave the list, and none may grow. The last block proves the check can fail.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { sourceFolders } from '../helpers/import-graph.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const MAX_LINES = 70;

/**
 * Functions longer than MAX_LINES that are not split yet (`file:name` → lines when listed): none
 * today. An entry would be a debt, not a rule: split it and remove its line.
 */
const EXEMPT: Record<string, number> = {};

interface LongFunction {
  key: string;
  line: number;
  lines: number;
}

/** A function's name as a reader finds it: its own, its variable's or property's, else `main`'s caller. */
function nameOf(n: ts.FunctionLikeDeclaration, sf: ts.SourceFile): string {
  if (n.name !== undefined) return n.name.getText(sf);
  const p = n.parent;
  if (ts.isVariableDeclaration(p) || ts.isPropertyAssignment(p)) return p.name.getText(sf);
  // `runCli(async () => { … })`: the command's body, named for what it is.
  if (ts.isCallExpression(p)) return 'main';
  return '<anonymous>';
}

/** Functions of `text` (file `file`) longer than MAX_LINES. */
function longFunctions(file: string, text: string): LongFunction[] {
  return functionLengths(file, text).filter((f) => f.lines > MAX_LINES);
}

/** Every function of `text` (file `file`) with its length. */
function functionLengths(file: string, text: string): LongFunction[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: LongFunction[] = [];
  const visit = (n: ts.Node): void => {
    if (ts.isFunctionLike(n) && (n as ts.FunctionLikeDeclaration).body !== undefined) {
      const first = sf.getLineAndCharacterOfPosition(n.getStart(sf)).line;
      const last = sf.getLineAndCharacterOfPosition(n.getEnd()).line;
      out.push({
        key: `${file}:${nameOf(n as ts.FunctionLikeDeclaration, sf)}`,
        line: first + 1,
        lines: last - first + 1,
      });
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

/** The sources: every .ts/.js file of the source folders but test/ (and declaration files). */
function sourceFiles(): string[] {
  return sourceFolders(ROOT)
    .filter((d) => d !== 'test')
    .flatMap((d) =>
      fs
        .readdirSync(path.join(ROOT, d), { recursive: true, encoding: 'utf8' })
        .map((f) => path.posix.join(d, f.split(path.sep).join('/'))),
    )
    .filter((f) => /\.(ts|js|mjs)$/.test(f) && !f.endsWith('.d.ts') && !f.includes('node_modules'))
    .sort();
}

/** What the rule reports: long functions not exempted, exempted ones grown, exemptions now short. */
function violations(found: LongFunction[], exempt: Record<string, number>): string[] {
  const bad: string[] = [];
  for (const f of found) {
    const allowed = exempt[f.key];
    if (allowed === undefined)
      bad.push(`${f.key} (line ${f.line}) is ${f.lines} lines (at most ${MAX_LINES})`);
    else if (f.lines > allowed) bad.push(`${f.key} grew from ${allowed} to ${f.lines} lines`);
  }
  for (const key of Object.keys(exempt))
    if (!found.some((f) => f.key === key))
      bad.push(`${key} is no longer over ${MAX_LINES} lines: remove it from EXEMPT`);
  return bad;
}

const measured = sourceFiles().flatMap((f) =>
  functionLengths(f, fs.readFileSync(path.join(ROOT, f), 'utf8')),
);
const found = measured.filter((f) => f.lines > MAX_LINES);

describe('function length', () => {
  it(`no function over ${MAX_LINES} lines but the named exemptions, and those only shrink`, () => {
    // The scan saw the sources' functions (an empty scan would pass everything).
    expect(measured.length).toBeGreaterThan(1000);
    expect(violations(found, EXEMPT)).toEqual([]);
  });
});

describe('function length: the check catches what it is for', () => {
  const body = (n: number) => Array.from({ length: n }, (_, i) => `  x += ${i};`).join('\n');

  it('a new long function, an arrow function and a method', () => {
    const text = `export function long(): number {\n  let x = 0;\n${body(70)}\n  return x;\n}\nconst arrow = () => {\n${body(70)}\n};\nclass C {\n  m(): void {\n${body(70)}\n  }\n}\n`;
    const f = longFunctions('x/y.ts', text);
    expect(f.map((l) => l.key)).toEqual(['x/y.ts:long', 'x/y.ts:arrow', 'x/y.ts:m']);
    expect(violations(f, {})).toContain('x/y.ts:long (line 1) is 74 lines (at most 70)');
  });

  it('an exempted function that grew, and one that was split', () => {
    const f = longFunctions('x/y.ts', `function long() {\n${body(75)}\n}\n`);
    expect(violations(f, { 'x/y.ts:long': 72, 'x/y.ts:gone': 80 })).toEqual([
      'x/y.ts:long grew from 72 to 77 lines',
      `x/y.ts:gone is no longer over ${MAX_LINES} lines: remove it from EXEMPT`,
    ]);
  });
});
