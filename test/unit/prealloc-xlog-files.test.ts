/**
 * PostgreSQL's PreallocXlogFiles(EndOfLog, newTLI) at the end of recovery, as predict counts it
 * (storage/replay-counts.ts `walSegmentsPreallocated`): the next segment is made when the offset of
 * EndOfLog − 1 in its segment is at least 0.75 of the segment size, never when EndOfLog starts a
 * segment (XLogInitNewTimeline made that one). Method: the boundaries, exactly, at 16 MB and 1 MB.
 */
import { describe, expect, it } from 'vitest';
import { promotionStepCounts, walSegmentsPreallocated } from '../../storage/replay-counts.ts';

const MB = 1 << 20;

describe('walSegmentsPreallocated', () => {
  it('makes the next segment from the last quarter of a 16 MB segment on, by EndOfLog − 1', () => {
    const seg = 16 * MB;
    const quarter = 12 * MB; // 0.75 × 16 MB
    const at = (segno: number, offset: number) =>
      walSegmentsPreallocated(segno * seg + offset, seg);
    expect(at(3, 1)).toBe(0);
    expect(at(3, quarter)).toBe(0); // EndOfLog − 1 is one byte short of the last quarter
    expect(at(3, quarter + 1)).toBe(1);
    expect(at(3, seg - 8)).toBe(1);
    expect(at(4, 0)).toBe(0); // EndOfLog starts segment 4: XLogInitNewTimeline created it
    expect(at(4, 8)).toBe(0);
    // The 16 bench's two missed cells: WAL ending at 0.76 of its segment.
    expect(at(3, Math.round(0.76 * seg))).toBe(1);
  });

  it('scales with wal_segment_size', () => {
    expect(walSegmentsPreallocated(0.75 * MB + 1, MB)).toBe(1);
    expect(walSegmentsPreallocated(0.75 * MB, MB)).toBe(0);
    expect(walSegmentsPreallocated(64 * MB + 0.75 * MB + 1, 64 * MB)).toBe(0);
  });

  it('refuses an LSN or segment size that is not one', () => {
    expect(() => walSegmentsPreallocated(0, 16 * MB)).toThrow(/EndOfLog 0/);
    expect(() => walSegmentsPreallocated(100, Number.NaN)).toThrow(/wal_segment_size NaN/);
  });

  it('is counted in the open-for-writes steps of a promotion', () => {
    expect(promotionStepCounts(1).openForWrites).toEqual({
      controlFileUpdates: 1,
      walSegmentPreallocs: 1,
    });
    expect(promotionStepCounts(0).openForWrites.walSegmentPreallocs).toBe(0);
    // walsim's own promotion preallocates nothing, and its counts leave the field out.
    expect(promotionStepCounts().openForWrites).toEqual({ controlFileUpdates: 1 });
  });
});
