/**
 * A profile's I/O and memory terms scaled from the machine it was calibrated on to the machine a
 * prediction runs on, by the ratio of one short probe measured on each (scripts/predict/probe.ts):
 * the fsync of a small file prices what waits for a flush (pg_control updates), a file's create +
 * unlink prices the smgr's file operations that change a directory or an inode's extents
 * (create, unlink, truncate) on the same file system, and a scan of a descriptor-sized array prices the
 * full scan's per-descriptor terms. Every other term (records, lookups, end of recovery) is left
 * as calibrated: the probe does not measure them. Pure arithmetic.
 *
 * Entry points: `MachineProbe`, `scaleProfileByProbe`, `ScaledTerm`, `PROBE_TERMS`, `medianProbe`.
 */
import type { CostConstantName, CostProfile, MachineProbe } from './profile.ts';

export type { MachineProbe };

/** Which probe figure scales which constants. */
export const PROBE_TERMS: Record<
  'fsyncS' | 'createUnlinkS' | 'scanPerDescriptorS',
  readonly CostConstantName[]
> = {
  fsyncS: ['controlFile.update'],
  createUnlinkS: ['smgr.create', 'smgr.unlink', 'smgr.truncate'],
  scanPerDescriptorS: [
    'scan.single.cache',
    'scan.single.memory',
    'scan.multi.cache',
    'scan.multi.memory',
    'scan.hashBuild.cache',
    'scan.hashBuild.memory',
  ],
};

export interface ScaledTerm {
  probe: keyof typeof PROBE_TERMS;
  constants: readonly CostConstantName[];
  /** here ÷ calibration machine. */
  factor: number;
  calibratedS: number;
  hereS: number;
}

/**
 * The profile with each probe figure's constants multiplied by here ÷ there; a figure that is not
 * a positive finite number on either side, or a scan of another number of descriptors, leaves its
 * constants as they are (not listed).
 */
export function scaleProfileByProbe(
  profile: CostProfile,
  calibrated: MachineProbe,
  here: MachineProbe,
): { profile: CostProfile; scaled: ScaledTerm[] } {
  const constants = { ...profile.constants };
  const scaled: ScaledTerm[] = [];
  for (const probe of Object.keys(PROBE_TERMS) as Array<keyof typeof PROBE_TERMS>) {
    const there = calibrated[probe];
    const now = here[probe];
    if (!(there > 0 && now > 0 && Number.isFinite(there) && Number.isFinite(now))) continue;
    // A scan's seconds per descriptor depend on its size (the cache tier, the timer's overhead on
    // a short scan): only a scan of as many descriptors is a ratio of machines.
    if (probe === 'scanPerDescriptorS' && calibrated.scanDescriptors !== here.scanDescriptors)
      continue;
    // An fsync after a truncating rewrite (block freed and reallocated, a discard on this kind of
    // mount) against one after an overwrite in place is two operations, not two machines.
    if (probe === 'fsyncS' && calibrated.fsyncMethod !== here.fsyncMethod) continue;
    const factor = now / there;
    for (const k of PROBE_TERMS[probe])
      constants[k] = {
        ...constants[k],
        seconds: constants[k].seconds * factor,
        source: `${constants[k].source}; ×${factor.toFixed(3)} by this machine's probe (${probe})`,
      };
    scaled.push({ probe, constants: PROBE_TERMS[probe], factor, calibratedS: there, hereS: now });
  }
  return { profile: { ...profile, constants }, scaled };
}

/**
 * One probe standing for many (a calibration's runs, each probed as predict probes before it
 * prices): each figure's median over the probes whose figure is a positive finite number; null
 * when no probe is given. `scanDescriptors` is the median too (the pools differ cell to cell).
 */
export function medianProbe(probes: readonly MachineProbe[]): MachineProbe | null {
  if (probes.length === 0) return null;
  const med = (k: Exclude<keyof MachineProbe, 'fsyncMethod'>): number => {
    const v = probes
      .map((p) => p[k])
      .filter((x) => Number.isFinite(x) && x > 0)
      .sort((a, b) => a - b);
    if (v.length === 0) return NaN;
    const m = v.length >> 1;
    return v.length % 2 ? v[m]! : (v[m - 1]! + v[m]!) / 2;
  };
  // The fsync figure's method when every probe used it (a mix leaves the older way's mark off).
  const overwrite = probes.every((p) => p.fsyncMethod === 'overwrite');
  return {
    ...(overwrite ? { fsyncMethod: 'overwrite' as const } : {}),
    fsyncS: med('fsyncS'),
    createUnlinkS: med('createUnlinkS'),
    scanPerDescriptorS: med('scanPerDescriptorS'),
    scanDescriptors: med('scanDescriptors'),
  };
}
