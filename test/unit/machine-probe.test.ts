/**
 * predict's machine probe: the profile's I/O and memory terms scaled by the ratio of this machine's
 * probe to the calibration machine's (cost-model/machine-scale.ts), exactly; the terms the probe
 * does not measure left alone; a skipped, impossible or failing probe leaves the profile as loaded
 * and says why (scripts/predict/probe.ts). No timing is asserted: the probe figures are given.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadProfile } from '../../cost-model/profile.ts';
import {
  medianProbe,
  scaleProfileByProbe,
  type MachineProbe,
} from '../../cost-model/machine-scale.ts';
import {
  formatProbe,
  poolOfPgdata,
  overwriteInPlace,
  probeMachine,
  probeProfile,
} from '../../scripts/predict/probe.ts';

const base = loadProfile('seed-001');
const there: MachineProbe = {
  fsyncS: 2e-3,
  createUnlinkS: 1e-4,
  scanPerDescriptorS: 1e-9,
  scanDescriptors: 16384,
};
const here: MachineProbe = {
  fsyncS: 5e-3,
  createUnlinkS: 5e-5,
  scanPerDescriptorS: 3e-9,
  scanDescriptors: 16384,
};

describe('scaling a profile by the machine probe', () => {
  it('multiplies each term by here ÷ calibrated, exactly, and leaves the others', () => {
    const { profile, scaled } = scaleProfileByProbe(base, there, here);
    expect(scaled.map((t) => [t.probe, t.factor])).toEqual([
      ['fsyncS', 5e-3 / 2e-3],
      ['createUnlinkS', 5e-5 / 1e-4],
      ['scanPerDescriptorS', 3e-9 / 1e-9],
    ]);
    const c = (k: keyof typeof base.constants) => profile.constants[k].seconds;
    const b = (k: keyof typeof base.constants) => base.constants[k].seconds;
    expect(c('controlFile.update')).toBe(b('controlFile.update') * (5e-3 / 2e-3));
    expect(c('smgr.unlink')).toBe(b('smgr.unlink') * (5e-5 / 1e-4));
    expect(c('smgr.truncate')).toBe(b('smgr.truncate') * (5e-5 / 1e-4));
    expect(c('scan.single.memory')).toBe(b('scan.single.memory') * (3e-9 / 1e-9));
    expect(c('scan.multi.cache')).toBe(b('scan.multi.cache') * (3e-9 / 1e-9));
    expect(c('lookup.probe')).toBe(b('lookup.probe'));
    expect(c('record.HEAP_INSERT')).toBe(b('record.HEAP_INSERT'));
    expect(c('smgr.extend')).toBe(b('smgr.extend'));
    expect(profile.constants['smgr.unlink'].source).toMatch(/×0\.500 by this machine's probe/);
    expect(base.constants['smgr.unlink'].seconds).toBe(b('smgr.unlink')); // the input untouched
  });

  it('a scan of another size is not a machine ratio: the scan terms stay as calibrated', () => {
    // 16,384 descriptors (1 MiB, in the cache) against 2,621,440 (160 MiB, from memory): the
    // per-descriptor seconds differ by the tier and the timer's overhead, not by the machine.
    const { scaled, profile } = scaleProfileByProbe(base, there, {
      ...here,
      scanDescriptors: 2_621_440,
    });
    expect(scaled.map((t) => t.probe)).toEqual(['fsyncS', 'createUnlinkS']);
    expect(profile.constants['scan.multi.memory'].seconds).toBe(
      base.constants['scan.multi.memory'].seconds,
    );
  });

  it('an fsync measured another way on the calibration machine does not scale pg_control', () => {
    // The stored probes of the shipped profiles truncated and rewrote their file (no method);
    // predict's probe overwrites in place, as UpdateControlFile does.
    const { scaled } = scaleProfileByProbe(base, there, { ...here, fsyncMethod: 'overwrite' });
    expect(scaled.map((t) => t.probe)).toEqual(['createUnlinkS', 'scanPerDescriptorS']);
    const both = { ...there, fsyncMethod: 'overwrite' as const };
    const again = scaleProfileByProbe(base, both, { ...here, fsyncMethod: 'overwrite' });
    expect(again.scaled.map((t) => t.probe)).toContain('fsyncS');
  });

  it('a figure missing or zero on either side scales nothing of its own', () => {
    const { scaled } = scaleProfileByProbe(base, { ...there, fsyncS: 0 }, here);
    expect(scaled.map((t) => t.probe)).toEqual(['createUnlinkS', 'scanPerDescriptorS']);
  });
});

describe("the calibration machine's probe: the median of its runs' probes", () => {
  it("takes each figure's median on its own, leaving out figures that are not positive", () => {
    const p = (fsyncS: number, createUnlinkS: number, scanPerDescriptorS: number, n: number) => ({
      fsyncS,
      createUnlinkS,
      scanPerDescriptorS,
      scanDescriptors: n,
    });
    expect(
      medianProbe([
        p(1e-3, 9e-5, 2e-9, 16384),
        p(3e-3, 1e-5, 1e-9, 2621440),
        p(2e-3, 5e-5, 0, 131072),
      ]),
    ).toEqual({
      fsyncS: 2e-3,
      createUnlinkS: 5e-5,
      scanPerDescriptorS: (1e-9 + 2e-9) / 2, // the zero left out: two figures
      scanDescriptors: 131072,
    });
    // An even count: the mean of the middle two.
    expect(medianProbe([p(1e-3, 1e-5, 1e-9, 2), p(4e-3, 3e-5, 3e-9, 4)])).toEqual(
      p((1e-3 + 4e-3) / 2, (1e-5 + 3e-5) / 2, (1e-9 + 3e-9) / 2, 3),
    );
    expect(medianProbe([])).toBeNull();
  });
});

describe('predict: probe, or the profile unscaled and why', () => {
  const withProbe = { ...base, machineProbe: there };

  it('scales with the probe beside --pgdata and names the terms and factors', () => {
    const r = probeProfile(withProbe, '/x/standby', false, () => here);
    expect(r.report.unscaledBecause).toBeNull();
    expect(r.profile.constants['controlFile.update'].seconds).toBe(
      base.constants['controlFile.update'].seconds * 2.5,
    );
    expect(formatProbe(r.report)).toBe(
      'machine probe: controlFile.update ×2.50 (fsyncS 5.00 ms here vs 2.00 ms calibrated); smgr.create, smgr.unlink, smgr.truncate ×0.50 (createUnlinkS 50.00 µs here vs 100.00 µs calibrated); scan.single.cache, scan.single.memory, scan.multi.cache, scan.multi.memory, scan.hashBuild.cache, scan.hashBuild.memory ×3.00 (scanPerDescriptorS 3.00 ns here vs 1.00 ns calibrated)',
    );
  });

  it('--no-probe, no --pgdata, no stored probe, a failing probe: unscaled, saying why', () => {
    const never = () => {
      throw new Error('the probe must not run');
    };
    const cases = [
      probeProfile(withProbe, '/x', true, never),
      probeProfile(withProbe, undefined, false, never),
      probeProfile(base, '/x', false, () => here),
      probeProfile(withProbe, '/x', false, () => ({ error: 'EROFS: read-only file system' })),
    ];
    for (const r of cases) expect(r.profile).toBe(cases.indexOf(r) === 2 ? base : withProbe);
    expect(cases.map((r) => formatProbe(r.report))).toEqual([
      'machine probe: profile used unscaled (--no-probe)',
      'machine probe: profile used unscaled (no --pgdata: nothing to probe beside the standby)',
      'machine probe: profile used unscaled (the profile seed-001 stores no calibration-machine probe)',
      'machine probe: profile used unscaled (EROFS: read-only file system)',
    ]);
  });

  it('overwrites its file in place like pg_control: never truncated, never created', () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-probe-test-'));
    try {
      const f = path.join(d, 'control');
      fs.writeFileSync(f, Buffer.alloc(16384, 7));
      overwriteInPlace(f, Buffer.alloc(8192, 1));
      const after = fs.readFileSync(f);
      expect(after.length).toBe(16384);
      expect([after[0], after[8191], after[8192], after[16383]]).toEqual([1, 1, 7, 7]);
      expect(() => overwriteInPlace(path.join(d, 'absent'), Buffer.alloc(8192))).toThrow(/ENOENT/);
      const p = probeMachine(d, 30);
      expect('error' in p ? p.error : p.fsyncMethod).toBe('overwrite');
    } finally {
      fs.rmSync(d, { recursive: true, force: true });
    }
  });

  it('the real probe reports an unwritable place instead of throwing; sizes its scan like the pool', () => {
    const r = probeMachine('/proc/self/standby');
    expect('error' in r && r.error).toMatch(/cannot create a file beside \/proc\/self\/standby/);
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-probe-test-'));
    try {
      fs.writeFileSync(path.join(d, 'postgresql.conf'), "shared_buffers = '1GB'\n");
      fs.writeFileSync(path.join(d, 'postgresql.auto.conf'), 'shared_buffers = 256MB # later\n');
      expect(poolOfPgdata(d)).toBe(32_768);
      const p = probeMachine(d, 30);
      expect('error' in p ? p.error : p.scanDescriptors).toBe(32_768);
      expect(fs.readdirSync(path.dirname(d)).some((f) => f.startsWith('.walsim-probe-'))).toBe(
        false,
      );
    } finally {
      fs.rmSync(d, { recursive: true, force: true });
    }
  });
});
