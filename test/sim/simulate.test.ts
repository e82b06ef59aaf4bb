/**
 * Deterministic simulation of the whole cluster (sim/): a primary and 1–4 standbys in every drawn
 * topology (flat, cascaded, each synchronous_standby_names form), seeded scenarios of the SQL subset with
 * crashes, power losses, stops of every mode, cuts, partitions, a full pg_wal on either node, flipped bytes in
 * either node's WAL, a slow disk (writes and fsyncs), clock jumps and failovers, run on simulated
 * time, network and disk with the production node code; since scenario format 2 also VACUUM
 * truncations, TRUNCATE of many tables in one transaction, standby restarts before drops and
 * faults inside drops, each drop checked by SIM-10. Method: run a block of seeds and require
 * zero invariant violations and zero lost acknowledged commits, with every fault kind drawn on
 * every node it may hit; run one seed twice and require the identical trace.
 */
import { describe, expect, it } from 'vitest';
import { generateScenario, TWO_NODES } from '../../sim/scenario.ts';
import { runSimulation } from '../../sim/simulation.ts';

/**
 * CI's share of the seed space (the CLI runs as many as asked: `npm run simulate -- --seeds N`):
 * seeds 1–300. Was 1–500 with two nodes only; a seed of several nodes costs about 2.2 times a
 * two-node one (RELIABILITY.md), so 300 of every topology take the time 500 two-node seeds took.
 */
const CI_SEEDS = Number(process.env.WALSIM_SIM_SEEDS ?? 300);

describe('simulation', () => {
  it(`${CI_SEEDS} seeds: no invariant violation, no acknowledged commit lost`, async () => {
    const failures: string[] = [];
    let acknowledged = 0;
    let lost = 0;
    const faultKinds = new Set<string>();
    const faultKindsByNode = new Set<string>();
    const topologies = new Set<string>();
    const drops = new Set<string>();
    let truncated = 0;
    for (let seed = 1; seed <= CI_SEEDS; seed++) {
      const r = await runSimulation(generateScenario(seed));
      acknowledged += r.acknowledged;
      for (const k of Object.keys(r.drops)) drops.add(k);
      if (Object.keys(r.drops).some((k) => k.includes('truncation'))) truncated++;
      for (const k of r.topology) topologies.add(k);
      lost += r.lost;
      for (const k of Object.keys(r.faults)) {
        faultKinds.add(k.replace(/ \(.*\)$/, ''));
        faultKindsByNode.add(k);
      }
      if (!r.ok)
        failures.push(
          `seed ${seed}: ${r.violations[0]} (replay: npm run simulate -- --seed ${seed} --trace)`,
        );
    }
    expect(failures).toEqual([]);
    expect(lost).toBe(0);
    // The drop mechanism was reached (scenario format 2): truncations in at least 30 % of the
    // seeds; replayed drops on both paths, the full scan for want of a cached size and for too
    // many blocks, of one relation and of more than 20 (SIM-10 checked each); faults inside
    // drops fired on the primary and in replay.
    expect(truncated).toBeGreaterThanOrEqual(CI_SEEDS * 0.3);
    for (const k of [
      'replay truncation: cached-lookup',
      'replay truncation: full-scan (blocks to drop ≥ NBuffers/32)',
      'replay drop of ≤ 20 relations: cached-lookup',
      'replay drop of ≤ 20 relations: full-scan (a size not cached)',
      'replay drop of > 20 relations: full-scan (blocks to drop ≥ NBuffers/32)',
      'primary truncation: full-scan (not in recovery)',
    ])
      expect([...drops]).toContain(k);
    for (const k of [
      'drop fault fired: io before truncating fork #0 (primary)',
      'drop fault fired: crash before the unlinks (standby replay)',
    ])
      expect([...faultKindsByNode]).toContain(k);
    // The run did something: commits were acknowledged and every fault family was drawn.
    expect(acknowledged).toBeGreaterThan(CI_SEEDS * 5);
    for (const k of [
      'crash',
      'power loss',
      'stop -m fast',
      'stop -m smart',
      'stop -m immediate',
      'connection cut',
      'partition',
      'disk full',
      'corruption',
      'slow disk',
      'clock jump',
      'failover',
    ]) {
      expect([...faultKinds]).toContain(k);
    }
    // …on either node where the fault atlas allows it.
    for (const k of [
      'disk full (primary pg_wal)',
      'disk full (standby pg_wal)',
      'corruption (primary WAL)',
      'corruption (standby WAL)',
      'slow disk (primary)',
      'slow disk (standby)',
      'clock jump (primary)',
      'clock jump (standby)',
    ]) {
      expect([...faultKindsByNode]).toContain(k);
    }
    // Every topology kind was drawn, and what only several nodes have.
    for (const k of [
      '2 nodes',
      '3 nodes',
      '4 nodes',
      '5 nodes',
      'flat',
      'cascaded',
      "'a'",
      "'a, b, …'",
      'FIRST n (…)',
      'ANY n (…)',
      "'*'",
      'no synchronous standby',
      'careful operator',
      'any operator',
    ])
      expect([...topologies]).toContain(k);
    for (const k of [
      'switchover',
      'rejoin',
      'rejoin refused (diverged)',
      'repoint (cascade)',
      'partition (primary with one standby)',
      'failover choice refused (behind another standby)',
    ])
      expect([...faultKindsByNode]).toContain(k);
  }, 600_000);

  /**
   * Seeds that failed before the fixes they led to: 626 (a checkpoint wrote its data image before
   * flushing the WAL it contains; power loss left the image ahead of the WAL), 169 (a fast stop
   * waited forever behind a commit waiting for an unreachable synchronous standby), 149 (a
   * reconnecting standby's START_REPLICATION position was taken for its replay position, releasing
   * remote_apply commits a paused standby had not replayed); 2146 (the simulated network opened a
   * connection cut while it was being established, which then escaped every later cut: a dead
   * primary's in-flight WAL reached the standby); 1672 and 2454 (a standby whose WAL was damaged at
   * the last step was not restarted before convergence, and a byte flipped in WAL the startup
   * process already held in memory was taken for one it would read); 777790 (the ledger took
   * synchronous_commit=off commits acknowledged 250–330 ms before a PANIC for durable, but the WAL
   * writer's flush had met a slow, then full pg_wal: PostgreSQL promises three wal_writer_delays
   * with a working disk only); 5016821 (a primary that PANICked as the faults were healed was
   * never started again: no convergence, and its crash-recovery ledger check never ran); 3000340
   * (the primary-corruption fault loaded the live primary's data image to find its REDO LSN, and
   * the load removed the files of the image a CHECKPOINT was still writing as leftovers).
   */
  it('the seeds that found bugs pass', async () => {
    // Found with two nodes, before topologies were drawn: they keep their two-node scenario.
    for (const seed of [149, 169, 626, 1672, 2146, 2454, 777790, 5016821, 3000340])
      expect((await runSimulation(generateScenario(seed, 40, TWO_NODES, 1))).violations).toEqual(
        [],
      );
    // Found with several nodes (their drawn topologies), both oracle holes: 41001232 (SIM-3 took a
    // standby whose crash recovery ended local WAL at a damaged record before its timeline's
    // branch point for one claiming a timeline it had not reached; also 41000750, 41002744),
    // 41000397 (SIM-8 took a standby in smart shutdown — the lifecycle's `stopping` is out of
    // recovery — for a second writer); 3700034318 (the primary-corruption fault flipped a byte
    // before the point where the primary's own timeline branched: a fault-atlas hole).
    // 3700049330 (after a failover onto a standby with a flipped byte before a commit it had
    // flushed, the ledger called the commit lost, not lost to corruption); 3700010935 and
    // 3700011387 (a standby cascaded below one that received past a corrupt primary record kept
    // receiving until that one stopped and was not re-cloned: no convergence).
    // 3700021682 (SIM-6 read the positions of a standby restarted on a flipped byte, behind
    // what its previous process had confirmed).
    // 2900033426 (a walsim bug: a paused standby that had followed its upstream onto timeline 3
    // restarted on a flipped byte below timeline 3's switch point and was promoted; its new
    // timeline's history named timeline 3 as the parent at a switch point before timeline 3
    // began — INV-WAL-5 — instead of the timeline the end of WAL lies on; also 2900041300).
    // 2900061853 (an oracle hole: the one synchronous standby's copy of an acknowledged CREATE
    // TABLE was destroyed by a flipped byte, then the primary was lost; the ledger still counted
    // that copy and called the commit lost rather than lost to corruption). 3100017703 (an
    // oracle hole: a standby's slow disk stalled simulated time for every machine, so the
    // primary's WAL writer missed its 600 ms for a synchronous_commit=off commit).
    for (const seed of [
      41001232, 41000397, 3700034318, 3700049330, 3700010935, 3700011387, 3700021682, 2900033426,
      2900041300, 2900061853, 3100017703,
    ])
      expect((await runSimulation(generateScenario(seed, 40, undefined, 1))).violations).toEqual(
        [],
      );
    // Scenario format 2: 4200000037 (a crash armed inside a drop fired in the paused standby's
    // last replay as it was promoted; the operator now starts it again and promotes it).
    expect(
      (await runSimulation(generateScenario(4200000037, 40, undefined, 2))).violations,
    ).toEqual([]);
    // Scenario format 3, found by SIM-11 (simulator bugs: a process that PANICked inside a drop
    // went on running until the next event). 4000001650, 4000001869, 4000151388: a CHECKPOINT
    // queued behind the VACUUM whose truncation PANICked (or crashed) still ran in the dead
    // process and wrote a data image (file untruncated) and a checkpoint record past the flushed
    // truncation record the standbys replayed, so crash recovery skipped it.
    // 4000151962: the convergence check compared a primary that had just PANICked (not yet
    // crash-recovered) with standbys that had replayed its flushed truncation.
    for (const seed of [4000001650, 4000001869, 4000151388, 4000151962])
      expect((await runSimulation(generateScenario(seed, 40, undefined, 3))).violations).toEqual(
        [],
      );
    // 1600167649, 1600090358, 1600123932, 1600213475 (an operator-model bug): a switchover stopped
    // before its promotion (the target's process ended in an armed drop fault) left the handed-over
    // synchronous_standby_names as the cluster's, so the old primary restarted waiting for its own
    // name, or for ANY 3 over a list naming one standby twice: no convergence.
    // 1600070391 (an operator-model gap): a standby down while a re-cloned node was promoted needed
    // WAL the new primary never had (its pg_wal began at its base backup); it is re-cloned now.
    // 1600014820 (an operator-model bug): a cascaded standby judged fine after a failover then
    // followed its diverged, still stopping upstream onto the dead timeline and was not re-cloned.
    for (const seed of [1600167649, 1600090358, 1600123932, 1600213475, 1600070391, 1600014820])
      expect((await runSimulation(generateScenario(seed, 40, undefined, 3))).violations).toEqual(
        [],
      );
    // 1600033957 (an operator-model bug): the promoted standby's process ended in its armed drop
    // fault, another standby's ended in its own during the wait, and the operator's retry read the
    // cluster's last expected exit (that one) instead of the promoted process's own: no promotion.
    expect(
      (await runSimulation(generateScenario(1600033957, 40, undefined, 3))).violations,
    ).toEqual([]);
    // 1800019708 (an oracle hole): a byte flipped in the synchronous standby's WAL between its
    // reply and the remote_write acknowledgement it released; the ledger counted that copy, so
    // the loss at the failover was called a broken promise instead of media corruption's.
    expect(
      (await runSimulation(generateScenario(1800019708, 40, undefined, 3))).violations,
    ).toEqual([]);
  }, 180_000);

  it('replays a seed exactly: same events in the same order, same trace', async () => {
    const a = await runSimulation(generateScenario(7), { trace: true });
    const b = await runSimulation(generateScenario(7), { trace: true });
    expect(a.trace!.length).toBeGreaterThan(100);
    expect(b.trace).toEqual(a.trace);
    expect(b.traceHash).toBe(a.traceHash);
  });
});
