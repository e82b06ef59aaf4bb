/**
 * walsim's storage following a real PostgreSQL major's drop rules (DropSettings.rules,
 * dropSettingsForRules): which path a replayed truncation takes at 13 and at 14–18, and rule 7 of
 * storage/pg-drop-rules.ts — a January 2025 minor caches the truncated main fork's size before the
 * drop, so a fork replay never read since the startup process began is looked up, where walsim's
 * own strategy (and a minor before the fix) full-scans.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_DROP_SETTINGS, dropSettingsForRules, runSteps } from '../../storage/drop.ts';
import { NodeStorage } from '../../storage/node-storage.ts';
import { pgDropRules, PG_RULE_MAJORS } from '../../storage/pg-drop-rules.ts';
import { redoSteps } from '../../storage/redo.ts';
import type { DropSettings } from '../../storage/drop.ts';
import { MAIN_FORKNUM, SMGR_TRUNCATE_HEAP } from '../../wal/records.ts';

const REL = 16384;

/**
 * A standby's storage in recovery holding a 10-block relation whose sizes are not cached (as after
 * a restart: smgrclose forgot them), then the replay of a truncation to `keep` blocks.
 */
function truncateUncached(settings: DropSettings, keep: number, blocks = 10) {
  const st = NodeStorage.create(1024, settings);
  st.smgr.inRecovery = true;
  st.smgr.create(REL, MAIN_FORKNUM);
  for (let b = 0; b < blocks; b++) st.smgr.extend(REL, MAIN_FORKNUM, b);
  st.smgr.close(REL);
  expect(st.smgr.nblocksCached(REL, MAIN_FORKNUM)).toBe(0xffffffff);
  runSteps(
    redoSteps(st, { kind: 'SMGR_TRUNCATE', rel: REL, blkno: keep, flags: SMGR_TRUNCATE_HEAP }, 0),
  );
  return st.dropCounters;
}

describe('storage following a PostgreSQL major (DropSettings.rules)', () => {
  it('13 scans the pool for every drop; 14–18 look the blocks up', () => {
    for (const major of PG_RULE_MAJORS) {
      const s = dropSettingsForRules(pgDropRules({ major, minor: null }));
      expect(s.strategy).toBe(major === 13 ? 'full-scan' : 'cached-lookup');
      expect(s.thresholdDivisor).toBe(32);
      const d = truncateUncached(s, 9);
      expect(d.drops['full-scan'], `PostgreSQL ${major}`).toBe(major === 13 ? 1 : 0);
      expect(d.drops['cached-lookup'], `PostgreSQL ${major}`).toBe(major === 13 ? 0 : 1);
      expect(d.scanned).toBe(major === 13 ? 1024 : 0);
    }
  });

  it('caches the truncated fork first from the January 2025 minors only (rule 7)', () => {
    const path = (s: DropSettings) => {
      const d = truncateUncached(s, 9);
      return d.drops['full-scan'] === 1 ? 'full-scan' : 'cached-lookup';
    };
    // walsim's own strategy: the main fork's size was never read by replay → full scan.
    expect(path(DEFAULT_DROP_SETTINGS)).toBe('full-scan');
    expect(path(dropSettingsForRules(pgDropRules({ major: 15, minor: 10 })))).toBe('full-scan');
    expect(path(dropSettingsForRules(pgDropRules({ major: 15, minor: 11 })))).toBe('cached-lookup');
    expect(path(dropSettingsForRules(pgDropRules({ major: 18, minor: 0 })))).toBe('cached-lookup');
  });

  it('keeps the threshold: at or above NBuffers/32 blocks to drop, 14+ full-scans too', () => {
    const s = dropSettingsForRules(pgDropRules({ major: 16, minor: null }));
    // 1024 buffers: the threshold is 32 blocks; dropping 40 of 40 full-scans, 31 of 40 looks up.
    expect(truncateUncached(s, 0, 40).drops['full-scan']).toBe(1);
    expect(truncateUncached(s, 9, 40).drops['cached-lookup']).toBe(1);
  });

  it('forces no lookup 13 does not have', () => {
    expect(dropSettingsForRules(pgDropRules({ major: 13, minor: null }), true).forceOptimized).toBe(
      false,
    );
    expect(dropSettingsForRules(pgDropRules({ major: 14, minor: null }), true).forceOptimized).toBe(
      true,
    );
  });
});
