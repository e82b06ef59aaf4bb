/**
 * Real PostgreSQL in tests: whether the binaries are here (tests skip with the reason when not),
 * and temporary cluster directories the `postgres` OS user can reach, removed after the file.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { findPgBin } from '../../scripts/postgres/pg-bin.ts';
import { destroyPgCluster } from '../../scripts/postgres/pg-cluster.ts';

/** null when PostgreSQL server binaries are available, else why not (the test title carries it). */
export function pgUnavailableReason(): string | null {
  try {
    findPgBin();
    return null;
  } catch (e) {
    return (e as Error).message;
  }
}

export class PgDirs {
  private readonly dirs: string[] = [];

  /** A fresh, not yet existing directory under a parent every user can traverse. */
  fresh(prefix: string): string {
    const parent = fs.mkdtempSync(path.join(os.tmpdir(), `walsim-pg-${prefix}-`));
    fs.chmodSync(parent, 0o755);
    this.dirs.push(parent);
    return path.join(parent, 'cluster');
  }

  async removeAll(): Promise<void> {
    for (const d of this.dirs.splice(0)) {
      await destroyPgCluster(path.join(d, 'cluster')).catch(() => {});
      fs.rmSync(d, { recursive: true, force: true });
    }
  }
}
