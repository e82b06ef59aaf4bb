/**
 * The cycle thread's entry module (cycle-host.ts starts it as a worker; tsx, the test suite's
 * entry bundle, or — in the packed package — walsim.mjs itself, which imports this module when
 * it finds the cycle thread's mark).
 */
import { serveCycles } from './cycle-thread.ts';
import { isCycleThread } from './thread-mark.ts';

if (isCycleThread()) serveCycles();
