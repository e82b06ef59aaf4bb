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
  return fs.readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join(dir, f));
}

function importsOf(file: string): string[] {
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
  return [...text.matchAll(/^\s*(?:import|export)[^'"]*from\s+['"]([^'"]+)['"]/gm)].map((m) => m[1]!);
}

function topFolderOf(file: string, spec: string): string | null {
  if (!spec.startsWith('.')) return null;
  return path.relative(ROOT, path.resolve(ROOT, path.dirname(file), spec)).split(path.sep)[0]!;
}

describe('layering', () => {
  it('wal/ and storage/ import only common/, wal/, storage/ and no process or network modules', () => {
    const bad: string[] = [];
    for (const file of [...sources('wal'), ...sources('storage')]) {
      for (const spec of importsOf(file)) {
        const top = topFolderOf(file, spec);
        if (top !== null && !['common', 'wal', 'storage'].includes(top)) bad.push(`${file} -> ${spec}`);
        if (/^(node:)?(net|http|https|child_process|worker_threads|timers)(\/|$)/.test(spec) || spec === 'ws') bad.push(`${file} -> ${spec}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('primary/ and standby/ do not import each other', () => {
    const bad: string[] = [];
    for (const [from, forbidden] of [['primary', 'standby'], ['standby', 'primary']] as const) {
      for (const file of sources(from)) {
        for (const spec of importsOf(file)) if (topFolderOf(file, spec) === forbidden) bad.push(`${file} -> ${spec}`);
      }
    }
    expect(bad).toEqual([]);
  });
});
