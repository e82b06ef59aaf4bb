/**
 * The PostgreSQL log and pg_waldump parsers on files taken from real PostgreSQL 15 runs (a
 * promotion after TRUNCATE of 20 tables with TOAST tables, replay paused meanwhile). Method: parse
 * the fixtures and check every instant, LSN and count against the lines they came from.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parsePgLog, promotionTimeline } from '../../scripts/postgres/pg-log.ts';
import { parseWaldumpStats, waldumpCount } from '../../scripts/postgres/pg-waldump.ts';

const FIX = path.resolve(import.meta.dirname, '../fixtures/postgres');
const read = (f: string) => fs.readFileSync(path.join(FIX, f), 'utf8');
const at = (s: string) => Date.parse(s.replace(' ', 'T') + 'Z');

describe('parsePgLog', () => {
  it('reads the millisecond UTC timestamp, pid, level and message of each prefixed line', () => {
    const lines = parsePgLog(read('standby-promote-truncate-20-toast.log'));
    const redo = lines.find((l) => l.message.startsWith('redo done at'))!;
    expect(redo).toEqual({
      atMs: at('2026-12-01 08:05:32.793'),
      pid: 9976,
      level: 'LOG',
      message:
        'redo done at 0/3088278 system usage: CPU: user: 0.02 s, system: 0.00 s, elapsed: 6.23 s',
    });
  });

  it('appends tab-indented continuation lines to the message they belong to', () => {
    const lines = parsePgLog(read('standby-promote-truncate-20-toast.log'));
    const fatal = lines.find((l) => l.level === 'FATAL')!;
    expect(fatal.message).toContain(
      'server closed the connection unexpectedly This probably means the server terminated abnormally',
    );
    expect(lines.every((l) => Number.isFinite(l.atMs) && l.pid > 0)).toBe(true);
  });
});

describe('promotionTimeline', () => {
  const lines = parsePgLog(read('standby-promote-truncate-20-toast.log'));

  it('finds every instant of the promotion after the resume', () => {
    const t = promotionTimeline(lines, at('2026-12-01 08:05:32.765'));
    expect(t).toEqual({
      endOfWalAt: at('2026-12-01 08:05:32.793'),
      endOfWalLsn: '0/3088388',
      promoteReceivedAt: at('2026-12-01 08:05:32.793'),
      redoDoneAt: at('2026-12-01 08:05:32.793'),
      redoDoneLsn: '0/3088278',
      newTimelineAt: at('2026-12-01 08:05:32.798'),
      newTimeline: 2,
      archiveRecoveryCompleteAt: at('2026-12-01 08:05:32.832'),
      checkpointStartAt: at('2026-12-01 08:05:32.837'),
      readyAt: at('2026-12-01 08:05:32.844'),
    });
  });

  it('ignores the read-only "ready" of hot standby start-up and everything before the resume', () => {
    const t = promotionTimeline(lines, at('2026-12-01 08:05:33.000'));
    expect(Object.values(t).every((v) => v === null)).toBe(true);
    // From the very start of the log, "ready to accept read-only connections" is not read-write.
    const all = promotionTimeline(lines, 0);
    expect(all.readyAt).toBe(at('2026-12-01 08:05:32.844'));
  });
});

describe('parseWaldumpStats', () => {
  it('reads --stats=record rows by resource manager and type, dropping empty ones', () => {
    const s = parseWaldumpStats(read('waldump-stats-record-truncate-20-toast.txt'));
    expect(s.from).toBe('0/307F618');
    expect(s.to).toBe('0/3088388');
    expect(s.total).toEqual({
      count: 435,
      recordBytes: 33061,
      fpiBytes: 1760,
      combinedBytes: 34821,
    });
    expect(s.rows).toContainEqual({
      rmgr: 'Transaction',
      type: 'COMMIT',
      count: 20,
      recordBytes: 5320,
      fpiBytes: 0,
      combinedBytes: 5320,
    });
    // Each TRUNCATE of a table with a TOAST table creates three new relfilenodes.
    expect(waldumpCount(s, 'Storage', 'CREATE')).toBe(3 * waldumpCount(s, 'Transaction', 'COMMIT'));
    expect(s.rows.every((r) => r.count > 0)).toBe(true);
  });

  it('reads --stats per resource manager (type null) with the same total', () => {
    const s = parseWaldumpStats(read('waldump-stats-rmgr-truncate-20-toast.txt'));
    expect(s.total.count).toBe(435);
    expect(s.rows.map((r) => [r.rmgr, r.type, r.count])).toEqual([
      ['XLOG', null, 20],
      ['Transaction', null, 20],
      ['Storage', null, 60],
      ['Standby', null, 60],
      ['Heap2', null, 18],
      ['Heap', null, 64],
      ['Btree', null, 193],
    ]);
  });

  it('refuses text that is not pg_waldump --stats output, and rows that do not add up', () => {
    expect(() =>
      parseWaldumpStats('pg_waldump: error: could not find file "000000010000000000000003"'),
    ).toThrow(/not pg_waldump --stats output/);
    const text = read('waldump-stats-record-truncate-20-toast.txt').replace(
      'Transaction/COMMIT                            20',
      'Transaction/COMMIT                            21',
    );
    expect(() => parseWaldumpStats(text)).toThrow(/add up to 436 records, its Total says 435/);
  });
});
