/**
 * storage/pg-drop-rules.ts: each major's replay drop rules as PostgreSQL's source and the
 * binaries' symbols give them (13 no lookup; 14–15 RelFileNode names, 16+ RelFileLocator names;
 * NBuffers/32; DROP DATABASE forgetting cached sizes from 14; the January 2025 minors), the
 * server_version_num parse, and the refusals. The real binaries' drop calls are checked in
 * test/integration/pg-versions.test.ts.
 */
import { describe, expect, it } from 'vitest';
import {
  forgetsCachedSizes,
  pgDropRules,
  pgVersionOfNum,
  PG_RULE_MAJORS,
} from '../../storage/pg-drop-rules.ts';

describe('pgDropRules', () => {
  it('13: no lookup path, no threshold, RelFileNode names, nothing cached to forget', () => {
    const r = pgDropRules({ major: 13, minor: 23 });
    expect(r).toMatchObject({
      version: '13.23',
      cachedLookup: false,
      thresholdDivisor: null,
      relationId: 'RelFileNode',
      fn: {
        truncate: 'DropRelFileNodeBuffers',
        dropRelations: 'DropRelFileNodesAllBuffers',
        dropDatabase: 'DropDatabaseBuffers',
        lookup: null,
      },
    });
    expect(forgetsCachedSizes(r, 'Database', 'DROP')).toBeNull();
    expect(r.summary[0]).toMatch(/always scan all NBuffers descriptors/);
  });

  it('14–15 FindAndDropRelFileNodeBuffers, 16–18 the RelFileLocator names; NBuffers/32 from 14', () => {
    for (const major of [14, 15, 16, 17, 18]) {
      const r = pgDropRules({ major, minor: null });
      expect(r.cachedLookup).toBe(true);
      expect(r.thresholdDivisor).toBe(32);
      expect(r.fn).toEqual(
        major >= 16
          ? {
              truncate: 'DropRelationBuffers',
              dropRelations: 'DropRelationsAllBuffers',
              dropDatabase: 'DropDatabaseBuffers',
              lookup: 'FindAndDropRelationBuffers',
            }
          : {
              truncate: 'DropRelFileNodeBuffers',
              dropRelations: 'DropRelFileNodesAllBuffers',
              dropDatabase: 'DropDatabaseBuffers',
              lookup: 'FindAndDropRelFileNodeBuffers',
            },
      );
      expect(r.relationId).toBe(major >= 16 ? 'RelFileLocator' : 'RelFileNode');
    }
  });

  it('DROP DATABASE forgets every cached size from 14 (smgrcloseall, 17+ smgrdestroyall, 15+ barrier)', () => {
    expect(forgetsCachedSizes(pgDropRules({ major: 14, minor: 23 }), 'Database', 'DROP')).toBe(
      'every cached size, of every database: XLogDropDatabase → smgrcloseall',
    );
    expect(forgetsCachedSizes(pgDropRules({ major: 16, minor: 14 }), 'Database', 'DROP')).toMatch(
      /smgrcloseall, after the SMGRRELEASE barrier/,
    );
    expect(forgetsCachedSizes(pgDropRules({ major: 18, minor: 4 }), 'Database', 'DROP')).toMatch(
      /smgrdestroyall, after the SMGRRELEASE barrier/,
    );
    const r14 = pgDropRules({ major: 14, minor: null });
    expect(forgetsCachedSizes(r14, 'Database', 'CREATE')).toBeNull();
    expect(forgetsCachedSizes(r14, 'Tablespace', 'DROP')).toBeNull();
    const r15 = pgDropRules({ major: 15, minor: null });
    expect(forgetsCachedSizes(r15, 'Database', 'CREATE_FILE_COPY')).toMatch(/SMGRRELEASE/);
    expect(forgetsCachedSizes(r15, 'Tablespace', 'DROP')).toMatch(/SMGRRELEASE/);
    expect(forgetsCachedSizes(r15, 'Database', 'CREATE_WAL_LOG')).toBeNull();
    expect(forgetsCachedSizes(r15, 'Heap', 'INSERT')).toBeNull();
  });

  it('truncation replay caches the truncated forks from 13.19, 14.16, 15.11, 16.7, 17.3 and 18.0', () => {
    const first = { 13: 19, 14: 16, 15: 11, 16: 7, 17: 3 } as const;
    for (const [major, minor] of Object.entries(first)) {
      const m = Number(major);
      expect(pgDropRules({ major: m, minor: minor - 1 }).truncateCachesSizes).toBe(false);
      expect(pgDropRules({ major: m, minor }).truncateCachesSizes).toBe(true);
    }
    expect(pgDropRules({ major: 18, minor: 0 }).truncateCachesSizes).toBe(true);
    const unknown = pgDropRules({ major: 15, minor: null });
    expect(unknown.truncateCachesSizes).toBe(true);
    expect(unknown.summary.at(-1)).toMatch(/minor unknown, a current minor assumed/);
    expect(pgDropRules({ major: 14, minor: 13 }).summary.at(-1)).toMatch(/before 14\.16/);
  });

  it('refuses a major it does not know and a minor that is not one', () => {
    expect(PG_RULE_MAJORS).toEqual([13, 14, 15, 16, 17, 18]);
    expect(() => pgDropRules({ major: 12, minor: 5 })).toThrow(
      'PostgreSQL 12: its replay drop rules are not known (known: 13, 14, 15, 16, 17, 18)',
    );
    expect(() => pgDropRules({ major: 19, minor: null })).toThrow(/PostgreSQL 19/);
    expect(() => pgDropRules({ major: 15, minor: -1 })).toThrow(/minor -1/);
  });
});

describe('pgVersionOfNum', () => {
  it('reads server_version_num', () => {
    expect(pgVersionOfNum(150018)).toEqual({ major: 15, minor: 18 });
    expect(pgVersionOfNum(180004)).toEqual({ major: 18, minor: 4 });
    expect(pgVersionOfNum(130023)).toEqual({ major: 13, minor: 23 });
    expect(pgVersionOfNum(90624)).toEqual({ major: 9, minor: 24 });
    expect(() => pgVersionOfNum(15)).toThrow(/not a PostgreSQL version number/);
    expect(() => pgVersionOfNum(Number.NaN)).toThrow(/not a PostgreSQL version number/);
  });
});
