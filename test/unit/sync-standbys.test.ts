/**
 * Which standbys are synchronous and what their replies release, as syncrep.c computes it:
 * priorities (FIRST positions, ANY = 1, '*', case-insensitive names), the candidate set (streaming
 * or stopping, priority > 0, valid flush; FIRST keeps num_sync by priority then slot), the release
 * positions (FIRST: minimum over the chosen; ANY: num_sync-th highest per position) and
 * pg_stat_replication's sync_priority / sync_state. Method: hand-built walsender slots.
 */
import { describe, expect, it } from 'vitest';
import { parseSynchronousStandbyNames } from '../../primary/sync-standby-names.ts';
import {
  candidateStandbys,
  standbyPriority,
  syncRecPtr,
  syncStates,
  type WalSndInfo,
} from '../../primary/sync-standbys.ts';

const cfg = (t: string) => parseSynchronousStandbyNames(t);

function senders(
  config: string,
  ...specs: Array<
    [name: string, write: number, flush: number, apply: number, state?: WalSndInfo['state']]
  >
) {
  const c = cfg(config);
  const list = specs.map(([name, write, flush, apply, state = 'streaming'], slot) => ({
    name,
    info: {
      slot,
      state,
      priority: standbyPriority(c, name),
      writeLsn: write,
      flushLsn: flush,
      applyLsn: apply,
    } satisfies WalSndInfo,
  }));
  return { c, list, infos: list.map((s) => s.info) };
}

/** (name, sync_priority, sync_state) rows in slot order, like SELECT … FROM pg_stat_replication. */
function rows(
  config: string,
  ...specs: Parameters<typeof senders> extends [string, ...infer R] ? R : never
) {
  const { c, list, infos } = senders(config, ...specs);
  const st = syncStates(c, infos);
  return list.map((s) => [s.name, st.get(s.info)!.priority, st.get(s.info)!.state]);
}

describe('standbyPriority (SyncRepGetStandbyPriority)', () => {
  it('is the 1-based list position under FIRST, 1 for every member under ANY, 0 when not listed', () => {
    expect(
      ['s1', 's2', 's3', 'x'].map((n) => standbyPriority(cfg('FIRST 2 (s1, s2, s3)'), n)),
    ).toEqual([1, 2, 3, 0]);
    expect(['s1', 's2', 'x'].map((n) => standbyPriority(cfg('ANY 2 (s1, s2)'), n))).toEqual([
      1, 1, 0,
    ]);
    expect(standbyPriority(cfg('s1, s2'), 's2')).toBe(2);
  });

  it("matches names case-insensitively; '*' matches anyone at its position; first match wins", () => {
    expect(standbyPriority(cfg('"S1", s2'), 's1')).toBe(1);
    expect(standbyPriority(cfg('a, *, b'), 'b')).toBe(2);
    expect(standbyPriority(cfg('*'), 'anything')).toBe(1);
  });

  it('is 0 with synchronous replication off and for a cascading walsender', () => {
    expect(standbyPriority(null, 's1')).toBe(0);
    expect(standbyPriority(cfg('*'), 's1', true)).toBe(0);
  });
});

describe('candidates and release positions', () => {
  it('FIRST 1: the highest-priority streaming standby; its positions are released', () => {
    const { c, infos } = senders('s1, s2', ['s2', 300, 200, 100], ['s1', 90, 80, 70]);
    expect(candidateStandbys(c, infos).map((s) => s.slot)).toEqual([1]);
    expect(syncRecPtr(c, infos)).toEqual({ write: 90, flush: 80, apply: 70 });
  });

  it('FIRST 2: the minimum of each position over the two chosen', () => {
    const { c, infos } = senders(
      'FIRST 2 (s1, s2, s3)',
      ['s1', 500, 400, 100],
      ['s2', 300, 350, 250],
      ['s3', 900, 900, 900],
    );
    expect(candidateStandbys(c, infos).map((s) => s.slot)).toEqual([0, 1]);
    expect(syncRecPtr(c, infos)).toEqual({ write: 300, flush: 350, apply: 100 });
  });

  it('ANY 2: the second-highest of each position, taken separately, over all candidates', () => {
    const { c, infos } = senders(
      'ANY 2 (s1, s2, s3)',
      ['s1', 500, 100, 50],
      ['s2', 300, 400, 60],
      ['s3', 100, 300, 70],
    );
    expect(candidateStandbys(c, infos)).toHaveLength(3);
    expect(syncRecPtr(c, infos)).toEqual({ write: 300, flush: 300, apply: 60 });
  });

  it('nothing is released while fewer than num_sync standbys are candidates', () => {
    const { c, infos } = senders(
      'ANY 2 (s1, s2)',
      ['s1', 500, 500, 500],
      ['s2', 10, 10, 10, 'catchup'],
    );
    expect(syncRecPtr(c, infos)).toBeNull();
    const first = senders('FIRST 2 (s1, s2)', ['s1', 500, 500, 500], ['x', 900, 900, 900]);
    expect(syncRecPtr(first.c, first.infos)).toBeNull();
  });

  it('a standby in startup/catchup, without a flush position, or unlisted is no candidate; stopping is', () => {
    const { c, infos } = senders(
      '*',
      ['a', 0, 0, 0],
      ['b', 10, 10, 10, 'catchup'],
      ['c', 10, 10, 10, 'startup'],
      ['d', 20, 20, 20, 'stopping'],
    );
    expect(candidateStandbys(c, infos).map((s) => s.slot)).toEqual([3]);
    const n = senders('s1', ['x', 10, 10, 10]);
    expect(candidateStandbys(n.c, n.infos)).toEqual([]);
    expect(syncRecPtr(null, n.infos)).toBeNull();
  });

  it('equal priorities are ordered by walsender slot, not by position', () => {
    const { c, infos } = senders('*', ['late', 100, 100, 100], ['early', 900, 900, 900]);
    expect(candidateStandbys(c, infos).map((s) => s.slot)).toEqual([0]);
    expect(syncRecPtr(c, infos)!.flush).toBe(100);
  });

  it('a replier that is not in the synchronous set releases nothing (am_sync)', () => {
    const { c, infos } = senders('s1, s2', ['s1', 100, 100, 100], ['s2', 900, 900, 900]);
    expect(syncRecPtr(c, infos, infos[1])).toBeNull();
    expect(syncRecPtr(c, infos, infos[0])).toEqual({ write: 100, flush: 100, apply: 100 });
  });
});

describe('pg_stat_replication sync_priority / sync_state', () => {
  it('a reconfiguration sequence: s1,s2 -> * -> FIRST 2 (s1,s2,s3) -> a sync standby stops -> ANY 2 (s1,s2)', () => {
    const all: Array<[string, number, number, number]> = [
      ['s1', 10, 10, 10],
      ['s2', 10, 10, 10],
      ['s3', 10, 10, 10],
    ];
    expect(rows('s1,s2', ...all)).toEqual([
      ['s1', 1, 'sync'],
      ['s2', 2, 'potential'],
      ['s3', 0, 'async'],
    ]);
    expect(rows('*', ...all)).toEqual([
      ['s1', 1, 'sync'],
      ['s2', 1, 'potential'],
      ['s3', 1, 'potential'],
    ]);
    expect(rows('FIRST 2(s1,s2,s3)', ...all)).toEqual([
      ['s1', 1, 'sync'],
      ['s2', 2, 'sync'],
      ['s3', 3, 'potential'],
    ]);
    // s1 stops: the potential standby takes over.
    expect(rows('FIRST 2(s1,s2,s3)', ['s2', 10, 10, 10], ['s3', 10, 10, 10])).toEqual([
      ['s2', 2, 'sync'],
      ['s3', 3, 'sync'],
    ]);
    expect(rows('ANY 2(s1,s2)', ['s2', 10, 10, 10], ['s3', 10, 10, 10])).toEqual([
      ['s2', 1, 'quorum'],
      ['s3', 0, 'async'],
    ]);
    expect(rows('ANY 2(s1,s2)', ...all)).toEqual([
      ['s1', 1, 'quorum'],
      ['s2', 1, 'quorum'],
      ['s3', 0, 'async'],
    ]);
  });

  it('a standby that has not reported a flush position shows priority 0, async', () => {
    expect(rows('s1', ['s1', 0, 0, 0])).toEqual([['s1', 0, 'async']]);
  });

  it('a listed standby still catching up is potential, even under ANY', () => {
    expect(rows('ANY 1 (s1, s2)', ['s1', 10, 10, 10], ['s2', 5, 5, 5, 'catchup'])).toEqual([
      ['s1', 1, 'quorum'],
      ['s2', 1, 'potential'],
    ]);
  });

  it('everything is async with synchronous replication off', () => {
    const { infos } = senders('s1', ['s1', 10, 10, 10]);
    const st = syncStates(
      null,
      infos.map((i) => ({ ...i, priority: standbyPriority(null, 's1') })),
    );
    expect([...st.values()]).toEqual([{ priority: 0, state: 'async' }]);
  });
});
