/**
 * No function literal is assigned straight to a property (`o.f = () => …`, `a[i] = function …`,
 * `o.f ??= …`) in the code the simulator runs. V8's parser takes such a literal for a method being
 * installed and allocates its closures in the old generation; a dead one then keeps its context,
 * and everything the context reaches, through every young-generation collection until the next
 * full one. Eight such hooks in sim/ kept each finished seed's whole cluster alive that way: about
 * 470 kB of every seed was copied to the survivor space and then to the old generation, and
 * scavenges took 2.8 ms of a seed's ~23 ms of CPU. The same closure assigned through a local
 * variable (or written in an object literal) is allocated young like any other (RELIABILITY.md,
 * "Speed: closures V8 allocates in the old generation"). Checked with TypeScript's parser over the
 * files `scripts/simulate.ts` reaches at run time; the last block proves the check can fail.
 */
import * as path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { closureOf, readImportGraph } from '../helpers/import-graph.ts';
import { nodesWhere, scanSources } from '../helpers/source-scan.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

const ASSIGNMENTS = new Set([
  ts.SyntaxKind.EqualsToken,
  ts.SyntaxKind.QuestionQuestionEqualsToken,
  ts.SyntaxKind.BarBarEqualsToken,
  ts.SyntaxKind.AmpersandAmpersandEqualsToken,
]);

/** `e` without what compiles away or changes nothing at run time: parentheses, `as`, `!`. */
function unwrapped(e: ts.Expression): ts.Expression {
  let x = e;
  while (
    ts.isParenthesizedExpression(x) ||
    ts.isAsExpression(x) ||
    ts.isSatisfiesExpression(x) ||
    ts.isNonNullExpression(x) ||
    ts.isTypeAssertionExpression(x)
  )
    x = x.expression;
  return x;
}

/** A function literal assigned straight to a property. */
function isLiteralAssignedToProperty(n: ts.Node): boolean {
  if (!(ts.isBinaryExpression(n) && ASSIGNMENTS.has(n.operatorToken.kind))) return false;
  const left = unwrapped(n.left);
  const right = unwrapped(n.right);
  return (
    (ts.isPropertyAccessExpression(left) || ts.isElementAccessExpression(left)) &&
    (ts.isArrowFunction(right) || ts.isFunctionExpression(right) || ts.isClassExpression(right))
  );
}

describe('closures the simulator creates are allocated young', () => {
  it('no function literal is assigned straight to a property in the files it runs', () => {
    const files = [...closureOf(readImportGraph(ROOT), ['scripts/simulate.ts']).keys()];
    expect(scanSources(ROOT, files, isLiteralAssignedToProperty)).toEqual([]);
  });
});

describe('closure tenure: the check catches what it is for', () => {
  it('arrow functions, function expressions and logical assignments, through parentheses and casts', () => {
    const text = [
      'o.f = () => 1;',
      'a[0] = function named() { return 1; };',
      'o.g ??= (() => 2) as F;',
      'this.h ||= async () => 3;',
      'const local = () => 4;',
      'o.k = local;',
      'const lit = { m: () => 5 };',
    ].join('\n');
    expect(nodesWhere('x/y.ts', text, isLiteralAssignedToProperty)).toEqual([
      'x/y.ts:1',
      'x/y.ts:2',
      'x/y.ts:3',
      'x/y.ts:4',
    ]);
  });
});
