/** Option parsers the processes' command lines share (commander's argParser form: they throw InvalidArgumentError). */
import { InvalidArgumentError } from 'commander';
import { type TlsPaths, tlsPathsOf } from './tls.js';
import { isHostPort } from '@fencer/contract';

/** A host:port option. */
export const address =
  (what: string) =>
  (v: string): string => {
    if (!isHostPort(v)) throw new InvalidArgumentError(`${what} must be host:port, e.g. 127.0.0.1:6001`);
    return v;
  };

/** An integer option of at least `min`. */
export const positiveInt =
  (what: string, min = 1) =>
  (v: string): number => {
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < min) throw new InvalidArgumentError(`${what} must be an integer >= ${min}`);
    return n;
  };

/**
 * The `--tls-cert/--tls-key/--tls-ca` trio of a parsed command line as
 * `{ tls }`, or `{}` when none is given; a partial trio is a command-line
 * error (InvalidArgumentError), named for the flags.
 */
export function tlsOption(o: { tlsCert?: string; tlsKey?: string; tlsCa?: string }): { tls?: TlsPaths } {
  try {
    const tls = tlsPathsOf(o);
    return tls ? { tls } : {};
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}
