/**
 * The contract's id formats and their bounds. A session id is
 * "<namespace>:<unique>": it embeds its namespace, so routers and proxies
 * route it without a lookup (docs/decisions/0004-sessions-belong-to-one-namespace.md);
 * the leader draws the unique part. Request ids and client ids are the
 * client's, bounded in UTF-8 bytes; member ids name a replica of a cell.
 *
 * Each check answers undefined for valid input, or the contract's reason
 * code with a message a person can act on.
 */
import { type Namespace, Namespace as asNamespace, type SessionId, SessionId as asSessionId } from '@fencer/base';
import { CLIENT_ID_BYTES_MAX, MEMBER_ID_BYTES_MAX, REQUEST_ID_BYTES_MAX, SESSION_ID_BYTES_MAX } from './limits.js';
import { type ContractProblem, isValidNamespace } from './names.js';
import { utf8ByteLength } from './utf8.js';

/** The namespace alphabet [A-Za-z0-9._-] cannot contain it, so the first one ends the namespace. */
export const SESSION_ID_SEPARATOR = ':';

/** [A-Za-z0-9._-]+: the unique part is the leader's, drawn from its random source; ASCII keeps sorting and lengths simple. */
const UNIQUE_PART = /^[A-Za-z0-9._-]+$/;

/** One path segment's alphabet, as the cell node accepts member ids. */
const MEMBER_ID = new RegExp(`^[A-Za-z0-9._-]{1,${MEMBER_ID_BYTES_MAX}}$`);

export function makeSessionId(namespace: Namespace, unique: string): SessionId {
  return asSessionId(`${namespace}${SESSION_ID_SEPARATOR}${unique}`);
}

/** The namespace a session id embeds, or undefined for a malformed id. */
export function namespaceOfSessionId(id: string): Namespace | undefined {
  const at = id.indexOf(SESSION_ID_SEPARATOR);
  if (at <= 0) return undefined;
  const ns = id.slice(0, at);
  return isValidNamespace(ns) ? asNamespace(ns) : undefined;
}

/** A session id is "<namespace>:<unique>" with both parts of [A-Za-z0-9._-]; inside `namespace` when given. */
export function checkSessionId(sessionId: string, namespace?: string): ContractProblem<'INVALID_ARGUMENT'> | undefined {
  if (typeof sessionId !== 'string' || sessionId.length > SESSION_ID_BYTES_MAX) {
    return { code: 'INVALID_ARGUMENT', message: `a session id is a string of at most ${SESSION_ID_BYTES_MAX} bytes` };
  }
  const ns = namespaceOfSessionId(sessionId);
  const unique = sessionId.slice(sessionId.indexOf(SESSION_ID_SEPARATOR) + 1);
  if (ns === undefined || !UNIQUE_PART.test(unique)) {
    return {
      code: 'INVALID_ARGUMENT',
      message: `a session id is "<namespace>${SESSION_ID_SEPARATOR}<unique>" with both parts of [A-Za-z0-9._-]`,
    };
  }
  if (namespace !== undefined && ns !== namespace) {
    return { code: 'INVALID_ARGUMENT', message: `session id ${sessionId} does not embed namespace "${namespace}"` };
  }
  return undefined;
}

/** request_id is required (one per attempt, reused on retries) and at most REQUEST_ID_BYTES_MAX bytes of UTF-8. */
export function checkRequestId(requestId: string): ContractProblem<'MISSING_REQUEST_ID' | 'INVALID_ARGUMENT'> | undefined {
  if (typeof requestId !== 'string' || requestId.length === 0)
    return { code: 'MISSING_REQUEST_ID', message: 'request_id is required: one per attempt, reused on retries' };
  const bytes = utf8ByteLength(requestId);
  if (bytes < 0) return { code: 'INVALID_ARGUMENT', message: 'request_id is not valid UTF-8 (lone surrogate)' };
  if (bytes > REQUEST_ID_BYTES_MAX)
    return { code: 'INVALID_ARGUMENT', message: `request_id is at most ${REQUEST_ID_BYTES_MAX} bytes, got ${bytes}` };
  return undefined;
}

/** client_id may be empty; at most CLIENT_ID_BYTES_MAX bytes of UTF-8. */
export function checkClientId(clientId: string): ContractProblem<'INVALID_ARGUMENT'> | undefined {
  if (typeof clientId !== 'string') return { code: 'INVALID_ARGUMENT', message: 'client_id must be a string' };
  const bytes = utf8ByteLength(clientId);
  if (bytes < 0) return { code: 'INVALID_ARGUMENT', message: 'client_id is not valid UTF-8 (lone surrogate)' };
  if (bytes > CLIENT_ID_BYTES_MAX)
    return { code: 'INVALID_ARGUMENT', message: `client_id is at most ${CLIENT_ID_BYTES_MAX} bytes, got ${bytes}` };
  return undefined;
}

/** Member ids: 1 to MEMBER_ID_BYTES_MAX characters of [A-Za-z0-9._-]. */
export function checkMemberId(id: string): ContractProblem<'INVALID_ARGUMENT'> | undefined {
  if (typeof id === 'string' && MEMBER_ID.test(id)) return undefined;
  return { code: 'INVALID_ARGUMENT', message: `a member id is 1-${MEMBER_ID_BYTES_MAX} characters of [A-Za-z0-9._-]` };
}
