/**
 * The probe predict runs on the machine it answers for (cost-model/machine-scale.ts says what each
 * figure scales): in a temporary directory beside the standby's data directory (the same file
 * system; nothing inside the data directory is touched), the overwrite in place + fsync of an
 * allocated 8 KiB file (as UpdateControlFile writes pg_control: `overwriteInPlace`), the
 * create + unlink of empty files, and a scan of an array of 64-byte descriptors sized like the
 * standby's pool (its shared_buffers from postgresql.conf / postgresql.auto.conf). Bounded: each
 * part stops at its share of `budgetMs` (default 300 ms) and the scan at 2.6 M descriptors (20GB).
 * A failure (read-only file system, no permission) is returned as a reason, never thrown.
 *
 * Entry points: `probeMachine`, `probeProfile`, `formatProbe`, `ProbeReport`, `poolOfPgdata`,
 * `PROBE_BUDGET_MS`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseSharedBuffers } from '../../storage/shared-buffers.ts';
import {
  scaleProfileByProbe,
  type MachineProbe,
  type ScaledTerm,
} from '../../cost-model/machine-scale.ts';
import type { CostProfile } from '../../cost-model/profile.ts';

export const PROBE_BUDGET_MS = 300;
/** At most this many fsync rounds in the fsync's share of the budget: a median of many. */
const FSYNC_ROUNDS = 200;
const MAX_DESCRIPTORS = parseSharedBuffers('20GB').nBuffers;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** The standby's shared_buffers in buffers: the last setting in its conf files, else 128MB. */
export function poolOfPgdata(pgdata: string): number {
  let value = '128MB';
  for (const f of ['postgresql.conf', 'postgresql.auto.conf']) {
    let text = '';
    try {
      text = fs.readFileSync(path.join(pgdata, f), 'utf8');
    } catch {
      continue;
    }
    for (const m of text.matchAll(/^\s*shared_buffers\s*=\s*'?([^'#\s]+)'?/gm)) value = m[1]!;
  }
  try {
    return parseSharedBuffers(value).nBuffers;
  } catch {
    return parseSharedBuffers('128MB').nBuffers;
  }
}

/** Run `op` until `ms` elapsed or `max` times (at least once): seconds per run, median. */
function timed(op: (i: number) => void, ms: number, max: number): number {
  const out: number[] = [];
  const end = performance.now() + ms;
  for (let i = 0; i < max && (i === 0 || performance.now() < end); i++) {
    const t = performance.now();
    op(i);
    out.push((performance.now() - t) / 1000);
  }
  return median(out);
}

/** Seconds per descriptor of a scan reading one 8-byte tag from each 64-byte descriptor. */
function scanSeconds(descriptors: number, ms: number): number {
  const tags = new BigInt64Array(descriptors * 8); // 64 bytes a descriptor
  tags.fill(1n);
  let sink = 0n;
  const s = timed(
    () => {
      for (let i = 0; i < tags.length; i += 8) if (tags[i] === 7n) sink++;
    },
    ms,
    3,
  );
  return sink < 0n ? NaN : s / descriptors;
}

/**
 * pg_control's write (UpdateControlFile): open read-write, 8 KiB written at offset 0, fsync, close.
 * The file's block stays allocated; opening with truncation would free it and allocate it again
 * every round (a synchronous discard on a `discard` mount), which pg_control never pays.
 */
export function overwriteInPlace(file: string, page: Buffer): void {
  const fd = fs.openSync(file, 'r+');
  try {
    fs.writeSync(fd, page, 0, page.length, 0);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** The probe beside `pgdata`, or why it could not run. */
export function probeMachine(
  pgdata: string,
  budgetMs = PROBE_BUDGET_MS,
): MachineProbe | { error: string } {
  let dir: string;
  try {
    dir = fs.mkdtempSync(path.join(path.dirname(path.resolve(pgdata)), '.walsim-probe-'));
  } catch (e) {
    return { error: `cannot create a file beside ${pgdata}: ${(e as Error).message}` };
  }
  try {
    const page = Buffer.alloc(8192, 1);
    const file = path.join(dir, 'f');
    // Allocated and written back once, like an existing pg_control; then overwritten in place.
    fs.writeFileSync(file, page);
    overwriteInPlace(file, page);
    const fsyncS = timed(() => overwriteInPlace(file, page), budgetMs / 3, FSYNC_ROUNDS);
    const createUnlinkS = timed(
      (i) => {
        const f = path.join(dir, `c${i}`);
        fs.closeSync(fs.openSync(f, 'w'));
        fs.unlinkSync(f);
      },
      budgetMs / 3,
      200,
    );
    const scanDescriptors = Math.min(poolOfPgdata(pgdata), MAX_DESCRIPTORS);
    const scanPerDescriptorS = scanSeconds(scanDescriptors, budgetMs / 3);
    return { fsyncS, fsyncMethod: 'overwrite', createUnlinkS, scanPerDescriptorS, scanDescriptors };
  } catch (e) {
    return { error: `probe beside ${pgdata} failed: ${(e as Error).message}` };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** What the probe did to the profile: the terms scaled and by how much, or why none was. */
export interface ProbeReport {
  scaled: ScaledTerm[];
  /** null when the profile was scaled; else why it is used as calibrated. */
  unscaledBecause: string | null;
  here: MachineProbe | null;
  calibrated: MachineProbe | null;
}

/** Probe beside `pgdata` (unless skipped) and scale the profile from its stored probe. */
export function probeProfile(
  profile: CostProfile,
  pgdata: string | undefined,
  skip: boolean,
  probe: (dir: string) => MachineProbe | { error: string } = probeMachine,
): { profile: CostProfile; report: ProbeReport } {
  const calibrated = profile.machineProbe ?? null;
  const none = (why: string, here: MachineProbe | null = null) => ({
    profile,
    report: { scaled: [], unscaledBecause: why, here, calibrated },
  });
  if (skip) return none('--no-probe');
  if (pgdata === undefined) return none('no --pgdata: nothing to probe beside the standby');
  const here = probe(pgdata);
  if ('error' in here) return none(here.error);
  if (calibrated === null)
    return none(`the profile ${profile.name} stores no calibration-machine probe`, here);
  const s = scaleProfileByProbe(profile, calibrated, here);
  return {
    profile: s.profile,
    report: { scaled: s.scaled, unscaledBecause: null, here, calibrated },
  };
}

/** One line: which terms were scaled and by how much, or that the profile is used unscaled and why. */
export function formatProbe(r: ProbeReport): string {
  if (r.unscaledBecause !== null)
    return `machine probe: profile used unscaled (${r.unscaledBecause})`;
  const parts = r.scaled.map(
    (t) =>
      `${t.constants.join(', ')} ×${t.factor.toFixed(2)} (${t.probe} ${fmt(t.hereS)} here vs ${fmt(t.calibratedS)} calibrated)`,
  );
  return `machine probe: ${parts.length === 0 ? 'no term scaled' : parts.join('; ')}`;
}

const fmt = (s: number) =>
  s >= 1e-3
    ? `${(s * 1e3).toFixed(2)} ms`
    : s >= 1e-6
      ? `${(s * 1e6).toFixed(2)} µs`
      : `${(s * 1e9).toFixed(2)} ns`;
