/**
 * The pure parts of `sweep --template` (scripts/experiment/loaded-template.ts,
 * scripts/postgres/pg-control.ts): which cells start from a template, the disk a plan's templates
 * need and the refusal when it is short, and trimming a stopped data directory's pg_wal to its
 * shutdown checkpoint's segment from a hand-made pg_control (the offsets the real 13 and 15 write
 * are checked end to end by test/integration/sweep-template.test.ts). No PostgreSQL.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  checkTemplateSpace,
  templateApplies,
  templateSpaceNeed,
} from '../../scripts/experiment/loaded-template.ts';
import { planMulti, planThreshold } from '../../scripts/experiment/plan.ts';
import { readPgControl, trimWalToShutdownCheckpoint } from '../../scripts/postgres/pg-control.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-template-unit-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('which cells start from a template, and the disk they need', () => {
  const testA = planThreshold(
    ['8GB', '20GB'],
    [32, 16, 8],
    false,
    ['postgres', 'walsim'],
    [13, 15],
  );

  it("Test A's PostgreSQL cells only", () => {
    expect(testA.filter(templateApplies)).toHaveLength(12);
    expect(testA.filter((c) => c.engine === 'walsim').some(templateApplies)).toBe(false);
    const testB = planMulti(['128MB'], 10, ['vacuum', 'truncate'], ['cached-lookup'], ['postgres']);
    expect(testB.some(templateApplies)).toBe(false);
  });

  it('counts one template per major and relation size, and the largest pair running', () => {
    // Per major 32,768 + 65,536 + 131,072 + 81,920 + 163,840 + 327,680 pages, 64 MiB beside each.
    const perMajor = 802_816 * 8192 + 6 * 64 * 1024 * 1024;
    // 20GB NB/8: two copies of its 2.75 GB template and 2 pages of WAL a page on each node.
    const pair = 2 * (327_680 * 8192 + 64 * 1024 * 1024) + 4 * 327_680 * 8192;
    expect(templateSpaceNeed(testA)).toEqual({
      templates: 12,
      templatesBytes: 2 * perMajor,
      pairBytes: pair,
    });
    expect(templateSpaceNeed(testA.filter((c) => c.engine === 'walsim')).templates).toBe(0);
  });

  it('refuses a plan the free space cannot hold, in one line naming both figures', () => {
    expect(() => checkTemplateSpace(testA, '/data/sweep', 20e9)).toThrow(
      /^--template needs about 30\.2 GB free under \/data\/sweep \(12 templates of 14\.0 GB kept until the sweep ends, and 16\.2 GB for the largest pair running\), but only 20\.0 GB are free: give --work-dir on a larger disk, fewer --rel-sizes, or leave out --template$/,
    );
    expect(() => checkTemplateSpace(testA, '/data/sweep', 31e9)).not.toThrow();
    // Nothing templated, nothing needed.
    expect(() =>
      checkTemplateSpace(
        testA.filter((c) => c.engine === 'walsim'),
        '/data',
        0,
      ),
    ).not.toThrow();
    // The file system's own figure: a 128MB cell's template fits any test machine.
    const small = planThreshold(['128MB'], [64], false, ['postgres'], [15]);
    expect(() => checkTemplateSpace(small, path.join(tmp, 'not-yet', 'made'))).not.toThrow();
  });
});

const SEG = 1 << 20; // 1 MB segments keep the files small

/** A data directory with a hand-made pg_control and 1 MB segment files of timeline 1. */
function dataDir(
  name: string,
  c: { state: number; checkPoint: number; redo: number },
  segnos: number[],
): string {
  const dir = path.join(tmp, name);
  fs.mkdirSync(path.join(dir, 'global'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'pg_wal', 'archive_status'), { recursive: true });
  const b = Buffer.alloc(8192);
  b.writeUInt32LE(1300, 8);
  b.writeInt32LE(c.state, 16);
  b.writeBigUInt64LE(BigInt(c.checkPoint), 32);
  b.writeBigUInt64LE(BigInt(c.redo), 40);
  b.writeUInt32LE(1, 48);
  fs.writeFileSync(path.join(dir, 'global', 'pg_control'), b);
  for (const s of segnos) {
    const file = path.join(
      dir,
      'pg_wal',
      `00000001000000000000${s.toString(16).toUpperCase().padStart(4, '0')}`,
    );
    const head = Buffer.alloc(40);
    head.writeUInt16LE(0xd10d, 0); // any magic: only the long header's flag and size are read
    head.writeUInt16LE(0x0002, 2); // XLP_LONG_HEADER
    head.writeUInt32LE(SEG, 32); // xlp_seg_size
    fs.writeFileSync(file, head);
    fs.truncateSync(file, SEG);
  }
  return dir;
}

const walFiles = (dir: string) => fs.readdirSync(path.join(dir, 'pg_wal')).sort();

describe("trimming a stopped primary's pg_wal to its shutdown checkpoint", () => {
  it('keeps the checkpoint segment only, and what is not a segment', () => {
    const at = 5 * SEG + 0x718;
    const dir = dataDir('clean', { state: 1, checkPoint: at, redo: at }, [3, 4, 5, 6, 7, 8]);
    expect(readPgControl(dir)).toEqual({ state: 1, checkPoint: at, redo: at, timeline: 1 });
    expect(trimWalToShutdownCheckpoint(dir)).toEqual({
      kept: ['000000010000000000000005'],
      removed: 5,
    });
    expect(walFiles(dir)).toEqual(['000000010000000000000005', 'archive_status']);
  });

  it('keeps the next segment too when the checkpoint record may run into it', () => {
    const at = 6 * SEG - 200;
    const dir = dataDir('edge', { state: 1, checkPoint: at, redo: at }, [5, 6, 7]);
    expect(trimWalToShutdownCheckpoint(dir).kept).toEqual([
      '000000010000000000000005',
      '000000010000000000000006',
    ]);
    expect(walFiles(dir)).toEqual([
      '000000010000000000000005',
      '000000010000000000000006',
      'archive_status',
    ]);
  });

  it('refuses, removing nothing, what was not stopped cleanly', () => {
    const at = 5 * SEG + 0x60;
    const cases = [
      [dataDir('running', { state: 6, checkPoint: at, redo: at - 0x38 }, [4, 5]), /state is 6/],
      [
        dataDir('online', { state: 1, checkPoint: at, redo: at - 0x38 }, [4, 5]),
        /not a shutdown checkpoint \(redo 0\/500028\)/,
      ],
      [
        dataDir('gone', { state: 1, checkPoint: at, redo: at }, [3, 4]),
        /segment 000000010000000000000005 is not in/,
      ],
    ] as const;
    for (const [dir, why] of cases) {
      const before = walFiles(dir);
      expect(() => trimWalToShutdownCheckpoint(dir)).toThrow(/is not a cleanly stopped cluster: /);
      expect(() => trimWalToShutdownCheckpoint(dir)).toThrow(why);
      expect(walFiles(dir)).toEqual(before);
    }
  });
});
