/**
 * The pieces behind run-time topology changes, in memory: primary_conninfo parsing, the SQL forms
 * (ALTER SYSTEM, SELECT … FROM pg_stat_replication), ALTER SYSTEM's file over walsim.conf.json, and
 * the walsender set's release, reload and takeover rules with stand-in walsenders.
 * Method: pure calls; a temp directory for the settings files.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatConninfo, parseConninfo } from '../../server/settings.ts';
import { parseStatement } from '../../sql/parser.ts';
import {
  alterSystem,
  loadNodeConfig,
  primaryConninfoOf,
  type NodeConfig,
} from '../../server/cluster-files.ts';
import { SyncRepQueue } from '../../primary/syncrep.ts';
import { WalSenderSet } from '../../primary/walsender-set.ts';
import { parseSynchronousStandbyNames } from '../../primary/sync-standby-names.ts';
import { switchPointOf, type WalSender } from '../../primary/walsender.ts';
import { parseTimelineHistory } from '../../wal/segment.ts';
import { WalsimError } from '../../common/errors.ts';
import { nodeDisk } from '../../common/node-disk.ts';

describe('primary_conninfo', () => {
  it('parses keyword=value pairs, quoted values with escapes, and formats them back', () => {
    expect(parseConninfo('host=127.0.0.1 port=5433 application_name=s2')).toEqual({
      host: '127.0.0.1',
      port: 5433,
      applicationName: 's2',
    });
    expect(parseConninfo("  port = 7  application_name='a b\\'c' user=x ")).toEqual({
      host: null,
      port: 7,
      applicationName: "a b'c",
    });
    expect(parseConninfo('')).toEqual({ host: null, port: null, applicationName: null });
    expect(formatConninfo({ host: '127.0.0.1', port: 5433, applicationName: "a b'c" })).toBe(
      "host=127.0.0.1 port=5433 application_name='a b\\'c'",
    );
  });

  it('refuses what libpq refuses', () => {
    expect(() => parseConninfo('hots=x')).toThrow('invalid connection option "hots"');
    expect(() => parseConninfo('port=0')).toThrow('invalid port number: "0"');
    expect(() => parseConninfo('host')).toThrow('missing "="');
    expect(() => parseConninfo("application_name='x")).toThrow('unterminated quoted string');
  });
});

describe('SQL for topologies', () => {
  it("ALTER SYSTEM SET / TO / DEFAULT / RESET, with '' inside strings", () => {
    expect(
      parseStatement('ALTER SYSTEM SET synchronous_standby_names = \'ANY 1 ("a", b)\''),
    ).toEqual({ type: 'alter_system', name: 'synchronous_standby_names', value: 'ANY 1 ("a", b)' });
    expect(parseStatement("alter system set primary_conninfo to 'application_name=''x'''")).toEqual(
      { type: 'alter_system', name: 'primary_conninfo', value: "application_name='x'" },
    );
    expect(parseStatement('ALTER SYSTEM SET synchronous_commit = on')).toEqual({
      type: 'alter_system',
      name: 'synchronous_commit',
      value: 'on',
    });
    expect(parseStatement('ALTER SYSTEM SET synchronous_commit TO DEFAULT')).toEqual({
      type: 'alter_system',
      name: 'synchronous_commit',
      value: null,
    });
    expect(parseStatement('ALTER SYSTEM RESET synchronous_standby_names;')).toEqual({
      type: 'alter_system',
      name: 'synchronous_standby_names',
      value: null,
    });
    expect(() => parseStatement('ALTER SYSTEM SET x')).toThrow(WalsimError);
  });

  it('SELECT columns or * FROM a view, optionally qualified, with ORDER BY', () => {
    expect(
      parseStatement(
        'SELECT application_name, sync_state FROM pg_stat_replication ORDER BY application_name',
      ),
    ).toEqual({
      type: 'select_view',
      view: 'pg_stat_replication',
      columns: ['application_name', 'sync_state'],
      orderBy: 'application_name',
    });
    expect(parseStatement('select * from pg_catalog.pg_stat_wal_receiver')).toEqual({
      type: 'select_view',
      view: 'pg_stat_wal_receiver',
      columns: '*',
      orderBy: null,
    });
    expect(parseStatement('SELECT count(*) FROM t').type).toBe('select_count');
  });
});

describe('ALTER SYSTEM file', () => {
  it('overrides walsim.conf.json, validates before writing, and RESET falls back', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-unit-'));
    try {
      const base = {
        name: 's2',
        synchronousStandbyNames: '',
        synchronousCommit: 'remote_write',
        primaryHost: '127.0.0.1',
        primaryPort: 1000,
        applicationName: 's2',
      } as unknown as NodeConfig;
      fs.writeFileSync(path.join(dir, 'walsim.conf.json'), JSON.stringify(base));
      alterSystem(
        dir,
        'primary_conninfo',
        'host=127.0.0.1 port=2000 application_name=s2',
        nodeDisk,
      );
      alterSystem(dir, 'synchronous_standby_names', 'FIRST 2 (a, b)', nodeDisk);
      expect(() => alterSystem(dir, 'synchronous_standby_names', 'FIRST 2', nodeDisk)).toThrow(
        'invalid value for parameter "synchronous_standby_names": "FIRST 2"',
      );
      expect(() => alterSystem(dir, 'synchronous_commit', 'maybe', nodeDisk)).toThrow(
        'invalid value for parameter "synchronous_commit"',
      );
      const c = loadNodeConfig(dir, nodeDisk);
      expect(c).toMatchObject({
        primaryPort: 2000,
        synchronousStandbyNames: 'FIRST 2 (a, b)',
        synchronousCommit: 'remote_write',
      });
      expect(primaryConninfoOf(c)).toBe('host=127.0.0.1 port=2000 application_name=s2');
      alterSystem(dir, 'primary_conninfo', null, nodeDisk);
      expect(loadNodeConfig(dir, nodeDisk).primaryPort).toBe(1000);
      alterSystem(dir, 'primary_conninfo', '', nodeDisk);
      expect(loadNodeConfig(dir, nodeDisk).primaryPort).toBeNull(); // no upstream
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** A stand-in for a walsender: the fields the set reads and writes. */
function fakeSender(applicationName: string, state: WalSender['state'] = 'streaming'): WalSender {
  return {
    applicationName,
    state,
    slot: -1,
    priority: 0,
    cascading: false,
    sentLsn: 0,
    writeLsn: 0,
    flushLsn: 0,
    applyLsn: 0,
    replyTime: null,
    timelineEnds: 0,
    pump() {},
  } as unknown as WalSender;
}

function reply(set: WalSenderSet, s: WalSender, lsn: number): void {
  s.sentLsn = s.writeLsn = s.flushLsn = s.applyLsn = lsn;
  set.onReply(s);
}

describe('WalSenderSet', () => {
  it('takes the lowest free slot, releases by FIRST 1, lets the potential standby take over, logs takeovers', async () => {
    const q = new SyncRepQueue(() => Date.now());
    const log: string[] = [];
    const set = new WalSenderSet(q, parseSynchronousStandbyNames('s1, s2'), (m) => log.push(m));
    const [a, b] = [fakeSender('s1'), fakeSender('s2')];
    set.add(a);
    set.add(b);
    set.startStreaming(a, false);
    set.startStreaming(b, false);
    expect([a.slot, b.slot, a.priority, b.priority]).toEqual([0, 1, 1, 2]);
    let done = false;
    const w = q.wait(500, 'flush').then(() => (done = true));
    reply(set, a, 100); // s1 is synchronous and has 100
    reply(set, b, 900); // the potential standby's reply releases nothing
    await Promise.resolve();
    expect(done).toBe(false);
    set.remove(a); // s1 gone: s2 is synchronous and already has 900
    await w;
    expect(log).toEqual([
      'LOG:  standby "s1" is now a synchronous standby with priority 1',
      'LOG:  standby "s2" is now a synchronous standby with priority 2',
    ]);
    const c = fakeSender('s3');
    set.add(c);
    expect(c.slot).toBe(0); // the freed slot
  });

  it('a cascading walsender never releases; reloading to an empty setting wakes every waiter', async () => {
    const q = new SyncRepQueue(() => Date.now());
    const set = new WalSenderSet(q, parseSynchronousStandbyNames('*'), () => {});
    const a = fakeSender('s1');
    set.add(a);
    set.startStreaming(a, true);
    expect(a.priority).toBe(0);
    let done = false;
    const w = q.wait(100, 'write').then(() => (done = true));
    reply(set, a, 1000);
    await Promise.resolve();
    expect(done).toBe(false);
    expect(set.rows()[0]).toMatchObject({
      application_name: 's1',
      sync_priority: 0,
      sync_state: 'async',
    });
    set.reload(null);
    await w;
    expect(q.enabled).toBe(false);
    expect(await q.wait(5000, 'flush')).toBeNull(); // no wait at all now
  });

  it('ANY 2: released at the second-highest position; rows say quorum', async () => {
    const q = new SyncRepQueue(() => Date.now());
    const set = new WalSenderSet(q, parseSynchronousStandbyNames('ANY 2 (s1, s2, s3)'), () => {});
    const s = ['s1', 's2', 's3'].map((n) => fakeSender(n));
    for (const x of s) {
      set.add(x);
      set.startStreaming(x, false);
    }
    let released = 0;
    void q.wait(300, 'flush').then(() => released++);
    void q.wait(600, 'flush').then(() => released++);
    reply(set, s[0]!, 700);
    reply(set, s[1]!, 200);
    await Promise.resolve();
    expect(released).toBe(0); // second highest is 200
    reply(set, s[2]!, 400);
    await new Promise((r) => setImmediate(r));
    expect(released).toBe(1); // 400 covers 300, not 600
    expect(set.rows().map((r) => r.sync_state)).toEqual(['quorum', 'quorum', 'quorum']);
  });
});

describe('switchPointOf (tliSwitchPoint)', () => {
  it('gives where a timeline ends and the next one; null for the current or an unknown timeline', () => {
    const h = parseTimelineHistory('1\t0/3000060\tx\n2\t0/5000000\ty\n', 3);
    expect(switchPointOf(1, h)).toEqual({ upto: 0x3000060, nextTli: 2 });
    expect(switchPointOf(2, h)).toEqual({ upto: 0x5000000, nextTli: 3 });
    expect(switchPointOf(3, h)).toBeNull();
    expect(switchPointOf(7, h)).toBeNull();
  });
});

describe('cluster shapes', () => {
  it("plannedStandbys: the seed's one standby by default, named standbys listed in order, bad names refused", async () => {
    const { plannedStandbys } = await import('../../server/initdb.ts');
    expect(plannedStandbys({})).toEqual({
      standbys: [{ name: 'standby', applicationName: 'walreceiver' }],
      synchronousStandbyNames: 'walreceiver',
    });
    expect(plannedStandbys({ standbys: ['s1', 's2'] })).toEqual({
      standbys: [
        { name: 's1', applicationName: 's1' },
        { name: 's2', applicationName: 's2' },
      ],
      synchronousStandbyNames: 's1, s2',
    });
    expect(
      plannedStandbys({ standbys: ['s1'], synchronousStandbyNames: '' }).synchronousStandbyNames,
    ).toBe('');
    expect(() => plannedStandbys({ standbys: ['S1'] })).toThrow('lower-case identifier');
    expect(() => plannedStandbys({ standbys: ['a', 'a'] })).toThrow('named twice');
    expect(() => plannedStandbys({ standbys: ['primary'] })).toThrow('cannot be named "primary"');
    expect(() =>
      plannedStandbys({ standbys: ['a'], synchronousStandbyNames: 'ANY 0 (a)' }),
    ).toThrow('must be greater than zero');
  });

  it("handOverNames: the promoted standby's name becomes the old primary's, keeping the form", async () => {
    const { handOverNames } = await import('../../server/topology.ts');
    expect(handOverNames('walreceiver', 'walreceiver', 'primary')).toBe('primary');
    expect(handOverNames('s1, s2', 'S1', 'primary')).toBe('primary, s2');
    expect(handOverNames('ANY 1 (s1, s2)', 's1', 'primary')).toBe('ANY 1 (primary, s2)');
    expect(handOverNames('FIRST 2 (*)', 's1', 'primary')).toBe('FIRST 2 (*)');
    expect(handOverNames('', 's1', 'primary')).toBe('');
    // The old primary listed already (one list on every node): the promoted standby's entry goes,
    // not a second `a` — PostgreSQL counts each walsender once, so ANY 3 (d, a, a) never holds.
    expect(handOverNames('ANY 3 (d, b, a, c)', 'b', 'a')).toBe('ANY 3 (d, a, c)');
    expect(handOverNames('FIRST 2 (b, c, A)', 'B', 'a')).toBe('FIRST 2 (c, A)');
    expect(handOverNames('a, b', 'b', 'a')).toBe('a');
  });
});
