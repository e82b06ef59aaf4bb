/**
 * Each vitest worker (and every process it starts: they inherit the environment) chooses its TCP
 * ports from a range of its own (server/ports.ts WALSIM_PORT_RANGE). Without it, a port one
 * worker's cluster had checked free at init was bound by another worker's server before the first
 * one's started (EADDRINUSE in cluster-lock, a fresh-clone run on 2 cores).
 */
import { PORT_RANGE_ENV } from '../server/ports.ts';

const SLICES = 8;
const LOW = 20_000;
const SLICE = 1_500; // 20000-31999: below Linux's default ephemeral range (32768-60999)
const pool = Number(process.env.VITEST_POOL_ID ?? '1');
const slice = (Number.isInteger(pool) && pool > 0 ? pool - 1 : 0) % SLICES;
process.env[PORT_RANGE_ENV] = `${LOW + slice * SLICE}-${LOW + (slice + 1) * SLICE - 1}`;
