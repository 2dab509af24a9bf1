/**
 * The lock workload: what each simulated client asks the cell for next, and
 * what it learns from an answer. The requests are the contract's (libs/cell's
 * request API, as gRPC carries them); the simulation sends them to a node,
 * which serves or forwards them, and decides when a client dies.
 *
 * Each client keeps one session at a time in one of two namespaces, takes
 * exclusive and shared locks on three names there (try-locks and waits, so
 * queues form), releases what it holds with its token, and sometimes closes
 * its session. A write is retried as the same request, the same request id
 * included, until it gets a definite answer: the cell dedupes a retried
 * Acquire as it does a client's retry in production.
 */
import type { FencerError, Random, Result } from '@fencer/base';
import { type CellCalls, type CellMethod, WIRE_ACQUIRE_STATUS, WIRE_MODE } from '@fencer/cell';
import type { LockMode } from '@fencer/lock-fsm';
import type { AckedGrant } from './lock-checkers.js';

export const LOCK_NAMESPACES = ['alpha', 'beta'] as const;
export const LOCKS_PER_NAMESPACE = 3;
/** Most locks a client holds at once; with it, it releases instead of acquiring. */
const heldMax = 2;

/** Errors after which the same request is simply tried again (no definite answer). */
const RETRY_CODES: ReadonlySet<string> = new Set([
  'NOT_LEADER',
  'NO_LEADER',
  'TOO_MANY_REQUESTS',
  'DEADLINE_EXCEEDED',
  'SHUTTING_DOWN',
  'OUTCOME_UNKNOWN',
  'CANCELLED',
]);

export function isRetry(error: FencerError): boolean {
  return RETRY_CODES.has(error.code);
}

export function lockName(namespace: string, k: number): string {
  return `/ls/${namespace}/lock-${k}`;
}

export interface LockClient {
  readonly id: number;
  session: { readonly id: string; readonly namespace: string; readonly ttlMs: number } | null;
  /** Requests this client created (for unique request ids). */
  requests: number;
  readonly held: Map<string, { readonly token: number; readonly mode: LockMode }>;
  /** The write in flight, retried as is until a definite answer. */
  pending: LockWrite | null;
}

export type LockWrite = {
  [M in Exclude<CellMethod, 'checkToken' | 'getLock' | 'listLocks'>]: { readonly method: M; readonly request: CellCalls[M]['request'] };
}[Exclude<CellMethod, 'checkToken' | 'getLock' | 'listLocks'>];

export type LockOp =
  { readonly kind: 'write'; readonly write: LockWrite } | { readonly kind: 'read'; readonly name: string; readonly token: number | null };

export function newLockClient(id: number): LockClient {
  return { id, session: null, requests: 0, held: new Map(), pending: null };
}

/** The client's process died: it forgets its session, which the leader must expire. */
export function lockClientDied(c: LockClient): void {
  c.session = null;
  c.held.clear();
  c.pending = null;
}

export function nextLockOp(c: LockClient, r: Random, readShare: number): LockOp {
  if (c.pending !== null) return { kind: 'write', write: c.pending };
  const s = c.session;
  if (s === null) {
    const namespace = r.pick(LOCK_NAMESPACES);
    return write(c, { method: 'openSession', request: { namespace, clientId: `client-${c.id}`, ttlMs: r.range(1_500, 5_000) } });
  }
  if (r.chance(readShare)) {
    // Mostly the client's own namespace, where it knows tokens; sometimes the other one.
    const namespace = r.chance(0.8) ? s.namespace : r.pick(LOCK_NAMESPACES);
    const name = lockName(namespace, r.int(LOCKS_PER_NAMESPACE));
    const held = c.held.get(name);
    return { kind: 'read', name, token: held !== undefined && r.chance(0.6) ? held.token : null };
  }
  const x = r.float();
  if (c.held.size > 0 && (x < 0.35 || c.held.size >= heldMax)) {
    const name = r.pick([...c.held.keys()]);
    const token = (c.held.get(name) as { token: number }).token;
    return write(c, { method: 'release', request: { sessionId: s.id, name, token } });
  }
  if (x > 0.97) return write(c, { method: 'closeSession', request: { sessionId: s.id } });
  const free = [];
  for (let k = 0; k < LOCKS_PER_NAMESPACE; k++) if (!c.held.has(lockName(s.namespace, k))) free.push(lockName(s.namespace, k));
  const tryLock = r.chance(0.3);
  return write(c, {
    method: 'acquire',
    request: {
      sessionId: s.id,
      name: r.pick(free),
      mode: r.chance(0.65) ? WIRE_MODE.EXCLUSIVE : WIRE_MODE.SHARED,
      requestId: `c${c.id}-r${++c.requests}`,
      waitMs: tryLock ? 0 : r.range(200, 1_500),
      lockDelayMs: 0,
    },
  });
}

function write(c: LockClient, w: LockWrite): LockOp {
  c.pending = w;
  return { kind: 'write', write: w };
}

/**
 * A write got an answer. Returns the grant the client was told of, if any,
 * and whether the write is done (false: no definite answer, retry it as is).
 */
export function lockAnswered(
  c: LockClient,
  w: LockWrite,
  outcome: Result<unknown, FencerError>,
): { grant: AckedGrant | null; done: boolean } {
  if (c.pending !== w) return { grant: null, done: true };
  if (!outcome.ok) {
    if (isRetry(outcome.error)) return { grant: null, done: false };
    // The session is gone (expired while the client could not reach the leader) or refused: start afresh.
    lockClientDied(c);
    return { grant: null, done: true };
  }
  c.pending = null;
  switch (w.method) {
    case 'openSession': {
      const o = outcome.value as CellCalls['openSession']['response'];
      c.session = { id: o.sessionId, namespace: w.request.namespace, ttlMs: o.ttlMs };
      break;
    }
    case 'closeSession':
      c.session = null;
      c.held.clear();
      break;
    case 'release':
      // Released, or a no-op (the hold had already ended): either way the client holds it no more.
      c.held.delete(w.request.name);
      break;
    case 'acquire': {
      const o = outcome.value as CellCalls['acquire']['response'];
      if (o.status === WIRE_ACQUIRE_STATUS.QUEUED) {
        // Leadership moved or the call was given up: retry the same request.
        c.pending = w;
        return { grant: null, done: false };
      }
      if (o.status === WIRE_ACQUIRE_STATUS.GRANTED) {
        const mode: LockMode = w.request.mode === WIRE_MODE.SHARED ? 'SHARED' : 'EXCLUSIVE';
        c.held.set(w.request.name, { token: o.token, mode });
        return { grant: { name: w.request.name, sessionId: w.request.sessionId, token: o.token, mode }, done: true };
      }
      break;
    }
  }
  return { grant: null, done: true };
}
