/**
 * shared_buffers is parsed once, at the edges, and travels as NBuffers: the node core (everything a
 * server process or the simulator runs below its entry point) never parses it again. Method: scan
 * the core folders' sources for calls of the one parser; only the two places that read a node's
 * settings at a process start may call it (server/main.ts, sim/cluster.ts from its scenario). The
 * last block proves the scan finds a call.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const CORE = ['common', 'wal', 'storage', 'primary', 'standby', 'lifecycle', 'server', 'sim'];
const EDGES = ['server/main.ts', 'sim/cluster.ts'];
const CALL = /\bparseSharedBuffers\s*\(/;

/** Core files (not the parser's own module) whose text calls the parser. */
function callers(texts: ReadonlyMap<string, string>): string[] {
  return [...texts]
    .filter(([f, text]) => f !== 'storage/shared-buffers.ts' && CALL.test(text))
    .map(([f]) => f)
    .sort();
}

function coreSources(): Map<string, string> {
  const out = new Map<string, string>();
  for (const dir of CORE)
    for (const f of fs.readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' }))
      if (f.endsWith('.ts'))
        out.set(
          path.posix.join(dir, f.split(path.sep).join('/')),
          fs.readFileSync(path.join(ROOT, dir, f), 'utf8'),
        );
  return out;
}

describe('shared_buffers: parsed at the edges, carried as NBuffers', () => {
  it('only the settings readers of a process start call parseSharedBuffers', () => {
    expect(callers(coreSources())).toEqual(EDGES);
  });

  it('the scan finds a call where there is one', () => {
    const texts = new Map([
      [
        'server/startup-replay.ts',
        'const { nBuffers } = parseSharedBuffers(config.sharedBuffers);',
      ],
      ['storage/shared-buffers.ts', 'export function parseSharedBuffers(text: string) {}'],
      ['server/node.ts', '// nBuffers, not parseSharedBuffers'],
    ]);
    expect(callers(texts)).toEqual(['server/startup-replay.ts']);
  });
});
