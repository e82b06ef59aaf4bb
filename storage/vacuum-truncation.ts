/**
 * Whether lazy VACUUM truncates a relation's empty tail: should_attempt_truncation and its two
 * thresholds (vacuumlazy.c). A pure rule over two page counts; the executor asks it after a
 * VACUUM's prune, with HeapStore.nonEmptyPages as count_nondeletable_pages.
 */
import { fail } from '../common/assert.ts';

/** lazy vacuum truncation thresholds (vacuumlazy.c). */
export const REL_TRUNCATE_MINIMUM = 1000;
export const REL_TRUNCATE_FRACTION = 16;

/**
 * should_attempt_truncation (vacuumlazy.c) without the disabled-option and failsafe checks:
 * worth truncating when some trailing pages are free and they are ≥ 1000 or ≥ 1/16 of the
 * relation. `nonEmptyPages` is what count_nondeletable_pages returns (HeapStore.nonEmptyPages).
 */
export function shouldAttemptTruncation(relPages: number, nonEmptyPages: number): boolean {
  if (!(
    Number.isInteger(relPages) &&
    Number.isInteger(nonEmptyPages) &&
    nonEmptyPages >= 0 &&
    nonEmptyPages <= relPages
  ))
    fail(`INV-HEAP-1: nonempty pages ${nonEmptyPages} outside relation of ${relPages} pages`);
  const possiblyFreeable = relPages - nonEmptyPages;
  return (
    possiblyFreeable > 0 &&
    (possiblyFreeable >= REL_TRUNCATE_MINIMUM ||
      // BlockNumber arithmetic: rel_pages / REL_TRUNCATE_FRACTION is an unsigned division.
      possiblyFreeable >= Math.floor(relPages / REL_TRUNCATE_FRACTION))
  );
}
