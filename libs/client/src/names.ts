/**
 * Lock names are "/ls/<namespace>/<rest>" (the contract). The client needs
 * the namespace to pick the session; the server validates the rest.
 */
import { FencerError, isValidNamespace } from '@fencer/base';

const NAME_BYTES_MAX = 512;

/** The namespace of a lock name or prefix, or throws INVALID_NAME with a message a person can act on. */
export function namespaceOf(nameOrPrefix: string): string {
  if (typeof nameOrPrefix !== 'string' || !nameOrPrefix.startsWith('/ls/')) {
    throw new FencerError('INVALID_NAME', `lock names look like "/ls/<namespace>/<name>", got "${String(nameOrPrefix).slice(0, 80)}"`);
  }
  if (Buffer.byteLength(nameOrPrefix) > NAME_BYTES_MAX)
    throw new FencerError('INVALID_NAME', `a lock name is at most ${NAME_BYTES_MAX} bytes`);
  const end = nameOrPrefix.indexOf('/', 4);
  const ns = nameOrPrefix.slice(4, end < 0 ? undefined : end);
  if (!isValidNamespace(ns)) {
    throw new FencerError(
      'INVALID_NAME',
      `namespace "${ns.slice(0, 80)}" of "${nameOrPrefix.slice(0, 80)}" must be 1-64 characters of [A-Za-z0-9._-], not "." or ".."`,
    );
  }
  return ns;
}

/** A lock name (not a prefix): "/ls/<namespace>/<at least one more segment>", no trailing slash. */
export function checkLockName(name: string): string {
  const ns = namespaceOf(name);
  if (name.length <= 5 + ns.length || name.endsWith('/')) {
    throw new FencerError(
      'INVALID_NAME',
      `"${name.slice(0, 80)}" names no lock: add a name after "/ls/${ns}/" (a trailing "/" makes it a prefix)`,
    );
  }
  return ns;
}
