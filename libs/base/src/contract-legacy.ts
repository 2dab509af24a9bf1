/**
 * Copies of rules that belong to @fencer/contract (the namespace alphabet
 * and the session id format), kept only for the importers that still take
 * them from base: libs/cell (lock-cell.ts) and apps/cell-router (router.ts,
 * routing.ts, heartbeat-batcher.ts). Base depends on nothing, so it cannot
 * re-export the contract's; libs/contract's ids spec checks that these
 * copies agree with the contract on every input it tries. Delete this file
 * once those importers use @fencer/contract.
 */
import { Namespace, SessionId } from './ids.js';

/** @deprecated Use SESSION_ID_SEPARATOR from @fencer/contract. */
export const SESSION_ID_SEPARATOR = ':';

const NAMESPACE_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

/** @deprecated Use isValidNamespace from @fencer/contract. */
export function isValidNamespace(ns: string): boolean {
  return NAMESPACE_PATTERN.test(ns) && ns !== '.' && ns !== '..';
}

/** @deprecated Use makeSessionId from @fencer/contract. */
export function makeSessionId(namespace: Namespace, unique: string): SessionId {
  return SessionId(`${namespace}${SESSION_ID_SEPARATOR}${unique}`);
}

/** @deprecated Use namespaceOfSessionId from @fencer/contract. */
export function namespaceOfSessionId(id: string): Namespace | undefined {
  const at = id.indexOf(SESSION_ID_SEPARATOR);
  if (at <= 0) return undefined;
  const ns = id.slice(0, at);
  return isValidNamespace(ns) ? Namespace(ns) : undefined;
}
