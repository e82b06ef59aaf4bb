/**
 * pg_ctl promote for a walsim node: the control endpoint's `promote` request, waiting (or not)
 * until the node accepts writes, with the failover report re-priced under a cost profile. One
 * implementation behind `npm run cluster -- promote` and the dashboard's promote button.
 *
 * Entry points: `promoteNode`, `PromoteResult`.
 */
import { connectNode } from './cli.ts';
import type { FailoverReport } from '../standby/failover-report.ts';
import { withModel, type Priced } from '../cost-model/price.ts';
import type { CostProfile } from '../cost-model/profile.ts';

export interface PromoteResult {
  promoted: boolean;
  failover: Priced<FailoverReport> | null;
}

export async function promoteNode(
  clusterDir: string,
  node: string,
  opts: { wait: boolean; waitSeconds: number; profile: CostProfile },
): Promise<PromoteResult> {
  const c = await connectNode(clusterDir, node);
  try {
    const served = (await c.request({
      op: 'promote',
      wait: opts.wait,
      waitSeconds: opts.waitSeconds,
    })) as { promoted: boolean; failover: FailoverReport | null };
    // The server's report carries counts only; priced here, once, with the given profile.
    return {
      ...served,
      failover: served.failover === null ? null : withModel(served.failover, opts.profile),
    };
  } finally {
    c.close();
  }
}
