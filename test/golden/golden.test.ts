/**
 * Every golden scenario in this folder (`*.golden`): its commands run on the simulator, and the
 * output must equal the text stored below its `----` line. `UPDATE_GOLDEN=1` rewrites that text
 * instead (then review the diff: it is the change in behaviour). test/README.md, "Golden scenarios".
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { GOLDEN_SEPARATOR, parseGolden, runGolden } from '../helpers/golden.ts';

const DIR = path.dirname(new URL(import.meta.url).pathname);
const FILES = fs
  .readdirSync(DIR)
  .filter((f) => f.endsWith('.golden'))
  .sort();
const UPDATE = process.env.UPDATE_GOLDEN === '1';

describe('golden scenarios', () => {
  it('the folder has the scenarios', () => {
    expect(FILES.length).toBeGreaterThan(0);
  });

  for (const name of FILES) {
    it(name, async () => {
      const file = path.join(DIR, name);
      const golden = parseGolden(fs.readFileSync(file, 'utf8'));
      const actual = await runGolden(golden);
      if (UPDATE) {
        fs.writeFileSync(file, `${golden.input}\n${GOLDEN_SEPARATOR}\n${actual}`);
        return;
      }
      expect(golden.expected, `${name} has no output yet: run with UPDATE_GOLDEN=1`).not.toBe('');
      expect(actual).toBe(golden.expected);
    });
  }
});
