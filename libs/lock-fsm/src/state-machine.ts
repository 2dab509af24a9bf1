/**
 * The lock state machine: the deterministic function every replica of a
 * cell applies, entry by entry (ARCHITECTURE "Promises" are its semantics).
 *
 * - Deterministic: no clock, no randomness, no iteration over an order that
 *   could differ between replicas (sets are sorted before they are walked).
 *   Time-based decisions (expiry, wait deadlines, lock-delay's end) arrive as
 *   commands the leader decided.
 * - Domain outcomes are values; only a broken invariant or an entry this
 *   version cannot read throws (AssertionError: the replica must stop).
 * - Revision of an entry = log index + revision base. A grant's fencing token
 *   is the revision of the entry that decided it, including a waiter promoted
 *   by a later Release, Close, Expire, Cancel or LiftLockDelay.
 */
import {
  assert,
  assertUint,
  AssertionError,
  namespaceOfSessionId,
  unreachable,
  type Namespace,
  type RequestId,
  type Revision,
  type SessionId,
} from '@fencer/base';
import { DecodeError, decodeOrCrash } from './codec.js';
import {
  decodeCommand,
  type AcquireCommand,
  type CancelWaitCommand,
  type Command,
  type CommandKind,
  type ImportNamespaceCommand,
  type LiftLockDelayCommand,
  type OpenSessionCommand,
  type ReleaseCommand,
} from './commands.js';
import { checkLimits, LIMITS, LIST_LOCKS_LIMIT_DEFAULT, LIST_LOCKS_LIMIT_MAX, type FsmLimits } from './limits.js';
import { parseLockName, parseLockPrefix } from './names.js';
import { canHold, compareStrings, EMPTY, newNamespaceRecord, sortedKeys, type DedupeRecord, type LockRecord, type NamespaceRecord, type SessionRecord } from './records.js';
import { decodeExport, decodeSnapshot, encodeExport, encodeSnapshot } from './state-codec.js';
import type {
  AcquireOutcome,
  CancelWaitOutcome,
  CheckTokenAnswer,
  CloseSessionOutcome,
  DelayedLock,
  DropNamespaceOutcome,
  ExpireSessionOutcome,
  ExportNamespaceOutcome,
  Failure,
  Holder,
  ImportNamespaceOutcome,
  LiftLockDelayOutcome,
  ListLocksPage,
  LockEvent,
  LockEventType,
  LockMode,
  LockState,
  NamespaceChangeOutcome,
  NamespaceInfo,
  NoopOutcome,
  OpenSessionOutcome,
  ReleaseOutcome,
  SessionInfo,
  Waiter,
  WaiterInfo,
} from './types.js';
import {
  checkClientId,
  checkLockDelayMs,
  checkMode,
  checkName,
  checkNamespaceName,
  checkRequestId,
  checkSessionId,
  checkToken,
  checkTtlMs,
  checkWaitMs,
  fail,
  isFailure,
} from './validate.js';
import { fnv1a64 } from './hash.js';

export interface LockStateMachineOptions {
  /**
   * A cell without a control plane owns every namespace and claims one on
   * its first OpenSession (ARCHITECTURE decision 5). Otherwise a namespace
   * must be claimed (ClaimNamespace) or imported first. Cell configuration:
   * every replica of a cell must use the same value.
   */
  readonly autoClaim: boolean;
  /** Revision base of a new cell (default 0). Restored state carries its own. */
  readonly revisionBase?: number;
  /** Overrides of LIMITS; the same on every replica of a cell. */
  readonly limits?: Partial<FsmLimits>;
}

/** The outcome type of each command kind. */
export interface OutcomeOf {
  OpenSession: OpenSessionOutcome | Failure;
  CloseSession: CloseSessionOutcome | Failure;
  ExpireSession: ExpireSessionOutcome | Failure;
  Acquire: AcquireOutcome | Failure;
  Release: ReleaseOutcome | Failure;
  CancelWait: CancelWaitOutcome | Failure;
  Noop: NoopOutcome;
  LiftLockDelay: LiftLockDelayOutcome | Failure;
  ClaimNamespace: NamespaceChangeOutcome | Failure;
  FreezeNamespace: NamespaceChangeOutcome | Failure;
  UnfreezeNamespace: NamespaceChangeOutcome | Failure;
  ExportNamespace: ExportNamespaceOutcome | Failure;
  ImportNamespace: ImportNamespaceOutcome | Failure;
  DropNamespace: DropNamespaceOutcome | Failure;
}
export type Outcome = OutcomeOf[CommandKind];

export interface ApplyResult<O extends Outcome = Outcome> {
  readonly index: number;
  /** Revision of this entry: index + revision base (after an import raised the base). */
  readonly revision: Revision;
  readonly outcome: O;
  /** Watch events of this entry, in the order they happened; all carry `revision`. */
  readonly events: readonly LockEvent[];
}

interface PendingEvent {
  type: LockEventType;
  revision: Revision;
  name: string;
  sessionId: SessionId;
  token: Revision;
  requestId: RequestId | null;
  lock: LockState;
}

const NO_EVENTS: readonly LockEvent[] = Object.freeze([]);
const NOOP_OUTCOME: NoopOutcome = Object.freeze({ ok: true });
/** Placeholder until an entry's events get their lock states. */
const PENDING_STATE: LockState = Object.freeze({ name: '', mode: null, holders: EMPTY, waiters: EMPTY, delayed: false });

function freeState(name: string): LockState {
  return { name, mode: null, holders: EMPTY, waiters: EMPTY, delayed: false };
}

function stateOf(lock: LockRecord): LockState {
  const first = lock.holders[0];
  return {
    name: lock.name,
    mode: first === undefined ? null : first.mode,
    holders: lock.holders,
    waiters: lock.waiters,
    delayed: lock.delayRevision !== 0,
  };
}

function notHere(namespace: string): Failure {
  return fail('NAMESPACE_NOT_HERE', `this cell does not own namespace "${namespace}"; refresh routing`);
}

function moving(namespace: string): Failure {
  return fail('NAMESPACE_MOVING', `namespace "${namespace}" is frozen for a move; retry with the same request id`);
}

function holderOf(lock: LockRecord, sessionId: SessionId): Holder {
  const holders = lock.holders;
  for (let i = 0; i < holders.length; i++) {
    const h = holders[i] as Holder;
    if (h.sessionId === sessionId) return h;
  }
  throw new AssertionError(`session ${sessionId} is recorded as holder of ${lock.name} but is not among its holders`);
}

function waiterIndex(lock: LockRecord, sessionId: SessionId): number {
  const waiters = lock.waiters;
  for (let i = 0; i < waiters.length; i++) if ((waiters[i] as Waiter).sessionId === sessionId) return i;
  throw new AssertionError(`session ${sessionId} is recorded as waiter of ${lock.name} but is not in its queue`);
}

function without<T>(items: readonly T[], index: number): readonly T[] {
  if (items.length === 1) return EMPTY;
  const out = items.slice(0, index);
  for (let i = index + 1; i < items.length; i++) out.push(items[i] as T);
  return out;
}

export class LockStateMachine {
  readonly limits: FsmLimits;
  readonly autoClaim: boolean;
  private readonly namespaceRecords: Map<string, NamespaceRecord>;
  /** Every live session by id (the same records as in their namespaces): one lookup on the hot path. */
  private readonly sessionsById = new Map<string, SessionRecord>();
  private sessionCount = 0;
  private appliedIndexValue = 0;
  private revisionBaseValue: number;
  /** Revision of the entry being applied (index + base). */
  private rev = 0;
  /** Events of the entry being applied, and the lock of each; both reused from entry to entry. */
  private readonly pendingEvents: PendingEvent[] = [];
  private readonly pendingLocks: LockRecord[] = [];

  constructor(options: LockStateMachineOptions) {
    this.autoClaim = options.autoClaim;
    this.limits = { ...LIMITS, ...options.limits };
    checkLimits(this.limits);
    this.revisionBaseValue = options.revisionBase ?? 0;
    assertUint(this.revisionBaseValue, 'revisionBase');
    this.namespaceRecords = new Map();
    this.rev = this.revisionBaseValue;
  }

  /** A state machine holding exactly the state of `snapshot()` bytes. Corrupt bytes are an AssertionError. */
  static restore(bytes: Uint8Array, options: Omit<LockStateMachineOptions, 'revisionBase'>): LockStateMachine {
    const fsm = new LockStateMachine(options);
    const decoded = decodeOrCrash('snapshot', () => decodeSnapshot(bytes, fsm.limits));
    for (const [name, ns] of decoded.namespaces) {
      fsm.namespaceRecords.set(name, ns);
      for (const [id, s] of ns.sessions) fsm.sessionsById.set(id, s);
    }
    fsm.sessionCount = decoded.sessionCount;
    fsm.appliedIndexValue = decoded.appliedIndex;
    fsm.revisionBaseValue = decoded.revisionBase;
    fsm.rev = decoded.appliedIndex + decoded.revisionBase;
    return fsm;
  }

  /** Index of the last applied entry (0 before any). */
  get appliedIndex(): number {
    return this.appliedIndexValue;
  }

  /** The cell's revision base: only grows (raised by ImportNamespace). */
  get revisionBase(): number {
    return this.revisionBaseValue;
  }

  /** Revision of the last applied entry: what a linearizable read reports it was read at. */
  get revision(): Revision {
    return (this.appliedIndexValue + this.revisionBaseValue) as Revision;
  }

  // ---------------------------------------------------------------- apply

  /** Decodes and applies one committed entry. Empty data is Raft's blank entry (Noop). */
  applyEntry(index: number, data: Uint8Array): ApplyResult {
    return this.apply(index, decodeCommand(data));
  }

  /** Applies one committed command at log `index` (strictly increasing; gaps are entries that are not commands). */
  apply<C extends Command>(index: number, command: C): ApplyResult<OutcomeOf[C['kind']]> {
    if (!(Number.isSafeInteger(index) && index > this.appliedIndexValue)) {
      throw new AssertionError(`entries apply in increasing index order: ${index} after ${this.appliedIndexValue}`);
    }
    assert(this.pendingEvents.length === 0, 'no events left over from the previous entry');
    this.appliedIndexValue = index;
    this.rev = index + this.revisionBaseValue;
    assert(Number.isSafeInteger(this.rev), 'revision stays a safe integer');
    const outcome = this.dispatch(command);
    const events = this.takeEvents();
    return { index, revision: this.rev as Revision, outcome: outcome as OutcomeOf[C['kind']], events };
  }

  private dispatch(command: Command): Outcome {
    switch (command.kind) {
      case 'OpenSession':
        return this.openSession(command);
      case 'CloseSession':
        return this.endSession(command.sessionId, false);
      case 'ExpireSession':
        return this.endSession(command.sessionId, true);
      case 'Acquire':
        return this.acquire(command);
      case 'Release':
        return this.release(command);
      case 'CancelWait':
        return this.cancelWait(command);
      case 'Noop':
        return NOOP_OUTCOME;
      case 'LiftLockDelay':
        return this.liftLockDelay(command);
      case 'ClaimNamespace':
        return this.claimNamespace(command.namespace);
      case 'FreezeNamespace':
        return this.setFrozen(command.namespace, true);
      case 'UnfreezeNamespace':
        return this.setFrozen(command.namespace, false);
      case 'ExportNamespace':
        return this.exportNamespace(command.namespace);
      case 'ImportNamespace':
        return this.importNamespace(command);
      case 'DropNamespace':
        return this.dropNamespace(command.namespace);
      default:
        return unreachable(command, 'command kind');
    }
  }

  private emit(type: LockEventType, lock: LockRecord, sessionId: SessionId, token: number, requestId: RequestId | null): void {
    this.pendingEvents.push({ type, revision: this.rev as Revision, name: lock.name, sessionId, token: token as Revision, requestId, lock: PENDING_STATE });
    this.pendingLocks.push(lock);
  }

  /** Gives each event of this entry its lock's state after the whole entry. */
  private takeEvents(): readonly LockEvent[] {
    const pending = this.pendingEvents;
    if (pending.length === 0) return NO_EVENTS;
    // An exact-size copy: most entries have one event, and a fresh array grown by push would reserve 16 slots.
    const events = pending.slice();
    pending.length = 0;
    const locks = this.pendingLocks;
    let lastLock: LockRecord | undefined;
    let lastState = PENDING_STATE;
    for (let i = 0; i < events.length; i++) {
      const lock = locks[i] as LockRecord;
      if (lock !== lastLock) {
        lastLock = lock;
        lastState = stateOf(lock);
      }
      (events[i] as PendingEvent).lock = lastState;
    }
    locks.length = 0;
    return events;
  }

  // ------------------------------------------------------------- sessions

  private lookupSession(sessionId: string): SessionRecord | Failure {
    const live = this.sessionsById.get(sessionId);
    if (live !== undefined) return live;
    // Not live: find the failure that tells the caller what to do.
    const nsName = typeof sessionId === 'string' ? namespaceOfSessionId(sessionId) : undefined;
    if (nsName === undefined) return fail('SESSION_NOT_FOUND', `no session ${String(sessionId)}`);
    const ns = this.namespaceRecords.get(nsName);
    if (ns === undefined) return this.autoClaim ? fail('SESSION_NOT_FOUND', `no session ${sessionId}`) : notHere(nsName);
    if (ns.state === 'moved') return notHere(nsName);
    return ns.sessions.get(sessionId) ?? fail('SESSION_NOT_FOUND', `no session ${sessionId} (unknown, closed or expired)`);
  }

  private openSession(c: OpenSessionCommand): OpenSessionOutcome | Failure {
    const bad = checkNamespaceName(c.namespace) ?? checkSessionId(c.sessionId, c.namespace) ?? checkClientId(c.clientId) ?? checkTtlMs(c.ttlMs);
    if (bad !== undefined) return bad;
    let ns = this.namespaceRecords.get(c.namespace);
    if (ns !== undefined && ns.state === 'moved') return notHere(c.namespace);
    if (ns !== undefined && ns.state === 'frozen') return moving(c.namespace);
    if (ns === undefined && !this.autoClaim) return notHere(c.namespace);
    const existing = ns?.sessions.get(c.sessionId);
    if (existing !== undefined) {
      if (existing.clientId === c.clientId && existing.ttlMs === c.ttlMs) {
        return { ok: true, sessionId: existing.id, ttlMs: existing.ttlMs, claimed: false, existed: true };
      }
      return fail('INVALID_ARGUMENT', `session id ${c.sessionId} is already in use`);
    }
    if (this.sessionCount >= this.limits.sessionsMax) return fail('QUOTA_EXCEEDED', `this cell holds its maximum of ${this.limits.sessionsMax} sessions`);
    let claimed = false;
    if (ns === undefined) {
      if (this.namespaceRecords.size >= this.limits.namespacesMax) return fail('QUOTA_EXCEEDED', `this cell holds its maximum of ${this.limits.namespacesMax} namespaces`);
      ns = newNamespaceRecord(c.namespace, 'active', this.rev);
      this.namespaceRecords.set(c.namespace, ns);
      claimed = true;
    }
    if (ns.sessions.size >= this.limits.sessionsPerNamespaceMax) {
      return fail('QUOTA_EXCEEDED', `namespace "${c.namespace}" holds its maximum of ${this.limits.sessionsPerNamespaceMax} sessions`);
    }
    const s: SessionRecord = {
      id: c.sessionId,
      ns,
      clientId: c.clientId,
      ttlMs: c.ttlMs,
      openedRevision: this.rev as Revision,
      held: new Map(),
      waiting: new Map(),
      dedupe: new Map(),
      dedupeRing: [],
      dedupeNext: 0,
    };
    ns.sessions.set(s.id, s);
    this.sessionsById.set(s.id, s);
    this.sessionCount++;
    ns.lastRevision = this.rev;
    return { ok: true, sessionId: s.id, ttlMs: s.ttlMs, claimed, existed: false };
  }

  /**
   * CloseSession (expire = false) and ExpireSession: release every holding
   * and cancel every wait, name by name in sorted order, promoting waiters of
   * each lock. Only an expiry starts a lock-delay.
   */
  private endSession(sessionId: SessionId, expire: boolean): ExpireSessionOutcome | CloseSessionOutcome | Failure {
    const s = this.lookupSession(sessionId);
    if (isFailure(s)) return s;
    const ns = s.ns;
    if (ns.state === 'frozen') return moving(ns.name);
    const names = [...s.held.keys(), ...s.waiting.keys()].sort(compareStrings);
    const released: string[] = [];
    const delayed: DelayedLock[] = [];
    for (const name of names) {
      const heldLock = s.held.get(name);
      const lock = heldLock ?? (s.waiting.get(name) as LockRecord);
      if (heldLock !== undefined) {
        const h = holderOf(lock, s.id);
        lock.holders = without(lock.holders, lock.holders.indexOf(h));
        released.push(name);
        this.emit('EXPIRED', lock, s.id, h.token, null);
        if (expire && h.lockDelayMs > 0) {
          lock.delayRevision = this.rev;
          lock.delayMs = h.lockDelayMs;
          delayed.push({ name, delayMs: h.lockDelayMs, delayRevision: this.rev as Revision });
        }
      } else {
        const at = waiterIndex(lock, s.id);
        const w = lock.waiters[at] as Waiter;
        lock.waiters = without(lock.waiters, at);
        this.emit('EXPIRED', lock, s.id, 0, w.requestId);
      }
      this.promote(ns, lock);
      this.dropIfFree(ns, lock);
    }
    ns.sessions.delete(s.id);
    this.sessionsById.delete(s.id);
    this.sessionCount--;
    ns.lastRevision = this.rev;
    return expire ? { ok: true, released, delayed } : { ok: true, released };
  }

  // ---------------------------------------------------------------- locks

  private remember(s: SessionRecord, requestId: string, record: DedupeRecord): void {
    const dedupe = s.dedupe;
    const ring = s.dedupeRing;
    const max = this.limits.dedupePerSessionMax;
    if (ring.length < max) {
      ring.push(requestId);
    } else {
      const at = s.dedupeNext;
      dedupe.delete(ring[at] as string);
      ring[at] = requestId;
      s.dedupeNext = at + 1 === max ? 0 : at + 1;
    }
    const before = dedupe.size;
    dedupe.set(requestId, record);
    assert(dedupe.size === before + 1 && dedupe.size === ring.length, 'a request id is remembered once, in the map and the ring');
  }

  /** The same outcome again for a retried request id (ARCHITECTURE "Retries"). */
  private replay(s: SessionRecord, requestId: string, d: DedupeRecord): AcquireOutcome {
    switch (d.status) {
      case 'GRANTED':
        return { ok: true, status: 'GRANTED', token: d.token, holders: s.ns.locks.get(d.name)?.holders ?? EMPTY, revision: d.revision, deduped: true };
      case 'QUEUED': {
        const lock = s.waiting.get(d.name);
        assert(lock !== undefined, 'a QUEUED request has its waiter');
        const at = waiterIndex(lock, s.id);
        assert((lock.waiters[at] as Waiter).requestId === requestId, 'the waiter of a QUEUED record is that request');
        return { ok: true, status: 'QUEUED', position: at, revision: d.revision, deduped: true };
      }
      case 'TIMED_OUT':
        assert(d.reason !== null, 'a TIMED_OUT record has a reason');
        return { ok: true, status: 'TIMED_OUT', reason: d.reason, revision: d.revision, deduped: true };
      default:
        return unreachable(d.status, 'dedupe status');
    }
  }

  private acquire(c: AcquireCommand): AcquireOutcome | Failure {
    const s = this.lookupSession(c.sessionId);
    if (isFailure(s)) return s;
    const ns = s.ns;
    // Retries first: a retry is answered even while the namespace is frozen.
    const prior = s.dedupe.get(c.requestId);
    if (prior !== undefined) return this.replay(s, c.requestId, prior);
    // The session can hold or await only a live lock: skip those lookups for a new name.
    let lock = ns.locks.get(c.name);
    const waitingLock = lock !== undefined && s.waiting.size > 0 ? s.waiting.get(c.name) : undefined;
    let waiter: Waiter | undefined;
    if (waitingLock !== undefined) {
      const at = waiterIndex(waitingLock, s.id);
      waiter = waitingLock.waiters[at] as Waiter;
      // Its dedupe record was pushed out by newer requests, but it still waits.
      if (waiter.requestId === c.requestId) return { ok: true, status: 'QUEUED', position: at, revision: waiter.queuedRevision, deduped: true };
    }
    if (ns.state === 'frozen') return moving(ns.name);
    // A live lock's name was validated when the lock was created.
    const bad =
      checkRequestId(c.requestId) ??
      (lock === undefined ? checkName(c.name, ns.name) : undefined) ??
      checkMode(c.mode) ??
      checkWaitMs(c.waitMs) ??
      checkLockDelayMs(c.lockDelayMs);
    if (bad !== undefined) return bad;
    if (waiter !== undefined) {
      return fail('INVALID_ARGUMENT', `session already waits for ${c.name} with request ${waiter.requestId}; retry that request id or cancel it`);
    }
    const heldLock = lock !== undefined ? s.held.get(c.name) : undefined;
    if (heldLock !== undefined) {
      // Re-acquiring what the session holds answers the grant it has.
      const h = holderOf(heldLock, s.id);
      if (h.mode !== c.mode) return fail('INVALID_MODE', `session already holds ${c.name} in ${h.mode} mode; release it first`);
      this.remember(s, c.requestId, { status: 'GRANTED', name: c.name, token: h.token, revision: h.token, reason: null });
      ns.lastRevision = this.rev;
      return { ok: true, status: 'GRANTED', token: h.token, holders: heldLock.holders, revision: h.token, deduped: false };
    }
    const grantable =
      lock === undefined || (lock.delayRevision === 0 && lock.waiters.length === 0 && canHold(lock.holders, c.mode, this.limits.holdersPerLockMax));
    const rev = this.rev as Revision;
    if (!grantable && c.tryLock) {
      this.remember(s, c.requestId, { status: 'TIMED_OUT', name: c.name, token: 0 as Revision, revision: rev, reason: 'busy' });
      ns.lastRevision = rev;
      return { ok: true, status: 'TIMED_OUT', reason: 'busy', revision: rev, deduped: false };
    }
    if (s.held.size + s.waiting.size >= this.limits.locksPerSessionMax) {
      return fail('QUOTA_EXCEEDED', `session holds or awaits its maximum of ${this.limits.locksPerSessionMax} locks`);
    }
    if (grantable) {
      if (lock === undefined) {
        lock = { name: c.name, holders: EMPTY, waiters: EMPTY, delayRevision: 0, delayMs: 0 };
        ns.locks.set(c.name, lock);
      }
      const holder: Holder = { sessionId: s.id, clientId: s.clientId, mode: c.mode, token: rev, lockDelayMs: c.lockDelayMs };
      lock.holders = lock.holders.length === 0 ? [holder] : [...lock.holders, holder];
      s.held.set(c.name, lock);
      this.remember(s, c.requestId, { status: 'GRANTED', name: c.name, token: rev, revision: rev, reason: null });
      this.emit('ACQUIRED', lock, s.id, rev, c.requestId);
      ns.lastRevision = rev;
      return { ok: true, status: 'GRANTED', token: rev, holders: lock.holders, revision: rev, deduped: false };
    }
    assert(lock !== undefined, 'only an existing lock can be busy');
    if (lock.waiters.length >= this.limits.waitersPerLockMax) {
      return fail('QUOTA_EXCEEDED', `lock ${c.name} has its maximum of ${this.limits.waitersPerLockMax} waiters`);
    }
    const w: Waiter = {
      sessionId: s.id,
      clientId: s.clientId,
      mode: c.mode,
      requestId: c.requestId,
      waitMs: c.waitMs,
      lockDelayMs: c.lockDelayMs,
      queuedRevision: rev,
    };
    lock.waiters = lock.waiters.length === 0 ? [w] : [...lock.waiters, w];
    s.waiting.set(c.name, lock);
    this.remember(s, c.requestId, { status: 'QUEUED', name: c.name, token: 0 as Revision, revision: rev, reason: null });
    this.emit('QUEUED', lock, s.id, 0, c.requestId);
    ns.lastRevision = rev;
    return { ok: true, status: 'QUEUED', position: lock.waiters.length - 1, revision: rev, deduped: false };
  }

  /**
   * Grants from the head of the queue while it can (ARCHITECTURE "Fairness"):
   * consecutive shared waiters together, stopping at the first it cannot
   * grant. Tokens are this entry's revision.
   */
  private promote(ns: NamespaceRecord, lock: LockRecord): void {
    if (lock.delayRevision !== 0) return;
    const waiters = lock.waiters;
    if (waiters.length === 0) return;
    const holdersMax = this.limits.holdersPerLockMax;
    let count = lock.holders.length;
    let mode: LockMode | undefined = lock.holders[0]?.mode;
    let k = 0;
    while (k < waiters.length) {
      const w = waiters[k] as Waiter;
      if (!(count === 0 || (w.mode === 'SHARED' && mode === 'SHARED' && count < holdersMax))) break;
      mode = w.mode;
      count++;
      k++;
    }
    if (k === 0) return;
    const rev = this.rev as Revision;
    const holders = lock.holders.slice();
    lock.waiters = k === waiters.length ? EMPTY : waiters.slice(k);
    for (let i = 0; i < k; i++) {
      const w = waiters[i] as Waiter;
      const s = ns.sessions.get(w.sessionId);
      assert(s !== undefined && s.waiting.get(lock.name) === lock, 'a waiter is a live session waiting for the lock');
      s.waiting.delete(lock.name);
      s.held.set(lock.name, lock);
      holders.push({ sessionId: w.sessionId, clientId: w.clientId, mode: w.mode, token: rev, lockDelayMs: w.lockDelayMs });
      // The request's record, unless newer requests pushed it out (then the
      // id may even have been reused for another name: leave that one alone).
      const d = s.dedupe.get(w.requestId);
      if (d !== undefined && d.name === lock.name) {
        assert(d.status === 'QUEUED', 'a waiter’s dedupe record is QUEUED');
        d.status = 'GRANTED';
        d.token = rev;
        d.revision = rev;
      }
      this.emit('ACQUIRED', lock, w.sessionId, rev, w.requestId);
    }
    lock.holders = holders;
    assert(holders.length <= holdersMax, 'promotion respects holdersPerLockMax');
  }

  /** A lock record disappears when nobody holds it, nobody waits and no lock-delay runs. */
  private dropIfFree(ns: NamespaceRecord, lock: LockRecord): void {
    if (lock.holders.length === 0 && lock.waiters.length === 0 && lock.delayRevision === 0) {
      const deleted = ns.locks.delete(lock.name);
      assert(deleted, 'a free lock was in its namespace');
    }
  }

  private release(c: ReleaseCommand): ReleaseOutcome | Failure {
    const s = this.lookupSession(c.sessionId);
    if (isFailure(s)) return s;
    const ns = s.ns;
    if (ns.state === 'frozen') return moving(ns.name);
    const lock = s.held.get(c.name);
    const bad = (lock === undefined ? checkName(c.name, ns.name) : undefined) ?? checkToken(c.token);
    if (bad !== undefined) return bad;
    if (lock === undefined) return { ok: true, released: false };
    const h = holderOf(lock, s.id);
    // A stale token is a no-op: a paused client cannot release a later grant.
    if (h.token !== c.token) return { ok: true, released: false };
    lock.holders = without(lock.holders, lock.holders.indexOf(h));
    s.held.delete(c.name);
    this.emit('RELEASED', lock, s.id, h.token, null);
    this.promote(ns, lock);
    this.dropIfFree(ns, lock);
    ns.lastRevision = this.rev;
    return { ok: true, released: true };
  }

  private cancelWait(c: CancelWaitCommand): CancelWaitOutcome | Failure {
    const s = this.lookupSession(c.sessionId);
    if (isFailure(s)) return s;
    const ns = s.ns;
    if (ns.state === 'frozen') return moving(ns.name);
    const lock = s.waiting.get(c.name);
    const bad = checkRequestId(c.requestId) ?? (lock === undefined ? checkName(c.name, ns.name) : undefined);
    if (bad !== undefined) return bad;
    assert(c.reason === 'timed-out' || c.reason === 'cancelled', 'cancel reason is known');
    if (lock === undefined) return { ok: true, cancelled: false };
    const at = waiterIndex(lock, s.id);
    const w = lock.waiters[at] as Waiter;
    if (w.requestId !== c.requestId) return { ok: true, cancelled: false };
    lock.waiters = without(lock.waiters, at);
    s.waiting.delete(c.name);
    const d = s.dedupe.get(c.requestId);
    if (d !== undefined && d.name === c.name) {
      assert(d.status === 'QUEUED', 'a waiter’s dedupe record is QUEUED');
      d.status = 'TIMED_OUT';
      d.reason = c.reason;
      d.revision = this.rev as Revision;
    }
    this.emit('CANCELED', lock, s.id, 0, w.requestId);
    this.promote(ns, lock);
    this.dropIfFree(ns, lock);
    ns.lastRevision = this.rev;
    return { ok: true, cancelled: true };
  }

  private liftLockDelay(c: LiftLockDelayCommand): LiftLockDelayOutcome | Failure {
    const parsed = parseLockName(c.name);
    if (!parsed.ok) return fail(parsed.code, parsed.message);
    const bad = checkToken(c.delayRevision);
    if (bad !== undefined) return bad;
    const ns = this.namespaceRecords.get(parsed.namespace);
    if (ns === undefined) return this.autoClaim ? { ok: true, lifted: false } : notHere(parsed.namespace);
    if (ns.state === 'moved') return notHere(ns.name);
    if (ns.state === 'frozen') return moving(ns.name);
    const lock = ns.locks.get(c.name);
    if (lock === undefined || lock.delayRevision === 0 || lock.delayRevision !== c.delayRevision) return { ok: true, lifted: false };
    lock.delayRevision = 0;
    lock.delayMs = 0;
    this.promote(ns, lock);
    this.dropIfFree(ns, lock);
    ns.lastRevision = this.rev;
    return { ok: true, lifted: true };
  }

  // ----------------------------------------------------------- namespaces

  private claimNamespace(namespace: Namespace): NamespaceChangeOutcome | Failure {
    const bad = checkNamespaceName(namespace);
    if (bad !== undefined) return bad;
    const ns = this.namespaceRecords.get(namespace);
    if (ns !== undefined && ns.state !== 'moved') return { ok: true, changed: false };
    if (ns === undefined && this.namespaceRecords.size >= this.limits.namespacesMax) {
      return fail('QUOTA_EXCEEDED', `this cell holds its maximum of ${this.limits.namespacesMax} namespaces`);
    }
    this.namespaceRecords.set(namespace, newNamespaceRecord(namespace, 'active', this.rev));
    return { ok: true, changed: true };
  }

  /** The owned namespace, or the failure for one this cell does not own. */
  private ownedNamespace(namespace: Namespace): NamespaceRecord | Failure {
    const bad = checkNamespaceName(namespace);
    if (bad !== undefined) return bad;
    const ns = this.namespaceRecords.get(namespace);
    if (ns === undefined || ns.state === 'moved') return notHere(namespace);
    return ns;
  }

  private setFrozen(namespace: Namespace, frozen: boolean): NamespaceChangeOutcome | Failure {
    const ns = this.ownedNamespace(namespace);
    if (isFailure(ns)) return ns;
    const target = frozen ? 'frozen' : 'active';
    if (ns.state === target) return { ok: true, changed: false };
    ns.state = target;
    ns.lastRevision = this.rev;
    return { ok: true, changed: true };
  }

  private exportNamespace(namespace: Namespace): ExportNamespaceOutcome | Failure {
    const ns = this.ownedNamespace(namespace);
    if (isFailure(ns)) return ns;
    // Frozen first: nothing may change in the namespace after its export.
    if (ns.state !== 'frozen') return fail('INVALID_ARGUMENT', `freeze namespace "${namespace}" before exporting it`);
    const data = encodeExport(ns, this.rev);
    return { ok: true, data, highestRevision: this.rev as Revision, sessions: ns.sessions.size, locks: ns.locks.size };
  }

  private importNamespace(c: ImportNamespaceCommand): ImportNamespaceOutcome | Failure {
    const bad = checkNamespaceName(c.namespace);
    if (bad !== undefined) return bad;
    const existing = this.namespaceRecords.get(c.namespace);
    if (existing !== undefined && existing.state !== 'moved') {
      return fail('INVALID_ARGUMENT', `namespace "${c.namespace}" is already owned by this cell; drop it before importing`);
    }
    if (existing === undefined && this.namespaceRecords.size >= this.limits.namespacesMax) {
      return fail('QUOTA_EXCEEDED', `this cell holds its maximum of ${this.limits.namespacesMax} namespaces`);
    }
    let decoded;
    try {
      decoded = decodeExport(c.data, this.limits);
    } catch (e) {
      if (e instanceof DecodeError) return fail('INVALID_ARGUMENT', `namespace export is malformed: ${e.message}`);
      throw e;
    }
    if (decoded.namespace !== c.namespace) return fail('INVALID_ARGUMENT', `export is of namespace "${decoded.namespace}", not "${c.namespace}"`);
    if (this.sessionCount + decoded.sessionCount > this.limits.sessionsMax) {
      return fail('QUOTA_EXCEEDED', `importing ${decoded.sessionCount} sessions would exceed this cell's ${this.limits.sessionsMax}`);
    }
    // Decision 3: raise the base so this entry's revision, and every later
    // one, exceeds every revision the namespace saw in its old cell.
    const index = this.appliedIndexValue;
    const base = Math.max(this.revisionBaseValue, decoded.highestRevision - index + 1);
    this.revisionBaseValue = base;
    this.rev = index + base;
    assert(this.rev > decoded.highestRevision && Number.isSafeInteger(this.rev), 'imported namespace continues above its exported revisions');
    const record = decoded.record;
    record.state = c.activate ? 'active' : 'frozen';
    record.lastRevision = this.rev;
    this.namespaceRecords.set(c.namespace, record);
    for (const [id, s] of record.sessions) this.sessionsById.set(id, s);
    this.sessionCount += decoded.sessionCount;
    return { ok: true, revisionBase: base, sessions: decoded.sessionCount, locks: record.locks.size };
  }

  private dropNamespace(namespace: Namespace): DropNamespaceOutcome | Failure {
    const ns = this.ownedNamespace(namespace);
    if (isFailure(ns)) return ns;
    if (ns.state !== 'frozen') return fail('INVALID_ARGUMENT', `freeze namespace "${namespace}" before dropping it`);
    const sessions = ns.sessions.size;
    const locks = ns.locks.size;
    this.sessionCount -= sessions;
    for (const id of ns.sessions.keys()) this.sessionsById.delete(id);
    assert(this.sessionCount >= 0, 'session count stays non-negative');
    // A tombstone: calls for the namespace now answer NAMESPACE_NOT_HERE, even with auto-claim.
    this.namespaceRecords.set(namespace, newNamespaceRecord(namespace, 'moved', this.rev));
    return { ok: true, sessions, locks };
  }

  // ---------------------------------------------------------------- reads

  /** The lock's state; a free (or invalid) name gives the free state. */
  getLock(name: string): LockState {
    const parsed = parseLockName(name);
    if (!parsed.ok) return freeState(name);
    const lock = this.namespaceRecords.get(parsed.namespace)?.locks.get(name);
    return lock === undefined ? freeState(name) : stateOf(lock);
  }

  checkToken(name: string, token: number): CheckTokenAnswer {
    const { holders } = this.getLock(name);
    let current = false;
    let latest = 0;
    for (const h of holders) {
      if (h.token === token) current = true;
      if (h.token > latest) latest = h.token;
    }
    return { current, latestToken: latest as Revision };
  }

  /**
   * Live locks under `prefix` (inside one namespace), ordered by name, at
   * most `limit` (0 = the default, 1000) per page, starting after the page
   * token from the previous page. Costs a scan of the namespace's locks.
   */
  listLocks(prefix: string, limit = 0, pageToken = ''): ListLocksPage | Failure {
    const parsed = parseLockPrefix(prefix);
    if (!parsed.ok) return fail(parsed.code, parsed.message);
    if (!Number.isSafeInteger(limit) || limit < 0) return fail('INVALID_ARGUMENT', `limit must be a non-negative integer, got ${limit}`);
    const pageSize = limit === 0 ? LIST_LOCKS_LIMIT_DEFAULT : Math.min(limit, LIST_LOCKS_LIMIT_MAX);
    const ns = this.namespaceRecords.get(parsed.namespace);
    if (ns === undefined) return { ok: true, locks: [], nextPageToken: '' };
    // Keep the pageSize + 1 smallest matching names, sorted (one more tells whether a next page exists).
    const keep = pageSize + 1;
    const best: string[] = [];
    for (const name of ns.locks.keys()) {
      if (!name.startsWith(prefix) || name <= pageToken) continue;
      if (best.length === keep && name >= (best[keep - 1] as string)) continue;
      let lo = 0;
      let hi = best.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if ((best[mid] as string) < name) lo = mid + 1;
        else hi = mid;
      }
      best.splice(lo, 0, name);
      if (best.length > keep) best.pop();
    }
    const more = best.length > pageSize;
    const page = more ? best.slice(0, pageSize) : best;
    return {
      ok: true,
      locks: page.map((name) => stateOf(ns.locks.get(name) as LockRecord)),
      nextPageToken: more ? (page[page.length - 1] as string) : '',
    };
  }

  /**
   * Undefined when this cell answers for `namespace`; otherwise the failure a
   * read (GetLock, CheckToken, ListLocks, Watch) should return.
   */
  checkNamespace(namespace: string): Failure | undefined {
    const ns = this.namespaceRecords.get(namespace);
    if (ns === undefined) return this.autoClaim ? undefined : notHere(namespace);
    return ns.state === 'moved' ? notHere(namespace) : undefined;
  }

  namespaceInfo(namespace: string): NamespaceInfo | undefined {
    const ns = this.namespaceRecords.get(namespace);
    return ns === undefined ? undefined : namespaceInfoOf(ns);
  }

  /** Every namespace record, sorted by name. */
  namespaces(): NamespaceInfo[] {
    return sortedKeys(this.namespaceRecords).map((name) => namespaceInfoOf(this.namespaceRecords.get(name) as NamespaceRecord));
  }

  getSession(sessionId: string): SessionInfo | undefined {
    const s = this.lookupSession(sessionId);
    return isFailure(s) ? undefined : sessionInfoOf(s);
  }

  /** Every live session: a new leader gives each a fresh TTL (ARCHITECTURE "Expiry"). */
  *sessions(): IterableIterator<SessionInfo> {
    for (const ns of this.namespaceRecords.values()) for (const s of ns.sessions.values()) yield sessionInfoOf(s);
  }

  /** Names a session holds and waits for, sorted; undefined for an unknown session. */
  locksOf(sessionId: string): { held: string[]; waiting: string[] } | undefined {
    const s = this.lookupSession(sessionId);
    if (isFailure(s)) return undefined;
    return { held: sortedKeys(s.held), waiting: sortedKeys(s.waiting) };
  }

  /** Every waiter, for a new leader's wait-deadline tracker. */
  *waiters(): IterableIterator<WaiterInfo> {
    for (const ns of this.namespaceRecords.values()) {
      for (const lock of ns.locks.values()) {
        for (const w of lock.waiters) yield { sessionId: w.sessionId, name: lock.name, requestId: w.requestId, waitMs: w.waitMs, queuedRevision: w.queuedRevision };
      }
    }
  }

  /** Every lock under lock-delay, for a new leader to schedule LiftLockDelay. */
  *delayedLocks(): IterableIterator<DelayedLock> {
    for (const ns of this.namespaceRecords.values()) {
      for (const lock of ns.locks.values()) {
        if (lock.delayRevision !== 0) yield { name: lock.name, delayMs: lock.delayMs, delayRevision: lock.delayRevision as Revision };
      }
    }
  }

  // ------------------------------------------------------------ snapshots

  /** Canonical bytes of the whole state: equal states give equal bytes. */
  snapshot(): Uint8Array {
    return encodeSnapshot(this.appliedIndexValue, this.revisionBaseValue, this.namespaceRecords);
  }

  /** FNV-1a 64 of the snapshot, as 16 hex digits: compares replicas cheaply to the eye and in tests. */
  stateHash(): string {
    return fnv1a64(this.snapshot());
  }

  /**
   * Checks every cross-reference of the state (sessions against the locks
   * they hold and await, queue heads, limits). O(state): for tests and for
   * debugging, not for every entry. Throws AssertionError.
   */
  checkInvariants(): void {
    let sessions = 0;
    const holdersMax = this.limits.holdersPerLockMax;
    for (const [name, ns] of this.namespaceRecords) {
      assert(ns.name === name, 'namespace record under its own name');
      if (ns.state === 'moved') assert(ns.sessions.size === 0 && ns.locks.size === 0, `moved-out ${name} keeps no state`);
      sessions += ns.sessions.size;
      assert(ns.sessions.size <= this.limits.sessionsPerNamespaceMax, `${name} within sessionsPerNamespaceMax`);
      for (const [id, s] of ns.sessions) {
        assert(s.id === id && s.ns === ns && namespaceOfSessionId(id) === name, `session ${id} filed under its namespace`);
        assert(s.held.size + s.waiting.size <= this.limits.locksPerSessionMax, `session ${id} within locksPerSessionMax`);
        assert(s.dedupe.size <= this.limits.dedupePerSessionMax, `session ${id} within dedupePerSessionMax`);
        assert(s.dedupe.size === s.dedupeRing.length && s.dedupeRing.every((r) => s.dedupe.has(r)), `session ${id}: dedupe ring matches its map`);
        const order = [...s.dedupeRing.slice(s.dedupeNext), ...s.dedupeRing.slice(0, s.dedupeNext)];
        assert(order.join('\n') === [...s.dedupe.keys()].join('\n'), `session ${id}: dedupe ring order is arrival order`);
        for (const [lockName, lock] of s.held) {
          assert(ns.locks.get(lockName) === lock && !s.waiting.has(lockName), `${id} holds live ${lockName} and does not also wait`);
          assert(lock.holders.filter((h) => h.sessionId === id).length === 1, `${id} is a holder of ${lockName} once`);
        }
        for (const [lockName, lock] of s.waiting) {
          assert(ns.locks.get(lockName) === lock, `${id} waits for live ${lockName}`);
          assert(lock.waiters.filter((w) => w.sessionId === id).length === 1, `${id} is a waiter of ${lockName} once`);
        }
        for (const [requestId, d] of s.dedupe) {
          if (d.status !== 'QUEUED') continue;
          const lock = s.waiting.get(d.name);
          assert(lock !== undefined && lock.waiters[waiterIndex(lock, s.id)]?.requestId === requestId, `QUEUED ${requestId} of ${id} is waiting`);
        }
      }
      for (const [lockName, lock] of ns.locks) {
        assert(lock.name === lockName, 'lock record under its own name');
        const parsed = parseLockName(lockName);
        assert(parsed.ok && parsed.namespace === name, `lock ${lockName} belongs to ${name}`);
        assert(lock.holders.length > 0 || lock.waiters.length > 0 || lock.delayRevision !== 0, `free lock ${lockName} was dropped`);
        assert((lock.delayRevision === 0) === (lock.delayMs === 0), `${lockName}: delay revision and length agree`);
        assert(lock.holders.length <= holdersMax && lock.waiters.length <= this.limits.waitersPerLockMax, `${lockName} within per-lock limits`);
        if (lock.holders.length > 1) assert(lock.holders.every((h) => h.mode === 'SHARED'), `${lockName}: an exclusive holder is alone`);
        for (const h of lock.holders) assert(ns.sessions.get(h.sessionId)?.held.get(lockName) === lock, `holder ${h.sessionId} of ${lockName} knows it`);
        for (const w of lock.waiters) assert(ns.sessions.get(w.sessionId)?.waiting.get(lockName) === lock, `waiter ${w.sessionId} of ${lockName} knows it`);
        const head = lock.waiters[0];
        if (head !== undefined && lock.delayRevision === 0) assert(!canHold(lock.holders, head.mode, holdersMax), `${lockName}: head waiter is blocked`);
      }
    }
    assert(sessions === this.sessionCount && sessions <= this.limits.sessionsMax, 'session count matches');
    assert(this.sessionsById.size === sessions, 'every live session is indexed by id');
    for (const [id, s] of this.sessionsById) assert(s.ns.sessions.get(id) === s && this.namespaceRecords.get(s.ns.name) === s.ns, 'the id index points at live sessions');
    assert(this.namespaceRecords.size <= this.limits.namespacesMax, 'within namespacesMax');
  }
}

function namespaceInfoOf(ns: NamespaceRecord): NamespaceInfo {
  return { namespace: ns.name, state: ns.state, lastRevision: ns.lastRevision as Revision, sessions: ns.sessions.size, locks: ns.locks.size };
}

function sessionInfoOf(s: SessionRecord): SessionInfo {
  return {
    sessionId: s.id,
    clientId: s.clientId,
    namespace: s.ns.name,
    ttlMs: s.ttlMs,
    openedRevision: s.openedRevision,
    heldCount: s.held.size,
    waitingCount: s.waiting.size,
  };
}

/**
 * Checks that `data` is an export this cell's limits accept, for the server
 * or control plane to run before proposing an ImportNamespace.
 */
export function validateNamespaceExport(data: Uint8Array, limits: Partial<FsmLimits> = {}): { namespace: Namespace; highestRevision: Revision } | Failure {
  try {
    const decoded = decodeExport(data, { ...LIMITS, ...limits });
    return { namespace: decoded.namespace, highestRevision: decoded.highestRevision as Revision };
  } catch (e) {
    if (e instanceof DecodeError) return fail('INVALID_ARGUMENT', `namespace export is malformed: ${e.message}`);
    throw e;
  }
}
