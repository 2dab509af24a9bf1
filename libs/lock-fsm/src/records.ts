/**
 * The state machine's internal records. Holders and waiters are immutable
 * objects in arrays that are replaced, never mutated (copy on write): a
 * LockState handed out in an event or outcome can share them safely, and
 * building one costs a single small object.
 */
import type { Namespace, Revision, SessionId } from '@fencer/base';
import { DedupeTable } from './dedupe.js';
import type { Holder, LockMode, NamespaceState, Waiter } from './types.js';

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
  /** How many locks list this session among their holders. */
  heldCount: number;
  /** How many locks list this session among their waiters (never a lock it also holds). */
  waitingCount: number;
  /**
   * Every lock this session holds or awaits, in no particular order, plus
   * stale entries (locks it has since released or stopped waiting for, and
   * repeats). The locks' holder and waiter lists are the truth; this list
   * only lets CloseSession and ExpireSession find them without a scan of the
   * namespace. Kept lazily because a Map per session reallocated its table
   * on almost every acquire and release: entries are only appended, and the
   * list is compacted when it grows past twice the live count (see
   * `addSessionLock`), so its length stays O(held + waiting).
   */
  locks: LockRecord[];
  /** Outcomes of the session's last request ids (dedupePerSessionMax of them), in arrival order. */
  readonly dedupe: DedupeTable;
}

export function newSessionRecord(
  id: SessionId,
  ns: NamespaceRecord,
  clientId: string,
  ttlMs: number,
  openedRevision: Revision,
  dedupePerSessionMax: number,
): SessionRecord {
  return { id, ns, clientId, ttlMs, openedRevision, heldCount: 0, waitingCount: 0, locks: [], dedupe: new DedupeTable(dedupePerSessionMax) };
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


/** Index of `sessionId` among the lock's holders, or -1. */
export function holderIndex(lock: LockRecord, sessionId: string): number {
  const holders = lock.holders;
  for (let i = 0; i < holders.length; i++) if ((holders[i] as Holder).sessionId === sessionId) return i;
  return -1;
}

/** Index of `sessionId` among the lock's waiters, or -1. */
export function waiterIndexOf(lock: LockRecord, sessionId: string): number {
  const waiters = lock.waiters;
  for (let i = 0; i < waiters.length; i++) if ((waiters[i] as Waiter).sessionId === sessionId) return i;
  return -1;
}

function isMember(lock: LockRecord, sessionId: string): boolean {
  return holderIndex(lock, sessionId) >= 0 || waiterIndexOf(lock, sessionId) >= 0;
}

/** Below this many kept entries, compaction finds repeats by a scan instead of a Set. */
const COMPACT_SCAN_MAX = 32;

/**
 * Records that `s` now holds or awaits `lock` (call after adding it to the
 * lock's holders or waiters, and after counting it). Compacts the list
 * first when it has grown past twice the live count: the work is paid for
 * by the appends since the last compaction.
 */
export function addSessionLock(s: SessionRecord, lock: LockRecord): void {
  const locks = s.locks;
  if (locks.length >= 2 * (s.heldCount + s.waitingCount) + 16) compactSessionLocks(s);
  s.locks.push(lock);
}

/** Drops the entries of `s.locks` that are stale or repeated; keeps the first of each live lock. */
export function compactSessionLocks(s: SessionRecord): void {
  const locks = s.locks;
  const kept: LockRecord[] = [];
  let seen: Set<LockRecord> | undefined;
  for (let i = 0; i < locks.length; i++) {
    const lock = locks[i] as LockRecord;
    if (!isMember(lock, s.id)) continue;
    if (seen !== undefined) {
      if (seen.has(lock)) continue;
      seen.add(lock);
    } else if (kept.includes(lock)) {
      continue;
    } else if (kept.length >= COMPACT_SCAN_MAX) {
      seen = new Set(kept);
      seen.add(lock);
    }
    kept.push(lock);
  }
  s.locks = kept;
}

/**
 * The locks `s` holds or awaits, each once, sorted by name: the order in
 * which CloseSession and ExpireSession handle them. Compacts `s.locks`.
 */
export function sessionLocksSorted(s: SessionRecord): LockRecord[] {
  compactSessionLocks(s);
  return s.locks.slice().sort((a, b) => compareStrings(a.name, b.name));
}
