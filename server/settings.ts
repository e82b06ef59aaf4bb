/** Server settings with PostgreSQL's names and accepted values, validated with clear errors. */
import { WalsimError } from '../common/errors.ts';
import { DROP_STRATEGIES, type DropStrategy } from '../storage/drop.ts';

/**
 * The PostgreSQL release whose behaviour walsim imitates (server_version / server_version_num; the
 * wire protocol reports it at start-up). The drop paths follow PostgreSQL 15, `full-scan` keeps the
 * pre-14 behaviour for the seed's comparison.
 */
export const PG_SERVER_VERSION = '15.0 (walsim)';
export const PG_SERVER_VERSION_NUM = 150000;

export type SynchronousCommit = 'off' | 'local' | 'remote_write' | 'on' | 'remote_apply';
export const SYNCHRONOUS_COMMIT_VALUES: readonly SynchronousCommit[] = ['off', 'local', 'remote_write', 'on', 'remote_apply'];

export { DROP_STRATEGIES, type DropStrategy } from '../storage/drop.ts';

export function parseSynchronousCommit(text: string): SynchronousCommit {
  if ((SYNCHRONOUS_COMMIT_VALUES as readonly string[]).includes(text)) return text as SynchronousCommit;
  throw new WalsimError(
    'invalid_input',
    `invalid value for parameter "synchronous_commit": "${text}" (accepted: ${SYNCHRONOUS_COMMIT_VALUES.join(', ')})`,
  );
}

export function parseDropStrategy(text: string): DropStrategy {
  if ((DROP_STRATEGIES as readonly string[]).includes(text)) return text as DropStrategy;
  throw new WalsimError('invalid_input', `invalid drop strategy "${text}" (accepted: ${DROP_STRATEGIES.join(', ')})`);
}
