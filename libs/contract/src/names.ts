/**
 * The lock-name grammar, exactly as the contract's header defines it:
 * "/ls/<namespace>/<rest>", segments of [A-Za-z0-9._-], no empty segment,
 * no "." or ".." segment, at most NAME_BYTES_MAX bytes in all. The namespace
 * is the first segment after "/ls/", at most NAMESPACE_BYTES_MAX bytes, and
 * must be followed by at least one more segment. A prefix (ListLocks, Watch)
 * names one whole namespace and any valid start of a rest.
 *
 * Every layer runs these same functions: the client before it calls, the
 * router to route, the cell node before proposing (so bad input never
 * reaches the log), and the state machine again on apply.
 */
import { type Namespace, Namespace as asNamespace } from '@fencer/base';
import { NAME_BYTES_MAX, NAMESPACE_BYTES_MAX } from './limits.js';

export const LOCK_NAME_ROOT = '/ls/';

/** A contract violation: the reason code the contract's header names, and a message a person can act on. */
export interface ContractProblem<C extends string = string> {
  readonly code: C;
  readonly message: string;
}

export type ParsedLockName =
  | { readonly ok: true; readonly namespace: Namespace; readonly rest: string }
  | { readonly ok: false; readonly code: 'INVALID_NAME'; readonly message: string };

export type ParsedLockPrefix =
  { readonly ok: true; readonly namespace: Namespace } | { readonly ok: false; readonly code: 'INVALID_NAME'; readonly message: string };

export type LockNameProblem = ContractProblem<'INVALID_NAME' | 'WRONG_NAMESPACE'>;

const SLASH = 0x2f;
const DOT = 0x2e;

/** 1 for the chars of [A-Za-z0-9._-], by char code below 128: one load per char of every new lock name. */
const SEGMENT_CHARS = new Uint8Array(128);
for (let c = 0; c < 128; c++) {
  SEGMENT_CHARS[c] =
    (c >= 0x61 && c <= 0x7a) || // a-z
    (c >= 0x41 && c <= 0x5a) || // A-Z
    (c >= 0x30 && c <= 0x39) || // 0-9
    c === DOT ||
    c === 0x5f || // _
    c === 0x2d // -
      ? 1
      : 0;
}

/** [A-Za-z0-9._-] */
function isSegmentChar(c: number): boolean {
  return c < 128 && SEGMENT_CHARS[c] === 1;
}

/** Whether s[start, start + len) is "." or "..": never a valid segment. */
function isDotSegment(s: string, start: number, len: number): boolean {
  return len <= 2 && len > 0 && s.charCodeAt(start) === DOT && (len === 1 || s.charCodeAt(start + 1) === DOT);
}

/**
 * Checks segments of `s` from `start` up to `end`, each ended by '/' or by
 * `end`. Returns an error message, or undefined when all are valid. With
 * `allowOpenEnd`, the last segment may be empty or partial (a prefix).
 */
function checkSegments(s: string, start: number, end: number, allowOpenEnd: boolean): string | undefined {
  let segStart = start;
  for (let i = start; i <= end; i++) {
    const atEnd = i === end;
    const c = atEnd ? SLASH : s.charCodeAt(i);
    if (c === SLASH) {
      const len = i - segStart;
      // The last segment of a prefix may be empty or "." (it could become ".x").
      const open = atEnd && allowOpenEnd;
      if (len === 0 && !open) return `empty path segment at offset ${segStart}`;
      if (!open && isDotSegment(s, segStart, len)) return `"." and ".." are not valid path segments (offset ${segStart})`;
      segStart = i + 1;
    } else if (!isSegmentChar(c)) {
      return `character ${JSON.stringify(s[i])} at offset ${i} is outside [A-Za-z0-9._-]`;
    }
  }
  return undefined;
}

/** A namespace: one path segment of 1 to NAMESPACE_BYTES_MAX chars of [A-Za-z0-9._-], not "." or "..". */
export function isValidNamespace(namespace: string): boolean {
  if (typeof namespace !== 'string' || namespace.length === 0 || namespace.length > NAMESPACE_BYTES_MAX) return false;
  for (let i = 0; i < namespace.length; i++) if (!isSegmentChar(namespace.charCodeAt(i))) return false;
  return !isDotSegment(namespace, 0, namespace.length);
}

/** Undefined for a valid namespace; otherwise INVALID_NAME and what a valid one looks like. */
export function checkNamespace(namespace: string): ContractProblem<'INVALID_NAME'> | undefined {
  if (isValidNamespace(namespace)) return undefined;
  return {
    code: 'INVALID_NAME',
    message: `namespace "${String(namespace).slice(0, 80)}" must be 1-${NAMESPACE_BYTES_MAX} characters of [A-Za-z0-9._-], not "." or ".."`,
  };
}

function invalidName(message: string): { readonly ok: false; readonly code: 'INVALID_NAME'; readonly message: string } {
  return { ok: false, code: 'INVALID_NAME', message };
}

/** Splits a lock name into its namespace and the rest, or says why it is not a valid name. */
export function parseLockName(name: string): ParsedLockName {
  if (typeof name !== 'string' || !name.startsWith(LOCK_NAME_ROOT)) {
    return invalidName(`a lock name must start with "${LOCK_NAME_ROOT}<namespace>/"`);
  }
  // Every valid character is ASCII, so the string length is the byte length
  // once the characters are checked; check the length first to bound work.
  if (name.length > NAME_BYTES_MAX) {
    return invalidName(`a lock name is at most ${NAME_BYTES_MAX} bytes, got ${name.length} characters`);
  }
  const nsEnd = name.indexOf('/', LOCK_NAME_ROOT.length);
  if (nsEnd < 0 || nsEnd === name.length - 1) {
    return invalidName('a lock name needs a path below its namespace: "/ls/<namespace>/<rest>"');
  }
  if (nsEnd - LOCK_NAME_ROOT.length > NAMESPACE_BYTES_MAX) return invalidName(`a namespace is at most ${NAMESPACE_BYTES_MAX} bytes`);
  const problem = checkSegments(name, LOCK_NAME_ROOT.length, name.length, false);
  if (problem !== undefined) return invalidName(`invalid lock name: ${problem}`);
  return { ok: true, namespace: asNamespace(name.slice(LOCK_NAME_ROOT.length, nsEnd)), rest: name.slice(nsEnd + 1) };
}

/**
 * Whether `name` is a valid lock name inside `namespace`, which must itself
 * be a valid namespace: the same verdict as `validateLockName(name,
 * namespace) === undefined`, without allocating (no slices, no message).
 * The state machine runs it for every new lock name; on false it asks
 * validateLockName for the outcome to return.
 */
export function isLockNameIn(name: string, namespace: string): boolean {
  const nsEnd = LOCK_NAME_ROOT.length + namespace.length;
  return (
    name.length > nsEnd + 1 &&
    name.length <= NAME_BYTES_MAX &&
    name.startsWith(LOCK_NAME_ROOT) &&
    name.startsWith(namespace, LOCK_NAME_ROOT.length) &&
    name.charCodeAt(nsEnd) === SLASH &&
    checkSegments(name, nsEnd + 1, name.length, false) === undefined
  );
}

/**
 * Undefined when `name` is a valid lock name (inside `namespace`, when given);
 * otherwise the reason code and a message a person can act on.
 */
export function validateLockName(name: string, namespace?: string): LockNameProblem | undefined {
  const parsed = parseLockName(name);
  if (!parsed.ok) return { code: parsed.code, message: parsed.message };
  if (namespace !== undefined && parsed.namespace !== namespace) {
    return {
      code: 'WRONG_NAMESPACE',
      message: `lock ${name} is in namespace "${parsed.namespace}", but the session belongs to "${namespace}"`,
    };
  }
  return undefined;
}

/**
 * A ListLocks or Watch prefix must lie inside one namespace: "/ls/<namespace>/"
 * followed by any valid start of a rest (its last segment may be partial).
 */
export function parseLockPrefix(prefix: string): ParsedLockPrefix {
  if (typeof prefix !== 'string' || !prefix.startsWith(LOCK_NAME_ROOT)) {
    return invalidName(`a prefix must start with "${LOCK_NAME_ROOT}<namespace>/"`);
  }
  if (prefix.length > NAME_BYTES_MAX) return invalidName(`a prefix is at most ${NAME_BYTES_MAX} bytes`);
  const nsEnd = prefix.indexOf('/', LOCK_NAME_ROOT.length);
  if (nsEnd < 0) return invalidName('a prefix must name one whole namespace: "/ls/<namespace>/"');
  if (nsEnd - LOCK_NAME_ROOT.length > NAMESPACE_BYTES_MAX) return invalidName(`a namespace is at most ${NAMESPACE_BYTES_MAX} bytes`);
  const nsProblem = checkSegments(prefix, LOCK_NAME_ROOT.length, nsEnd, false);
  if (nsProblem !== undefined) return invalidName(`invalid prefix: ${nsProblem}`);
  const restProblem = checkSegments(prefix, nsEnd + 1, prefix.length, true);
  if (restProblem !== undefined) return invalidName(`invalid prefix: ${restProblem}`);
  return { ok: true, namespace: asNamespace(prefix.slice(LOCK_NAME_ROOT.length, nsEnd)) };
}
