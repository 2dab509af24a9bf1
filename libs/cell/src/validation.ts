/**
 * Request checks: every call's fields are checked where it arrives, before
 * it is served or forwarded, so bad input gets INVALID_ARGUMENT (or the
 * matching code) with a message a person can act on and never reaches the
 * log. Also the namespace checks reads make against the applied state.
 */
import { FencerError, type Namespace } from '@fencer/base';
import {
  CLIENT_ID_BYTES_MAX,
  REQUEST_ID_BYTES_MAX,
  isValidNamespace,
  namespaceOfSessionId,
  parseLockPrefix,
  utf8ByteLength,
  validateLockName,
} from '@fencer/contract';
import type { Failure, LockStateMachine } from '@fencer/lock-fsm';
import { type CellMethod, type RequestOf, modeFromWire } from './wire.js';

/** Throws the FencerError a caller gets; the request API turns it into the call's answer. */
export function fail(code: FencerError['code'], message: string, leaderHint?: string): never {
  throw new FencerError(code, message, leaderHint);
}

/** The namespace of a lock name or prefix the request validation already accepted. */
export function namespaceOfName(name: string): string {
  const parsed = parseLockPrefix(name.endsWith('/') ? name : `${name}/`);
  if (!parsed.ok) fail(parsed.code, parsed.message);
  return parsed.namespace;
}

/** Reads answer only for a namespace this cell owns (docs/decisions/0005-cells-own-namespaces.md); a stale router gets NAMESPACE_NOT_HERE, never "free". */
export function requireOwned(fsm: LockStateMachine, name: string): void {
  const ns = namespaceOfName(name);
  const bad = fsm.checkNamespace(ns);
  if (bad) fail(bad.code, bad.message);
  // A frozen namespace serves no read either: after the switch the target writes while the source, still
  // frozen until its drop, would answer stale state at its own cell revision, above the target's (chaos moves mode).
  if (fsm.namespaceState(ns) === 'frozen') fail('NAMESPACE_MOVING', `namespace ${ns} is moving between cells: retry`);
}

/** The domain failure an applied command reported, if it reported one. */
export function failureOf(o: unknown): Failure | undefined {
  return typeof o === 'object' && o !== null && (o as { ok?: unknown }).ok === false ? (o as Failure) : undefined;
}

/** Session id's embedded namespace, or SESSION_NOT_FOUND for an id no server could have issued. */
function sessionNamespace(sessionId: string): Namespace {
  if (sessionId === '') fail('SESSION_NOT_FOUND', 'session_id is empty: open a session first');
  const ns = namespaceOfSessionId(sessionId);
  if (!ns) fail('SESSION_NOT_FOUND', `session "${sessionId.slice(0, 80)}" does not exist (malformed id)`);
  return ns;
}

export function checkName(name: string, namespace?: string): void {
  const problem = validateLockName(name, namespace);
  if (problem) fail(problem.code, problem.message);
}

/** A lock name, or with `prefix` a prefix, that a Watch may start on. */
export function checkWatchTarget(name: string, prefix: boolean): void {
  if (!prefix) return checkName(name);
  const parsed = parseLockPrefix(name);
  if (!parsed.ok) fail(parsed.code, parsed.message);
}

/** Checks a request's fields before it is served or forwarded: bad input is refused where it arrives. */
export const validators: { readonly [M in CellMethod]: (req: RequestOf<M>) => void } = {
  openSession: (req) => {
    if (!isValidNamespace(req.namespace))
      fail('INVALID_NAME', `namespace "${req.namespace.slice(0, 80)}" must be 1-64 characters of [A-Za-z0-9._-], not "." or ".."`);
    if (utf8ByteLength(req.clientId) > CLIENT_ID_BYTES_MAX)
      fail('INVALID_ARGUMENT', `client_id is longer than ${CLIENT_ID_BYTES_MAX} bytes`);
  },
  closeSession: (req) => void sessionNamespace(req.sessionId),
  release: (req) => checkName(req.name, sessionNamespace(req.sessionId)),
  acquire: (req) => {
    checkName(req.name, sessionNamespace(req.sessionId));
    if (!modeFromWire(req.mode)) fail('INVALID_MODE', `mode ${req.mode} is not EXCLUSIVE (1) or SHARED (2)`);
    if (req.requestId === '') fail('MISSING_REQUEST_ID', 'request_id is required: a unique id per attempt makes retries safe');
    if (utf8ByteLength(req.requestId) > REQUEST_ID_BYTES_MAX)
      fail('INVALID_ARGUMENT', `request_id is longer than ${REQUEST_ID_BYTES_MAX} bytes`);
  },
  checkToken: (req) => checkName(req.name),
  getLock: (req) => checkName(req.name),
  listLocks: (req) => {
    const parsed = parseLockPrefix(req.prefix);
    if (!parsed.ok) fail(parsed.code, parsed.message);
  },
};
