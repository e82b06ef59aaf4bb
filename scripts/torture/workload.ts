/**
 * The torture runner's workload: random write statements of the SQL subset and the ledger inserts
 * whose acknowledgement I1 checks, each with its effect on the model (applied only once the
 * statement is acknowledged). Every choice comes from the seed's PRNG, in the order the statements
 * are asked for, so a seed replays the same workload.
 */
import type { SeededRandom } from '../../common/random.ts';
import { Model } from './model.ts';

export interface Statement {
  sql: string;
  /** The statement's effect on the model, applied when the primary acknowledged it. */
  apply(): void;
}

export class Workload {
  readonly model = new Model();
  private tableNo = 0;
  private ledgerNext = 1;
  /** The highest ledger value acknowledged (values are inserted in order, one per statement). */
  ledgerAcked = 0;

  constructor(private readonly rng: SeededRandom) {}

  /** The first statement of every seed. */
  createLedger(): Statement {
    return { sql: 'CREATE TABLE ledger (c int)', apply: () => this.model.create('ledger') };
  }

  userTables(): string[] {
    return this.model.names().filter((n) => n !== 'ledger');
  }

  ledgerInsert(): Statement {
    const n = this.ledgerNext++;
    return {
      sql: `INSERT INTO ledger VALUES (${n})`,
      apply: () => {
        this.model.insert('ledger', n, n);
        this.ledgerAcked = n;
      },
    };
  }

  /** A random write statement (never blocks on its own). */
  randomStatement(): Statement {
    const { rng, model } = this;
    const tables = this.userTables();
    const kind =
      tables.length === 0
        ? 'create'
        : rng.weighted({
            create: tables.length < 6 ? 2 : 0,
            insert: 6,
            values: 2,
            ledger: 5,
            delete: 3,
            vacuum: 3,
            truncate: 1,
            checkpoint: 1,
          });
    const t = tables.length > 0 ? rng.pick(tables) : '';
    switch (kind) {
      case 'create': {
        const name = `t${this.tableNo++}`;
        return { sql: `CREATE TABLE ${name} (c int)`, apply: () => model.create(name) };
      }
      case 'insert': {
        const lo = rng.int(1, 5000);
        const hi = lo + rng.pick([1, 10, 226, 1000, 4000]) - 1;
        return {
          sql: `INSERT INTO ${t} SELECT generate_series(${lo}, ${hi})`,
          apply: () => model.insert(t, lo, hi),
        };
      }
      case 'values': {
        const vs = Array.from({ length: rng.int(1, 4) }, () => rng.int(1, 9000));
        return {
          sql: `INSERT INTO ${t} VALUES ${vs.map((v) => `(${v})`).join(', ')}`,
          apply: () => vs.forEach((v) => model.insert(t, v, v)),
        };
      }
      case 'ledger':
        return this.ledgerInsert();
      case 'delete': {
        const op = rng.pick(['>', '<', 'all'] as const);
        const k = rng.int(1, 6000);
        return {
          sql: `DELETE FROM ${t}${op === 'all' ? '' : ` WHERE c ${op} ${k}`}`,
          apply: () => model.delete(t, op, k),
        };
      }
      case 'vacuum':
        return { sql: rng.chance(0.3) ? 'VACUUM' : `VACUUM ${t}`, apply: () => {} };
      case 'truncate':
        return { sql: `TRUNCATE ${t}`, apply: () => model.truncate(t) };
      default:
        return { sql: 'CHECKPOINT', apply: () => {} };
    }
  }
}
