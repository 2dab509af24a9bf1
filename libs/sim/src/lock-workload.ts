/**
 * The lock workload: what each simulated client asks for next, and what it
 * learns from an answer. The simulation carries the requests (proposals
 * through a replica, reads through ReadIndex) and decides when a client dies.
 *
 * Each client keeps one session at a time in one of two namespaces, takes
 * exclusive and shared locks on three names there (try-locks and waits, so
 * queues form), releases what it holds with its token, and sometimes closes
 * its session. A write is retried with the same command, the same request
 * id included, until it gets a definite answer: the state machine dedupes it
 * as it does a client's retry in production.
 */
import type { Random, RequestId, SessionId } from '@fencer/base';
import type { Command, LockMode, Outcome } from '@fencer/lock-fsm';
import type { AckedGrant } from './lock-checkers.js';

export const LOCK_NAMESPACES = ['alpha', 'beta'] as const;
export const LOCKS_PER_NAMESPACE = 3;
/** Most locks a client holds at once; with it, it releases instead of acquiring. */
const heldMax = 2;

export function lockName(namespace: string, k: number): string {
  return `/ls/${namespace}/lock-${k}`;
}

export interface LockClient {
  readonly id: number;
  session: { readonly id: SessionId; readonly namespace: string; readonly ttlMs: number } | null;
  /** Sessions and requests this client created (for unique ids). */
  sessionsOpened: number;
  requests: number;
  readonly held: Map<string, { readonly token: number; readonly mode: LockMode }>;
  /** The write in flight, retried as is until a definite answer. */
  pending: Command | null;
}

export type LockOp = { readonly kind: 'write'; readonly command: Command } | { readonly kind: 'read'; readonly name: string; readonly token: number | null };

export function newLockClient(id: number): LockClient {
  return { id, session: null, sessionsOpened: 0, requests: 0, held: new Map(), pending: null };
}

/** The client's process died: it forgets its session, which the leader must expire. */
export function lockClientDied(c: LockClient): void {
  c.session = null;
  c.held.clear();
  c.pending = null;
}

export function nextLockOp(c: LockClient, r: Random, readShare: number): LockOp {
  if (c.pending !== null) return { kind: 'write', command: c.pending };
  const s = c.session;
  if (s === null) {
    const namespace = r.pick(LOCK_NAMESPACES);
    const command: Command = {
      kind: 'OpenSession',
      sessionId: `${namespace}:c${c.id}-${++c.sessionsOpened}` as SessionId,
      clientId: `client-${c.id}`,
      namespace: namespace as never,
      ttlMs: r.range(1_500, 5_000),
    };
    return write(c, command);
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
    return write(c, { kind: 'Release', sessionId: s.id, name, token: token as never });
  }
  if (x > 0.97) return write(c, { kind: 'CloseSession', sessionId: s.id });
  const free = [];
  for (let k = 0; k < LOCKS_PER_NAMESPACE; k++) if (!c.held.has(lockName(s.namespace, k))) free.push(lockName(s.namespace, k));
  const tryLock = r.chance(0.3);
  return write(c, {
    kind: 'Acquire',
    sessionId: s.id,
    name: r.pick(free),
    mode: r.chance(0.65) ? 'EXCLUSIVE' : 'SHARED',
    requestId: `c${c.id}-r${++c.requests}` as RequestId,
    waitMs: tryLock ? 0 : r.range(200, 1_500),
    lockDelayMs: 0,
    tryLock,
  });
}

function write(c: LockClient, command: Command): LockOp {
  c.pending = command;
  return { kind: 'write', command };
}

/**
 * A write got an answer (the state machine's outcome). Returns the grant the
 * client was told of, if any; `waiting` when an Acquire queued (the client
 * then waits for its grant, or retries the same request).
 */
export function lockWritten(c: LockClient, command: Command, outcome: Outcome): { grant: AckedGrant | null; waiting: boolean } {
  const none = { grant: null, waiting: false };
  if (c.pending !== command) return none;
  if (!outcome.ok) {
    // The session is gone (expired while the client could not reach the leader) or refused: start afresh.
    lockClientDied(c);
    return none;
  }
  switch (command.kind) {
    case 'OpenSession':
      c.session = { id: command.sessionId, namespace: command.namespace, ttlMs: command.ttlMs };
      break;
    case 'CloseSession':
      c.session = null;
      c.held.clear();
      break;
    case 'Release':
      // Released, or a no-op (the hold had already ended): either way the client holds it no more.
      c.held.delete(command.name);
      break;
    case 'Acquire': {
      const o = outcome as Extract<Outcome, { status: string }>;
      if (o.status === 'QUEUED') return { grant: null, waiting: true };
      if (o.status === 'GRANTED') {
        c.pending = null;
        return { grant: granted(c, command.sessionId, command.name, command.mode, o.token), waiting: false };
      }
      break;
    }
    default:
      break;
  }
  c.pending = null;
  return none;
}

/** The answer to a queued Acquire's wait: granted, cancelled (deadline), the session ended, or unknown (retry). */
export type WaitAnswer = { readonly kind: 'granted'; readonly token: number } | { readonly kind: 'cancelled' } | { readonly kind: 'session-gone' } | { readonly kind: 'unknown' };

export function lockWaitAnswered(c: LockClient, command: Command, answer: WaitAnswer): AckedGrant | null {
  if (c.pending !== command || command.kind !== 'Acquire') return null;
  switch (answer.kind) {
    case 'granted':
      c.pending = null;
      return granted(c, command.sessionId, command.name, command.mode, answer.token);
    case 'cancelled':
      c.pending = null;
      return null;
    case 'session-gone':
      lockClientDied(c);
      return null;
    case 'unknown':
      return null;
  }
}

function granted(c: LockClient, sessionId: SessionId, name: string, mode: LockMode, token: number): AckedGrant {
  c.held.set(name, { token, mode });
  return { name, sessionId, token, mode };
}
