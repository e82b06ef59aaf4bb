/**
 * Fidelity checks on real PostgreSQL 15 — the same statements test/unit/fidelity-walsim.test.ts
 * checks on walsim's counters: TRUNCATE of tables with a TOAST table grows with NBuffers (one full
 * scan of the descriptors per table) while int-only TRUNCATE and VACUUM of one-block tables stay
 * flat; Test A's replay tracks the relation's size. Skips, naming the reason, without PostgreSQL.
 * Method: PostgreSQL counts no drops, so the drop path shows only in time: compare the replay
 * phase (resume → "redo done at") of 300 tables at 128MB and 4GB, and check that the TOAST
 * TRUNCATE's growth exceeds int-only TRUNCATE's by at least 1 ns per extra descriptor scanned (a
 * fifth of what the seed's machine spent) and is at least three times VACUUM's. Test A is checked
 * on pg_waldump's record counts and on replay time at sizes 64× apart.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { pgUnavailableReason } from '../helpers/postgres.ts';
import { defaultCostProfile } from '../../cost-model/profile.ts';
import {
  planMulti,
  planThreshold,
  runCell,
  type RunRecord,
  type SweepSettings,
} from '../../scripts/experiment/sweep.ts';

const reason = pgUnavailableReason();
const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-pg-fidelity-'));
afterAll(() => fs.rmSync(workDir, { recursive: true, force: true }));
const settings: SweepSettings = {
  primarySharedBuffers: '128MB',
  thresholdDivisor: 32,
  workDir,
  waitSeconds: 600,
  profile: defaultCostProfile(),
};
const TABLES = 300;

describe.skipIf(reason !== null)(
  `real PostgreSQL fidelity${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    it('TOAST TRUNCATE grows with NBuffers; int-only TRUNCATE and VACUUM stay flat', async () => {
      const plan = planMulti(
        ['128MB', '4GB'],
        TABLES,
        ['vacuum', 'truncate', 'truncate-toast'],
        ['cached-lookup'],
        ['postgres'],
      );
      const r: Record<string, RunRecord> = {};
      for (const c of plan) r[`${c.variant} ${c.sharedBuffers}`] = await runCell(c, 1, settings);
      const growth = (v: string) => r[`${v} 4GB`]!.replayMs! - r[`${v} 128MB`]!.replayMs!;
      const extraDescriptors = TABLES * (524_288 - 16_384);
      expect(growth('truncate-toast') - growth('truncate')).toBeGreaterThan(
        extraDescriptors * 1e-6,
      );
      expect(growth('truncate-toast')).toBeGreaterThan(3 * Math.max(growth('vacuum'), 0));
      // The WAL replayed does not depend on shared_buffers, up to the records background processes
      // log meanwhile, e.g. the bgwriter's Standby/RUNNING_XACTS (a real run differed by one record).
      for (const v of ['vacuum', 'truncate', 'truncate-toast']) {
        expect(
          Math.abs(r[`${v} 4GB`]!.recordsReplayed - r[`${v} 128MB`]!.recordsReplayed),
          v,
        ).toBeLessThanOrEqual(5);
      }
    }, 600_000);

    it('Test A: VACUUM replay of NB/8 at 1GB replays ~64× the records of NB/512 and takes longer', async () => {
      const plan = planThreshold(['1GB'], [512, 8], false, ['postgres']);
      const [small, big] = [
        await runCell(plan[0]!, 1, settings),
        await runCell(plan[1]!, 1, settings),
      ];
      expect(big.recordsReplayed / small.recordsReplayed).toBeGreaterThan(32);
      expect(big.replayMs!).toBeGreaterThan(small.replayMs!);
    }, 600_000);
  },
);
