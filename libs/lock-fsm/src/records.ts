/**
 * The state machine's internal records. Holders and waiters are immutable
 * objects in arrays that are replaced, never mutated (copy on write): a
 * LockState handed out in an event or outcome can share them safely, and
 * building one costs a single small object.
 */
import { assert, type Namespace, type Revision, type SessionId } from '@fencer/base';
import { DedupeTable } from './dedupe.js';
import type { Holder, LockMode, NamespaceState, Waiter } from './types.js';
import { NO_QUOTAS, type NamespaceQuotas } from './quotas.js';
import { NO_CREDENTIALS, type NamespaceCredentials } from './credentials.js';

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
  /** The tenant's quotas (SetNamespaceQuotas); NO_QUOTAS until set. */
  quotas: NamespaceQuotas;
  /** The tenant's token hashes (SetNamespaceCredentials); NO_CREDENTIALS until set. */
  credentials: NamespaceCredentials;
  /** Waiters over every lock of the namespace: what maxWaiters limits. */
  waiterCount: number;
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
   * Every lock this session holds or awaits, in no particular order, in
   * slots 0..lockListLength-1 of `lockList`. The locks' holder and waiter
   * lists are the truth; this list lets CloseSession and ExpireSession find
   * a session's locks without a scan of the namespace. (A Map per session
   * did the same, but reallocated its table on almost every acquire and
   * release.) A lock the session leaves is removed at once when it sits near
   * either end of the list (the usual case: few locks, or released in order
   * of acquisition); otherwise it stays as a stale entry until the list
   * reaches twice the live count plus 16, when `compactSessionLocks` drops
   * every stale entry. The array never shrinks in place: an array whose
   * length falls to a small fraction of its capacity gives its backing store
   * back, and the next push would allocate a new one.
   */
  lockList: LockRecord[];
  lockListLength: number;
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
  return {
    id,
    ns,
    clientId,
    ttlMs,
    openedRevision,
    heldCount: 0,
    waitingCount: 0,
    lockList: [],
    lockListLength: 0,
    dedupe: new DedupeTable(dedupePerSessionMax),
  };
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
  return {
    name,
    state,
    lastRevision,
    sessions: new Map(),
    locks: new Map(),
    quotas: NO_QUOTAS,
    credentials: NO_CREDENTIALS,
    waiterCount: 0,
  };
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

/** A lock is looked for this many entries deep from each end of a session's list when the session leaves it. */
const REMOVE_SCAN_MAX = 8;
/** Below this many kept entries, compaction finds repeats by a scan instead of a Set. */
const COMPACT_SCAN_MAX = 32;
/** Fills the slots a session's list no longer uses, so they keep no lock record alive. */
const NO_LOCK: LockRecord = Object.freeze({ name: '', holders: EMPTY, waiters: EMPTY, delayRevision: 0, delayMs: 0 }) as LockRecord;

/**
 * Records that `s` now holds or awaits `lock` (call after adding it to the
 * lock's holders or waiters, and after counting it). Compacts the list
 * when it has grown past twice the live count: the work is paid for by the
 * appends since the last compaction. The lock goes in first: it is already
 * counted, so a compaction without it would find one lock missing.
 */
export function addSessionLock(s: SessionRecord, lock: LockRecord): void {
  const list = s.lockList;
  const at = s.lockListLength++;
  if (at < list.length) list[at] = lock;
  else list.push(lock);
  if (s.lockListLength > 2 * (s.heldCount + s.waitingCount) + 16) compactSessionLocks(s);
}

/**
 * `s` no longer holds or awaits `lock` (call after removing it from the
 * lock's holders or waiters). Removes the entry when it is near either end
 * of the list; a deeper one stays stale until the next compaction.
 */
export function removeSessionLock(s: SessionRecord, lock: LockRecord): void {
  const list = s.lockList;
  const n = s.lockListLength;
  let at = -1;
  for (let i = n - 1; i >= 0 && i >= n - REMOVE_SCAN_MAX; i--) {
    if (list[i] === lock) {
      at = i;
      break;
    }
  }
  if (at < 0) {
    const end = Math.min(REMOVE_SCAN_MAX, n - REMOVE_SCAN_MAX);
    for (let i = 0; i < end; i++) {
      if (list[i] === lock) {
        at = i;
        break;
      }
    }
  }
  if (at < 0) return;
  // Order carries no meaning: the last entry fills the gap.
  list[at] = list[n - 1] as LockRecord;
  list[n - 1] = NO_LOCK;
  s.lockListLength = n - 1;
}

/** Drops the entries of the session's list that are stale or repeated; keeps the first of each live lock. */
export function compactSessionLocks(s: SessionRecord): void {
  const list = s.lockList;
  const n = s.lockListLength;
  let kept = 0;
  let seen: Set<LockRecord> | undefined;
  for (let i = 0; i < n; i++) {
    const lock = list[i] as LockRecord;
    if (!isMember(lock, s.id)) continue;
    if (seen !== undefined) {
      if (seen.has(lock)) continue;
      seen.add(lock);
    } else if (indexInPrefix(list, kept, lock)) {
      continue;
    } else if (kept >= COMPACT_SCAN_MAX) {
      seen = new Set(list.slice(0, kept));
      seen.add(lock);
    }
    list[kept++] = lock;
  }
  for (let i = kept; i < n; i++) list[i] = NO_LOCK;
  s.lockListLength = kept;
  assert(kept === s.heldCount + s.waitingCount, 'a session lists each lock it holds or awaits');
}

function indexInPrefix(list: readonly LockRecord[], length: number, lock: LockRecord): boolean {
  for (let i = 0; i < length; i++) if (list[i] === lock) return true;
  return false;
}

/**
 * The locks `s` holds or awaits, each once, sorted by name: the order in
 * which CloseSession and ExpireSession handle them. Compacts the list.
 */
export function sessionLocksSorted(s: SessionRecord): LockRecord[] {
  compactSessionLocks(s);
  return s.lockList.slice(0, s.lockListLength).sort((a, b) => compareStrings(a.name, b.name));
}
