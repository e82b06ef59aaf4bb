/**
 * Checks that read source files with TypeScript's parser for a pattern in the syntax (not by
 * matching lines, so comments and strings never count): closure-tenure (function literals assigned
 * to properties) and assert-messages (assertion messages built on every call).
 *
 * Entry points: `nodesWhere` (`file:line` of each node of one text a predicate picks, what a
 * check's can-fail block calls), `scanSources` (the same over repository files, which must include
 * the layers the simulator runs: an empty scan would pass everything).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import ts from 'typescript';
import { expect } from 'vitest';

/** The layers a seed runs through; a scan of the files it covers must reach each. */
const LAYERS = ['sim/', 'server/', 'storage/', 'wal/', 'primary/', 'standby/'];

/** `file:line` of each node of `text` for which `picked` holds, in source order. */
export function nodesWhere(file: string, text: string, picked: (n: ts.Node) => boolean): string[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (n: ts.Node): void => {
    if (picked(n))
      found.push(`${file}:${sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1}`);
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return found;
}

/** `nodesWhere` over repository files (paths relative to `root`), which must cover the layers. */
export function scanSources(
  root: string,
  files: readonly string[],
  picked: (n: ts.Node) => boolean,
): string[] {
  for (const layer of LAYERS) expect(files.some((f) => f.startsWith(layer))).toBe(true);
  return files.flatMap((f) => nodesWhere(f, fs.readFileSync(path.join(root, f), 'utf8'), picked));
}
