/**
 * `npm run sql -- [--node primary|standby] [--dir .walsim] [--json] "STATEMENT"`: run one statement
 * on a node and print the result psql-style, or as one JSON object on the last line of stdout.
 */
import { ControlError } from '../server/control-client.ts';
import type { QueryResult } from '../server/control-protocol.ts';
import { splitStatements } from '../sql/parser.ts';
import {
  clusterDirOf,
  connectNode,
  parseCli,
  printJson,
  runCli,
  UsageError,
} from './cli/command.ts';

const USAGE = 'usage: npm run sql -- [--node primary|standby] [--dir DIR] [--json] "STATEMENT"';

/** psql's aligned format: header, dashes, rows, "(n rows)"; command tag for non-SELECTs. */
export function formatAligned(r: QueryResult): string {
  if (r.columns.length === 0) return r.command;
  const cells = r.rows.map((row) =>
    r.columns.map((c) => (row[c] === null || row[c] === undefined ? '' : String(row[c]))),
  );
  const widths = r.columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i]!.length)));
  const center = (s: string, w: number) => {
    const left = Math.floor((w - s.length) / 2);
    return ' '.repeat(left) + s + ' '.repeat(w - s.length - left);
  };
  const lines = [
    ' ' + r.columns.map((c, i) => center(c, widths[i]!)).join(' | ') + ' ',
    r.columns.map((_, i) => '-'.repeat(widths[i]! + 2)).join('+'),
    ...cells.map(
      (row) =>
        ' ' +
        row
          .map((v, i) => (/^-?\d+$/.test(v) ? v.padStart(widths[i]!) : v.padEnd(widths[i]!)))
          .join(' | ') +
        ' ',
    ),
    `(${r.rows.length} row${r.rows.length === 1 ? '' : 's'})`,
  ];
  return lines.join('\n');
}

runCli(async () => {
  const { values, positionals } = parseCli(
    process.argv.slice(2),
    {
      node: { type: 'string', default: 'primary' },
      dir: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
    USAGE,
  );
  if (positionals.length !== 1)
    throw new UsageError(`expected exactly one statement, got ${positionals.length}\n${USAGE}`);
  const statements = splitStatements(positionals[0]!).length;
  if (statements > 1)
    throw new UsageError(
      `npm run sql runs one statement; this has ${statements} (run one npm run sql per statement, or give them all to psql -c on the PostgreSQL port)\n${USAGE}`,
    );
  const client = await connectNode(clusterDirOf(values.dir), values.node!);
  try {
    const result = await client.sql(positionals[0]!);
    if (values.json)
      printJson({ columns: result.columns, rows: result.rows, command: result.command });
    else console.log(formatAligned(result));
    return 0;
  } catch (e) {
    if (e instanceof ControlError && values.json) {
      printJson({ error: { code: e.code, message: e.message } });
      return 1;
    }
    throw e;
  } finally {
    client.close();
  }
}, USAGE);
