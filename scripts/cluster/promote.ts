/**
 * pg_ctl promote for a walsim node: the control endpoint's `promote` request, waiting (or not)
 * until the node accepts writes, with the failover report re-priced under a cost profile. One
 * implementation behind `npm run cluster -- promote` and the dashboard's promote button.
 *
 * Entry points: `promoteNode`, `PromoteResult`.
 */
import * as path from 'node:path';
import { isWalsimError, WalsimError } from '../../common/errors.ts';
import { nodeDir } from '../../server/cluster-files.ts';
import { connectNode } from '../cli/command.ts';
import type { FailoverReport } from '../../standby/failover-report.ts';
import { withModel, type Priced } from '../../cost-model/price.ts';
import type { CostProfile } from '../../cost-model/profile.ts';

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
    const served = (await c
      .request({ op: 'promote', wait: opts.wait, waitSeconds: opts.waitSeconds })
      .catch((e: unknown) => {
        if (!isWalsimError(e) || e.kind !== 'not_connected') throw e;
        // The server went away mid-promotion (killed, crashed): say what to look at, not just
        // "connection closed (1006)".
        throw new WalsimError(
          'not_connected',
          `node "${node}" ended while promoting (${e.message}); see ${path.join(nodeDir(clusterDir, node), 'server.log')}, ` +
            `and "npm run cluster -- status" for whether it runs and is read-write (a restart resumes recovery; promote again)`,
        );
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
