/**
 * An `assert` outside the tests has a constant message: `assert(cond, 'INV-…')`. A message that
 * interpolates (`assert(cond, `INV-… ${x}`)`) is built on every call, holding or not, and the
 * simulator makes millions of those calls (an LSN check on every WAL record, a CLOG status on
 * every commit): 59 such asserts cost about half a percent of a run. Where the message needs a
 * value, the check is written `if (!cond) fail(`INV-… ${x}`)` (common/assert.ts), which builds it
 * only when the invariant is broken. Checked with TypeScript's parser over every source file but
 * the tests; the last block proves the check can fail.
 */
import * as path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { readImportGraph } from '../helpers/import-graph.ts';
import { nodesWhere, scanSources } from '../helpers/source-scan.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** An `assert(…)` call whose message is not a constant string. */
const isComputedAssertMessage = (n: ts.Node): boolean =>
  ts.isCallExpression(n) &&
  ts.isIdentifier(n.expression) &&
  n.expression.text === 'assert' &&
  n.arguments.length >= 2 &&
  !ts.isStringLiteral(n.arguments[1]!) &&
  !ts.isNoSubstitutionTemplateLiteral(n.arguments[1]!);

describe('assertion messages are built only when an invariant breaks', () => {
  it('every assert outside the tests has a constant message', () => {
    const files = [...readImportGraph(ROOT).keys()].filter((f) => !f.startsWith('test/'));
    expect(scanSources(ROOT, files, isComputedAssertMessage)).toEqual([]);
  });
});

describe('assert messages: the check catches what it is for', () => {
  it('template literals with values, concatenations and calls; constants pass', () => {
    const text = [
      'assert(ok, `INV-X-1: bad ${x}`);',
      "assert(ok, 'INV-X-2: ' + x);",
      'assert(ok, describe(x));',
      "assert(ok, 'INV-X-3: constant');",
      'assert(ok, `INV-X-4: constant`);',
      'if (!ok) fail(`INV-X-5: ${x}`);',
    ].join('\n');
    expect(nodesWhere('x/y.ts', text, isComputedAssertMessage)).toEqual([
      'x/y.ts:1',
      'x/y.ts:2',
      'x/y.ts:3',
    ]);
  });
});
