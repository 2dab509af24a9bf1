/**
 * The state machine's internal records. Holders and waiters are immutable
 * objects in arrays that are replaced, never mutated (copy on write): a
 * LockState handed out in an event or outcome can share them safely, and
 * building one costs a single small object.
 */
import type { Namespace, Revision, SessionId } from '@fencer/base';
import type { Holder, LockMode, NamespaceState, TimedOutReason, Waiter } from './types.js';

export const EMPTY: readonly never[] = Object.freeze([]);

export interface NamespaceRecord {
  readonly name: Namespace;
  state: NamespaceState;
  /** Highest revision of an entry that changed this namespace. */
  lastRevision: number;
  /** Live sessions by id. Empty for a moved-out namespace. */
  readonly sessions: Map<string, SessionRecord>;
  /** Live locks (held, awaited or delayed) by full name. Empty for a moved-out namespace. */
  readonly locks: Map<string, LockRecord>;
}

export interface SessionRecord {
  readonly id: SessionId;
  /** The namespace the session belongs to (the one its id embeds). */
  readonly ns: NamespaceRecord;
  readonly clientId: string;
  readonly ttlMs: number;
  readonly openedRevision: Revision;
  /** Names this session holds. Invariant: the lock's holders include this session exactly once. */
  readonly held: Map<string, LockRecord>;
  /** Names this session waits for. Invariant: the lock's waiters include this session exactly once; never also in `held`. */
  readonly waiting: Map<string, LockRecord>;
  /**
   * Outcomes of the last request ids, oldest first (Map insertion order is
   * arrival order, the same on every replica and kept by snapshots).
   * Invariant: size <= dedupePerSessionMax.
   */
  readonly dedupe: Map<string, DedupeRecord>;
  /**
   * The same request ids in arrival order, as a ring: evicting the oldest
   * costs no iterator. Until full, oldest first; once full (length =
   * dedupePerSessionMax), the oldest is at `dedupeNext`.
   */
  readonly dedupeRing: string[];
  dedupeNext: number;
}

export type DedupeStatus = 'GRANTED' | 'QUEUED' | 'TIMED_OUT';

/** Mutable: a QUEUED record becomes GRANTED or TIMED_OUT when its waiter leaves the queue. */
export interface DedupeRecord {
  status: DedupeStatus;
  /** The lock the request was for (a QUEUED retry answers its current position in this lock). */
  readonly name: string;
  /** GRANTED: the token; otherwise 0. */
  token: Revision;
  /** Revision at which the current status was decided. */
  revision: Revision;
  /** TIMED_OUT: why; otherwise null. */
  reason: TimedOutReason | null;
}

export interface LockRecord {
  readonly name: string;
  /** Invariant: all of one mode; an EXCLUSIVE holder is alone; never longer than holdersPerLockMax. */
  holders: readonly Holder[];
  /** FIFO, head first. Invariant: when non-empty, the head cannot be granted now (else promotion would have run). */
  waiters: readonly Waiter[];
  /** Revision of the expiry that started the current lock-delay; 0 = not delayed. */
  delayRevision: number;
  /** Length of the current lock-delay; 0 when not delayed. */
  delayMs: number;
}

/** Whether a request of `mode` could join the current holders (ignoring queue and delay). */
export function canHold(holders: readonly Holder[], mode: LockMode, holdersMax: number): boolean {
  if (holders.length === 0) return true;
  return mode === 'SHARED' && (holders[0] as Holder).mode === 'SHARED' && holders.length < holdersMax;
}

export function newNamespaceRecord(name: Namespace, state: NamespaceState, lastRevision: number): NamespaceRecord {
  return { name, state, lastRevision, sessions: new Map(), locks: new Map() };
}

export function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export function sortedKeys(map: ReadonlyMap<string, unknown>): string[] {
  return [...map.keys()].sort(compareStrings);
}

