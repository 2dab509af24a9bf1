/**
 * The lock state machine: the deterministic function every replica of a
 * cell applies, entry by entry (docs/architecture.md, "Promises", are its
 * semantics).
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
  unreachable,
  type Namespace,
  type RequestId,
  type Revision,
  type SessionId,
} from '@fencer/base';
import { LIST_LOCKS_LIMIT_DEFAULT, LIST_LOCKS_LIMIT_MAX, namespaceOfSessionId, parseLockName, parseLockPrefix } from '@fencer/contract';
import { DecodeError, decodeOrCrash } from './codec.js';
import {
  decodeCommand,
  type AcquireCommand,
  type CancelWaitCommand,
  type Command,
  type CommandKind,
  type FencedCommand,
  type ImportStagedNamespaceCommand,
  type LiftLockDelayCommand,
  type StageImportChunkCommand,
  type OpenSessionCommand,
  type ReleaseCommand,
  type SetMemberAddressCommand,
  type SetNamespaceQuotasCommand,
  type SetNamespaceCredentialsCommand,
} from './commands.js';
import { checkLimits, LIMITS, MEMBERS_MAX, type FsmLimits } from './limits.js';
import {
  addSessionLock,
  removeSessionLock,
  canHold,
  EMPTY,
  holderIndex,
  newNamespaceRecord,
  newSessionRecord,
  sessionLocksSorted,
  sortedKeys,
  waiterIndexOf,
  type LockRecord,
  type NamespaceRecord,
  type SessionRecord,
} from './records.js';
import { checkCredentials, normalCredentials, sameCredentials, type NamespaceCredentials } from './credentials.js';
import { checkQuotas, lockQuotaRefusal, normalQuotas, sameQuotas, sessionQuotaRefusal, waiterQuotaRefusal } from './quotas.js';
import { decodeExport, decodeSnapshot, encodeExport, encodeSnapshot, fencesMax, stagedBytes, type StagedImport } from './state-codec.js';
import { checkMoveFence, MoveFences, type MoveFence } from './move-fence.js';
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
  MemberAddress,
  MemberChangeOutcome,
  NamespaceChangeOutcome,
  NamespaceInfo,
  NamespaceState,
  NoopOutcome,
  OpenSessionOutcome,
  ReleaseOutcome,
  SessionInfo,
  StageImportOutcome,
  Waiter,
  WaiterInfo,
} from './types.js';
import {
  checkClientId,
  checkLockDelayMs,
  checkMode,
  checkNameIn,
  checkNamespaceName,
  checkRequestId,
  checkSessionId,
  checkToken,
  checkTtlMs,
  checkWaitMs,
  checkHostPort,
  checkMemberId,
  fail,
  isFailure,
} from './validate.js';
import { fnv1a64 } from './hash.js';
import { dedupeHash, reasonCode, REASON_BUSY, REASON_NONE, STATUS_GRANTED, STATUS_QUEUED, STATUS_TIMED_OUT } from './dedupe.js';

export interface LockStateMachineOptions {
  /**
   * A cell without a control plane owns every namespace and claims one on
   * its first OpenSession (docs/decisions/0005-cells-own-namespaces.md).
   * Otherwise a namespace must be claimed (ClaimNamespace) or imported
   * first. Cell configuration: every replica of a cell must use the same
   * value.
   */
  readonly autoClaim: boolean;
  /** Revision base of a new cell (default 0). Restored state carries its own. */
  readonly revisionBase?: number;
  /** Overrides of LIMITS; the same on every replica of a cell. */
  readonly limits?: Partial<FsmLimits>;
  /**
   * Test-only planted bug (the simulator's and chaos's negative control):
   * ImportNamespace keeps the cell's revision base instead of raising it
   * above the export's revisions. Unset in production.
   */
  readonly plantedBug?: 'importWithoutRevisionRaise';
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
  SetMemberAddress: MemberChangeOutcome | Failure;
  ForgetMember: MemberChangeOutcome | Failure;
  StageImportChunk: StageImportOutcome | Failure;
  ImportStagedNamespace: ImportNamespaceOutcome | Failure;
  SetNamespaceQuotas: NamespaceChangeOutcome | Failure;
  SetNamespaceCredentials: NamespaceChangeOutcome | Failure;
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
// Outcomes that carry nothing but a flag are shared constants: no allocation on the hot path.
const RELEASED: ReleaseOutcome = Object.freeze({ ok: true, released: true });
const NOT_RELEASED: ReleaseOutcome = Object.freeze({ ok: true, released: false });
const CANCELLED: CancelWaitOutcome = Object.freeze({ ok: true, cancelled: true });
const NOT_CANCELLED: CancelWaitOutcome = Object.freeze({ ok: true, cancelled: false });
/** Placeholder until an entry's events get their lock states. */
const PENDING_STATE: LockState = Object.freeze({ name: '', mode: null, holders: EMPTY, waiters: EMPTY, delayed: false });

function freeState(name: string): LockState {
  return { name, mode: null, holders: EMPTY, waiters: EMPTY, delayed: false };
}

function stateOf(lock: LockRecord): LockState {
  const holders = lock.holders;
  return {
    name: lock.name,
    // No index past the end: EMPTY is a frozen array, and a load past its end
    // sends V8's optimized code through the generic keyed-load stub from then on.
    mode: holders.length === 0 ? null : (holders[0] as Holder).mode,
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

/** The waiter index of a session known to wait for `lock`. */
function waiterIndex(lock: LockRecord, sessionId: SessionId): number {
  const at = waiterIndexOf(lock, sessionId);
  if (at < 0) throw new AssertionError(`session ${sessionId} is recorded as waiter of ${lock.name} but is not in its queue`);
  return at;
}

/** A copy of `items` with `item` at the end, allocated at its final length. */
function appended<T>(items: readonly T[], item: T): readonly T[] {
  const n = items.length;
  const out = new Array<T>(n + 1);
  for (let i = 0; i < n; i++) out[i] = items[i] as T;
  out[n] = item;
  return out;
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
  /** The cell's member directory (SetMemberAddress / ForgetMember), by member id. */
  private readonly memberDirectory = new Map<string, MemberAddress>();
  /** Exports arriving in pieces, by namespace; their totals together within importBytesMax. */
  private readonly staging = new Map<string, StagedImport>();
  /** The highest move fence each namespace's move steps carried here (move-fence.ts). */
  private readonly fences: MoveFences;
  private appliedIndexValue = 0;
  private revisionBaseValue: number;
  private readonly plantedBug: LockStateMachineOptions['plantedBug'];
  /** Revision of the entry being applied (index + base). */
  private rev = 0;
  /**
   * Events of the entry being applied and the lock of each: the first
   * `pendingCount` slots. Both arrays are reused from entry to entry and
   * never shrink (setting an array's length to 0 frees its backing store,
   * and the next push would allocate a new one).
   */
  private readonly pendingEvents: PendingEvent[] = [];
  private readonly pendingLocks: LockRecord[] = [];
  private pendingCount = 0;

  constructor(options: LockStateMachineOptions) {
    this.autoClaim = options.autoClaim;
    this.plantedBug = options.plantedBug;
    this.limits = { ...LIMITS, ...options.limits };
    checkLimits(this.limits);
    this.fences = new MoveFences(fencesMax(this.limits));
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
    for (const [id, m] of decoded.members) fsm.memberDirectory.set(id, m);
    for (const [name, st] of decoded.staged) fsm.staging.set(name, st);
    fsm.fences.load(decoded.fences);
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
    assert(this.pendingCount === 0, 'no events left over from the previous entry');
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
        return this.passFence(command) ?? this.setFrozen(command.namespace, true);
      case 'UnfreezeNamespace':
        return this.passFence(command) ?? this.setFrozen(command.namespace, false);
      case 'ExportNamespace':
        return this.exportNamespace(command.namespace);
      case 'ImportNamespace':
        return this.passFence(command) ?? this.importNamespace(command.namespace, command.data, command.activate);
      case 'StageImportChunk':
        return this.passFence(command) ?? this.stageImportChunk(command);
      case 'ImportStagedNamespace':
        return this.passFence(command) ?? this.importStaged(command);
      case 'DropNamespace':
        return this.passFence(command) ?? this.dropNamespace(command.namespace);
      case 'SetMemberAddress':
        return this.setMemberAddress(command);
      case 'ForgetMember':
        return this.forgetMember(command.id);
      case 'SetNamespaceQuotas':
        return this.setQuotas(command);
      case 'SetNamespaceCredentials':
        return this.setCredentials(command);
      default:
        return unreachable(command, 'command kind');
    }
  }

  private emit(type: LockEventType, lock: LockRecord, sessionId: SessionId, token: number, requestId: RequestId | null): void {
    const event: PendingEvent = {
      type,
      revision: this.rev as Revision,
      name: lock.name,
      sessionId,
      token: token as Revision,
      requestId,
      lock: PENDING_STATE,
    };
    const at = this.pendingCount++;
    if (at < this.pendingEvents.length) {
      this.pendingEvents[at] = event;
      this.pendingLocks[at] = lock;
    } else {
      this.pendingEvents.push(event);
      this.pendingLocks.push(lock);
    }
  }

  /** Gives each event of this entry its lock's state after the whole entry. */
  private takeEvents(): readonly LockEvent[] {
    const count = this.pendingCount;
    if (count === 0) return NO_EVENTS;
    this.pendingCount = 0;
    const pending = this.pendingEvents;
    const locks = this.pendingLocks;
    // Exact size: most entries have one event, and an array grown by push would reserve 17 slots.
    const events = new Array<PendingEvent>(count);
    let lastLock: LockRecord | undefined;
    let lastState = PENDING_STATE;
    for (let i = 0; i < count; i++) {
      const event = pending[i] as PendingEvent;
      const lock = locks[i] as LockRecord;
      if (lock !== lastLock) {
        lastLock = lock;
        lastState = stateOf(lock);
      }
      event.lock = lastState;
      events[i] = event;
    }
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
    const bad =
      checkNamespaceName(c.namespace) ?? checkSessionId(c.sessionId, c.namespace) ?? checkClientId(c.clientId) ?? checkTtlMs(c.ttlMs);
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
    if (this.sessionCount >= this.limits.sessionsMax)
      return fail('QUOTA_EXCEEDED', `this cell holds its maximum of ${this.limits.sessionsMax} sessions`);
    let claimed = false;
    if (ns === undefined) {
      if (this.namespaceRecords.size >= this.limits.namespacesMax)
        return fail('QUOTA_EXCEEDED', `this cell holds its maximum of ${this.limits.namespacesMax} namespaces`);
      ns = newNamespaceRecord(c.namespace, 'active', this.rev);
      this.namespaceRecords.set(c.namespace, ns);
      claimed = true;
    }
    if (ns.sessions.size >= this.limits.sessionsPerNamespaceMax) {
      return fail('QUOTA_EXCEEDED', `namespace "${c.namespace}" holds its maximum of ${this.limits.sessionsPerNamespaceMax} sessions`);
    }
    const overQuota = sessionQuotaRefusal(ns.name, ns.quotas, ns.sessions.size);
    if (overQuota !== undefined) return overQuota;
    const s = newSessionRecord(c.sessionId, ns, c.clientId, c.ttlMs, this.rev as Revision, this.limits.dedupePerSessionMax);
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
    const locks = sessionLocksSorted(s);
    const released: string[] = [];
    const delayed: DelayedLock[] = [];
    for (const lock of locks) {
      const name = lock.name;
      const heldAt = holderIndex(lock, s.id);
      if (heldAt >= 0) {
        const h = lock.holders[heldAt] as Holder;
        lock.holders = without(lock.holders, heldAt);
        s.heldCount--;
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
        s.waitingCount--;
        ns.waiterCount--;
        this.emit('EXPIRED', lock, s.id, 0, w.requestId);
      }
      this.promote(ns, lock);
      this.dropIfFree(ns, lock);
    }
    assert(s.heldCount === 0 && s.waitingCount === 0, 'an ended session holds and awaits nothing');
    ns.sessions.delete(s.id);
    this.sessionsById.delete(s.id);
    this.sessionCount--;
    ns.lastRevision = this.rev;
    return expire ? { ok: true, released, delayed } : { ok: true, released };
  }

  // ---------------------------------------------------------------- locks

  /** Records the outcome of a new request id; the session's oldest goes once it has dedupePerSessionMax of them. */
  private remember(
    s: SessionRecord,
    requestId: string,
    h: number,
    status: number,
    name: string,
    token: number,
    revision: number,
    reason: number,
  ): void {
    const before = s.dedupe.size;
    s.dedupe.add(requestId, h, status, name, token, revision, reason);
    assert(s.dedupe.size === Math.min(before + 1, this.limits.dedupePerSessionMax), 'a request id is remembered once');
  }

  /** The same outcome again for a retried request id (docs/architecture.md, "Promises"). */
  private replay(s: SessionRecord, requestId: string, slot: number): AcquireOutcome {
    const d = s.dedupe;
    const revision = d.revisionAt(slot);
    switch (d.statusCodeAt(slot)) {
      case STATUS_GRANTED:
        return {
          ok: true,
          status: 'GRANTED',
          token: d.tokenAt(slot),
          holders: s.ns.locks.get(d.nameAt(slot))?.holders ?? EMPTY,
          revision,
          deduped: true,
        };
      case STATUS_QUEUED: {
        const lock = s.ns.locks.get(d.nameAt(slot));
        assert(lock !== undefined, 'a QUEUED request has its waiter');
        const at = waiterIndex(lock, s.id);
        assert((lock.waiters[at] as Waiter).requestId === requestId, 'the waiter of a QUEUED record is that request');
        return { ok: true, status: 'QUEUED', position: at, revision, deduped: true };
      }
      case STATUS_TIMED_OUT: {
        const reason = d.reasonAt(slot);
        assert(reason !== null, 'a TIMED_OUT record has a reason');
        return { ok: true, status: 'TIMED_OUT', reason, revision, deduped: true };
      }
      default:
        throw new AssertionError(`unknown dedupe status ${d.statusCodeAt(slot)}`);
    }
  }

  private acquire(c: AcquireCommand): AcquireOutcome | Failure {
    const s = this.lookupSession(c.sessionId);
    if (isFailure(s)) return s;
    const ns = s.ns;
    // Retries first: a retry is answered even while the namespace is frozen.
    // A request id that is not a string is answered by checkRequestId below.
    const requestHash = typeof c.requestId === 'string' ? dedupeHash(c.requestId) : 0;
    const prior = typeof c.requestId === 'string' ? s.dedupe.find(c.requestId, requestHash) : -1;
    if (prior >= 0) return this.replay(s, c.requestId, prior);
    // The session can hold or await only a live lock: skip those lookups for a new name.
    const lock = ns.locks.get(c.name);
    const waitingAt = lock !== undefined && s.waitingCount > 0 ? waiterIndexOf(lock, s.id) : -1;
    let waiter: Waiter | undefined;
    if (waitingAt >= 0) {
      waiter = (lock as LockRecord).waiters[waitingAt] as Waiter;
      // Its dedupe record was pushed out by newer requests, but it still waits.
      if (waiter.requestId === c.requestId)
        return { ok: true, status: 'QUEUED', position: waitingAt, revision: waiter.queuedRevision, deduped: true };
    }
    if (ns.state === 'frozen') return moving(ns.name);
    // A live lock's name was validated when the lock was created.
    const bad =
      checkRequestId(c.requestId) ??
      (lock === undefined ? checkNameIn(c.name, ns.name) : undefined) ??
      checkMode(c.mode) ??
      checkWaitMs(c.waitMs) ??
      checkLockDelayMs(c.lockDelayMs);
    if (bad !== undefined) return bad;
    if (waiter !== undefined) {
      return fail(
        'INVALID_ARGUMENT',
        `session already waits for ${c.name} with request ${waiter.requestId}; retry that request id or cancel it`,
      );
    }
    return this.acquireNew(s, c, requestHash, lock);
  }

  /**
   * A new request of a session that does not wait for the lock: the grant it
   * already holds, a grant, TIMED_OUT for a busy try-lock, or a place in the
   * queue. Every answer is remembered under its request id.
   */
  private acquireNew(s: SessionRecord, c: AcquireCommand, requestHash: number, lock: LockRecord | undefined): AcquireOutcome | Failure {
    const ns = s.ns;
    const heldAt = lock !== undefined && s.heldCount > 0 ? holderIndex(lock, s.id) : -1;
    if (heldAt >= 0) {
      // Re-acquiring what the session holds answers the grant it has.
      const heldLock = lock as LockRecord;
      const h = heldLock.holders[heldAt] as Holder;
      if (h.mode !== c.mode) return fail('INVALID_MODE', `session already holds ${c.name} in ${h.mode} mode; release it first`);
      this.remember(s, c.requestId, requestHash, STATUS_GRANTED, heldLock.name, h.token, h.token, REASON_NONE);
      ns.lastRevision = this.rev;
      return { ok: true, status: 'GRANTED', token: h.token, holders: heldLock.holders, revision: h.token, deduped: false };
    }
    const grantable =
      lock === undefined ||
      (lock.delayRevision === 0 && lock.waiters.length === 0 && canHold(lock.holders, c.mode, this.limits.holdersPerLockMax));
    const rev = this.rev as Revision;
    if (!grantable && c.tryLock) {
      this.remember(s, c.requestId, requestHash, STATUS_TIMED_OUT, lock === undefined ? c.name : lock.name, 0, rev, REASON_BUSY);
      ns.lastRevision = rev;
      return { ok: true, status: 'TIMED_OUT', reason: 'busy', revision: rev, deduped: false };
    }
    if (s.heldCount + s.waitingCount >= this.limits.locksPerSessionMax) {
      return fail('QUOTA_EXCEEDED', `session holds or awaits its maximum of ${this.limits.locksPerSessionMax} locks`);
    }
    // Only a new name adds a lock to the namespace; a busy one adds a waiter (enqueue checks that quota).
    const overQuota = lock === undefined ? lockQuotaRefusal(ns.name, ns.quotas, ns.locks.size) : undefined;
    if (overQuota !== undefined) return overQuota;
    if (grantable) return this.grantNew(s, c, requestHash, lock);
    assert(lock !== undefined, 'only an existing lock can be busy');
    return this.enqueue(s, c, requestHash, lock);
  }

  private grantNew(s: SessionRecord, c: AcquireCommand, requestHash: number, existing: LockRecord | undefined): AcquireOutcome {
    const ns = s.ns;
    const rev = this.rev as Revision;
    let lock = existing;
    if (lock === undefined) {
      lock = { name: c.name, holders: EMPTY, waiters: EMPTY, delayRevision: 0, delayMs: 0 };
      ns.locks.set(c.name, lock);
    }
    const holder: Holder = { sessionId: s.id, clientId: s.clientId, mode: c.mode, token: rev, lockDelayMs: c.lockDelayMs };
    lock.holders = lock.holders.length === 0 ? [holder] : appended(lock.holders, holder);
    s.heldCount++;
    addSessionLock(s, lock);
    this.remember(s, c.requestId, requestHash, STATUS_GRANTED, lock.name, rev, rev, REASON_NONE);
    this.emit('ACQUIRED', lock, s.id, rev, c.requestId);
    ns.lastRevision = rev;
    return { ok: true, status: 'GRANTED', token: rev, holders: lock.holders, revision: rev, deduped: false };
  }

  /** Joins the FIFO queue of a busy lock: no later request is granted before it (docs/architecture.md, "Promises"). */
  private enqueue(s: SessionRecord, c: AcquireCommand, requestHash: number, lock: LockRecord): AcquireOutcome | Failure {
    if (lock.waiters.length >= this.limits.waitersPerLockMax) {
      return fail('QUOTA_EXCEEDED', `lock ${c.name} has its maximum of ${this.limits.waitersPerLockMax} waiters`);
    }
    const overQuota = waiterQuotaRefusal(s.ns.name, s.ns.quotas, s.ns.waiterCount);
    if (overQuota !== undefined) return overQuota;
    const rev = this.rev as Revision;
    const w: Waiter = {
      sessionId: s.id,
      clientId: s.clientId,
      mode: c.mode,
      requestId: c.requestId,
      waitMs: c.waitMs,
      lockDelayMs: c.lockDelayMs,
      queuedRevision: rev,
    };
    lock.waiters = lock.waiters.length === 0 ? [w] : appended(lock.waiters, w);
    s.waitingCount++;
    s.ns.waiterCount++;
    addSessionLock(s, lock);
    this.remember(s, c.requestId, requestHash, STATUS_QUEUED, lock.name, 0, rev, REASON_NONE);
    this.emit('QUEUED', lock, s.id, 0, c.requestId);
    s.ns.lastRevision = rev;
    return { ok: true, status: 'QUEUED', position: lock.waiters.length - 1, revision: rev, deduped: false };
  }

  /**
   * Grants from the head of the queue while it can (docs/architecture.md, "Promises"):
   * consecutive shared waiters together, stopping at the first it cannot
   * grant. Tokens are this entry's revision.
   */
  private promote(ns: NamespaceRecord, lock: LockRecord): void {
    if (lock.delayRevision !== 0) return;
    const waiters = lock.waiters;
    if (waiters.length === 0) return;
    const holdersMax = this.limits.holdersPerLockMax;
    let count = lock.holders.length;
    let mode: LockMode | undefined = count === 0 ? undefined : (lock.holders[0] as Holder).mode;
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
    ns.waiterCount -= k;
    for (let i = 0; i < k; i++) {
      const w = waiters[i] as Waiter;
      const s = ns.sessions.get(w.sessionId);
      assert(s !== undefined && s.waitingCount > 0, 'a waiter is a live session waiting for a lock');
      // Its entry in s.lockList stays: that list covers holding and waiting alike.
      s.waitingCount--;
      s.heldCount++;
      holders.push({ sessionId: w.sessionId, clientId: w.clientId, mode: w.mode, token: rev, lockDelayMs: w.lockDelayMs });
      // The request's record, unless newer requests pushed it out (then the
      // id may even have been reused for another name: leave that one alone).
      const d = s.dedupe.find(w.requestId, dedupeHash(w.requestId));
      if (d >= 0 && s.dedupe.nameAt(d) === lock.name) {
        assert(s.dedupe.statusCodeAt(d) === STATUS_QUEUED, 'a waiter’s dedupe record is QUEUED');
        s.dedupe.settle(d, STATUS_GRANTED, rev, rev, REASON_NONE);
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
    // A live lock's name was validated when the lock was created.
    const lock = ns.locks.get(c.name);
    const bad = (lock === undefined ? checkNameIn(c.name, ns.name) : undefined) ?? checkToken(c.token);
    if (bad !== undefined) return bad;
    const at = lock !== undefined && s.heldCount > 0 ? holderIndex(lock, s.id) : -1;
    if (at < 0) return NOT_RELEASED;
    const held = lock as LockRecord;
    const h = held.holders[at] as Holder;
    // A stale token is a no-op: a paused client cannot release a later grant.
    if (h.token !== c.token) return NOT_RELEASED;
    held.holders = without(held.holders, at);
    s.heldCount--;
    removeSessionLock(s, held);
    this.emit('RELEASED', held, s.id, h.token, null);
    this.promote(ns, held);
    this.dropIfFree(ns, held);
    ns.lastRevision = this.rev;
    return RELEASED;
  }

  private cancelWait(c: CancelWaitCommand): CancelWaitOutcome | Failure {
    const s = this.lookupSession(c.sessionId);
    if (isFailure(s)) return s;
    const ns = s.ns;
    if (ns.state === 'frozen') return moving(ns.name);
    const found = ns.locks.get(c.name);
    const bad = checkRequestId(c.requestId) ?? (found === undefined ? checkNameIn(c.name, ns.name) : undefined);
    if (bad !== undefined) return bad;
    assert(c.reason === 'timed-out' || c.reason === 'cancelled', 'cancel reason is known');
    const at = found !== undefined && s.waitingCount > 0 ? waiterIndexOf(found, s.id) : -1;
    if (at < 0) return NOT_CANCELLED;
    const lock = found as LockRecord;
    const w = lock.waiters[at] as Waiter;
    if (w.requestId !== c.requestId) return NOT_CANCELLED;
    lock.waiters = without(lock.waiters, at);
    s.waitingCount--;
    ns.waiterCount--;
    removeSessionLock(s, lock);
    const d = s.dedupe.find(c.requestId, dedupeHash(c.requestId));
    if (d >= 0 && s.dedupe.nameAt(d) === lock.name) {
      assert(s.dedupe.statusCodeAt(d) === STATUS_QUEUED, 'a waiter’s dedupe record is QUEUED');
      s.dedupe.settle(d, STATUS_TIMED_OUT, s.dedupe.tokenAt(d), this.rev, reasonCode(c.reason));
    }
    this.emit('CANCELED', lock, s.id, 0, w.requestId);
    this.promote(ns, lock);
    this.dropIfFree(ns, lock);
    ns.lastRevision = this.rev;
    return CANCELLED;
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

  /**
   * A move step's fence: undefined when the step may act (an unfenced one
   * always may), and its fence is now the namespace's; otherwise the refusal,
   * and nothing changed. Recorded before the step runs, so a step that then
   * fails on its own terms (a namespace not held here) still fences out every
   * older leader's steps.
   */
  private passFence(command: FencedCommand): Failure | undefined {
    const fence = command.fence;
    if (fence === undefined) return undefined;
    const refused = checkNamespaceName(command.namespace) ?? checkMoveFence(fence) ?? this.fences.refusal(command.namespace, fence);
    if (refused !== undefined) return refused;
    this.fences.record(command.namespace, fence);
    return undefined;
  }

  /** The highest move fence the namespace's move steps carried here, if any. */
  moveFence(namespace: string): MoveFence | undefined {
    return this.fences.get(namespace);
  }

  /** Why a step carrying `fence` may not act on `namespace` now (a read's check: it records nothing). */
  moveFenceRefusal(namespace: string, fence: MoveFence): Failure | undefined {
    return checkMoveFence(fence) ?? this.fences.refusal(namespace, fence);
  }

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

  /**
   * A frozen namespace refuses new quotas: its export may already be on its
   * way, and a change after it would be lost in the move. The control plane's
   * reconciler sends them again to wherever the namespace lands.
   */
  private setQuotas(c: SetNamespaceQuotasCommand): NamespaceChangeOutcome | Failure {
    const bad = checkQuotas(c.quotas);
    if (bad !== undefined) return bad;
    const ns = this.ownedNamespace(c.namespace);
    if (isFailure(ns)) return ns;
    if (ns.state === 'frozen') return moving(ns.name);
    if (sameQuotas(ns.quotas, c.quotas)) return { ok: true, changed: false };
    ns.quotas = normalQuotas(c.quotas);
    ns.lastRevision = this.rev;
    return { ok: true, changed: true };
  }

  /**
   * Replaces the namespace's token hashes. Only stored: their expiries are
   * compared with a clock by the cell when it checks a call, never here.
   * Frozen refuses, as for quotas: a change after the export left would be
   * lost in the move; the reconciler sends them to where the namespace lands.
   */
  private setCredentials(c: SetNamespaceCredentialsCommand): NamespaceChangeOutcome | Failure {
    const bad = checkCredentials(c.credentials);
    if (bad !== undefined) return bad;
    const ns = this.ownedNamespace(c.namespace);
    if (isFailure(ns)) return ns;
    if (ns.state === 'frozen') return moving(ns.name);
    if (sameCredentials(ns.credentials, c.credentials)) return { ok: true, changed: false };
    ns.credentials = normalCredentials(c.credentials);
    ns.lastRevision = this.rev;
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
    const data = encodeExport(ns, this.rev, this.fences.get(namespace));
    return {
      ok: true,
      data,
      highestRevision: this.rev as Revision,
      namespaceRevision: ns.lastRevision as Revision,
      sessions: ns.sessions.size,
      locks: ns.locks.size,
    };
  }

  /**
   * The export of a frozen namespace as of the state applied here, without
   * an entry: a frozen namespace changes no more, so any replica that has
   * applied its freeze gives the same bytes but for highestRevision (this
   * replica's revision now, which every revision the namespace saw is at or
   * below). The caller runs it behind a read barrier. With a fence, a
   * deposed move worker's read is refused like its steps.
   */
  readExport(namespace: Namespace, fence?: MoveFence): ExportNamespaceOutcome | Failure {
    const refused = fence === undefined ? undefined : this.moveFenceRefusal(namespace, fence);
    return refused ?? this.exportNamespace(namespace);
  }

  /** What an export of the namespace would weigh now, in bytes (it encodes one); undefined when not owned here. */
  exportBytes(namespace: Namespace): number | undefined {
    const ns = this.ownedNamespace(namespace);
    return isFailure(ns) ? undefined : encodeExport(ns, this.rev, this.fences.get(namespace)).length;
  }

  /** Why an import of `namespace` cannot start here, if it cannot. */
  private importRefusal(namespace: Namespace): Failure | undefined {
    const bad = checkNamespaceName(namespace);
    if (bad !== undefined) return bad;
    const existing = this.namespaceRecords.get(namespace);
    if (existing !== undefined && existing.state !== 'moved') {
      return fail('INVALID_ARGUMENT', `namespace "${namespace}" is already owned by this cell; drop it before importing`);
    }
    if (existing === undefined && this.namespaceRecords.size >= this.limits.namespacesMax) {
      return fail('QUOTA_EXCEEDED', `this cell holds its maximum of ${this.limits.namespacesMax} namespaces`);
    }
    return undefined;
  }

  private stageImportChunk(c: StageImportChunkCommand): StageImportOutcome | Failure {
    const refused = this.importRefusal(c.namespace);
    if (refused !== undefined) return refused;
    const { totalBytes, offset, data } = c;
    if (!(Number.isSafeInteger(totalBytes) && totalBytes > 0 && offset + data.length <= totalBytes && data.length > 0)) {
      return fail('INVALID_ARGUMENT', `a chunk of ${data.length} bytes at offset ${offset} does not fit an export of ${totalBytes} bytes`);
    }
    let staged = this.staging.get(c.namespace);
    if (offset === 0) {
      this.staging.delete(c.namespace);
      let held = 0;
      for (const st of this.staging.values()) held += st.totalBytes;
      if (held + totalBytes > this.limits.importBytesMax) {
        return fail(
          'QUOTA_EXCEEDED',
          `an export of ${totalBytes} bytes does not fit the ${this.limits.importBytesMax - held} bytes this cell can stage now`,
        );
      }
      staged = { totalBytes, chunks: [], received: 0 };
      this.staging.set(c.namespace, staged);
    }
    if (staged === undefined || staged.totalBytes !== totalBytes || offset > staged.received) {
      return fail(
        'INVALID_ARGUMENT',
        `a chunk at offset ${offset} does not follow the ${staged?.received ?? 0} bytes staged for "${c.namespace}"; start again at offset 0`,
      );
    }
    // A chunk at an offset already staged is a retry of one that landed: nothing changes.
    if (offset + data.length > staged.received) {
      const fresh = offset === staged.received ? data : data.subarray(staged.received - offset);
      staged.chunks.push(fresh);
      staged.received += fresh.length;
    }
    return { ok: true, stagedBytes: staged.received };
  }

  private importStaged(c: ImportStagedNamespaceCommand): ImportNamespaceOutcome | Failure {
    const staged = this.staging.get(c.namespace);
    if (staged === undefined || staged.totalBytes !== c.totalBytes || staged.received !== staged.totalBytes) {
      return fail(
        'INVALID_ARGUMENT',
        `no complete export of ${c.totalBytes} bytes is staged for "${c.namespace}" (${staged?.received ?? 0} of ${staged?.totalBytes ?? 0}); stage it again`,
      );
    }
    this.staging.delete(c.namespace);
    return this.importNamespace(c.namespace, stagedBytes(staged), c.activate);
  }

  private importNamespace(namespace: Namespace, data: Uint8Array, activate: boolean): ImportNamespaceOutcome | Failure {
    const refused = this.importRefusal(namespace);
    if (refused !== undefined) return refused;
    let decoded;
    try {
      decoded = decodeExport(data, this.limits);
    } catch (e) {
      if (e instanceof DecodeError) return fail('INVALID_ARGUMENT', `namespace export is malformed: ${e.message}`);
      throw e;
    }
    if (decoded.namespace !== namespace)
      return fail('INVALID_ARGUMENT', `export is of namespace "${decoded.namespace}", not "${namespace}"`);
    if (this.sessionCount + decoded.sessionCount > this.limits.sessionsMax) {
      return fail('QUOTA_EXCEEDED', `importing ${decoded.sessionCount} sessions would exceed this cell's ${this.limits.sessionsMax}`);
    }
    // Raise the base so this entry's revision, and every later one, exceeds
    // every revision the namespace saw in its old cell
    // (docs/decisions/0003-revisions-are-log-index-plus-base.md).
    const index = this.appliedIndexValue;
    const raise = this.plantedBug !== 'importWithoutRevisionRaise';
    const base = raise ? Math.max(this.revisionBaseValue, decoded.highestRevision - index + 1) : this.revisionBaseValue;
    this.revisionBaseValue = base;
    this.rev = index + base;
    assert(
      (this.rev > decoded.highestRevision || !raise) && Number.isSafeInteger(this.rev),
      'imported namespace continues above its exported revisions',
    );
    const record = decoded.record;
    record.state = activate ? 'active' : 'frozen';
    record.lastRevision = this.rev;
    this.namespaceRecords.set(namespace, record);
    for (const [id, s] of record.sessions) this.sessionsById.set(id, s);
    this.sessionCount += decoded.sessionCount;
    // The namespace keeps the highest fence it has seen anywhere: its source's comes with the export.
    if (decoded.fence !== undefined) this.fences.raiseTo(namespace, decoded.fence);
    return {
      ok: true,
      revisionBase: base,
      sessions: decoded.sessionCount,
      locks: record.locks.size,
      highestRevision: decoded.highestRevision as Revision,
      namespaceRevision: decoded.namespaceRevision as Revision,
    };
  }

  private dropNamespace(namespace: Namespace): DropNamespaceOutcome | Failure {
    // An abandoned import's staged pieces go too, whether or not the namespace is owned here (a move rolling back).
    this.staging.delete(namespace);
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

  /** A namespace's state alone, without building its info: for per-heartbeat checks. */
  namespaceState(namespace: string): NamespaceState | undefined {
    return this.namespaceRecords.get(namespace)?.state;
  }

  /**
   * The token hashes of a namespace this cell holds (active or frozen), for
   * the cell's per-call check; undefined for one moved out or never here.
   */
  namespaceCredentials(namespace: string): NamespaceCredentials | undefined {
    const ns = this.namespaceRecords.get(namespace);
    return ns === undefined || ns.state === 'moved' ? undefined : ns.credentials;
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

  /** Every live session: a new leader gives each a fresh TTL (docs/architecture.md, "Promises"). */
  *sessions(): IterableIterator<SessionInfo> {
    for (const ns of this.namespaceRecords.values()) for (const s of ns.sessions.values()) yield sessionInfoOf(s);
  }

  /** Names a session holds and waits for, sorted; undefined for an unknown session. */
  locksOf(sessionId: string): { held: string[]; waiting: string[] } | undefined {
    const s = this.lookupSession(sessionId);
    if (isFailure(s)) return undefined;
    const held: string[] = [];
    const waiting: string[] = [];
    for (const lock of sessionLocksSorted(s)) (holderIndex(lock, s.id) >= 0 ? held : waiting).push(lock.name);
    return { held, waiting };
  }

  /** Every waiter, for a new leader's wait-deadline tracker. */
  *waiters(): IterableIterator<WaiterInfo> {
    for (const ns of this.namespaceRecords.values()) {
      for (const lock of ns.locks.values()) {
        for (const w of lock.waiters)
          yield { sessionId: w.sessionId, name: lock.name, requestId: w.requestId, waitMs: w.waitMs, queuedRevision: w.queuedRevision };
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
    return encodeSnapshot(
      this.appliedIndexValue,
      this.revisionBaseValue,
      this.namespaceRecords,
      this.memberDirectory,
      this.staging,
      this.fences.entries(),
    );
  }

  // ---------------------------------------------------------------- members

  /** The member directory: where each member added through SetMemberAddress listens. */
  members(): ReadonlyMap<string, MemberAddress> {
    return this.memberDirectory;
  }

  private setMemberAddress(c: SetMemberAddressCommand): MemberChangeOutcome | Failure {
    const bad = checkMemberId(c.id) ?? checkHostPort(c.address, 'address') ?? checkHostPort(c.peerAddress, 'peer address');
    if (bad) return bad;
    const known = this.memberDirectory.get(c.id);
    if (known !== undefined && known.address === c.address && known.peerAddress === c.peerAddress) return { ok: true, changed: false };
    if (known === undefined && this.memberDirectory.size >= MEMBERS_MAX)
      return fail('QUOTA_EXCEEDED', `the member directory holds ${MEMBERS_MAX} members; forget removed ones first`);
    this.memberDirectory.set(c.id, { address: c.address, peerAddress: c.peerAddress });
    return { ok: true, changed: true };
  }

  private forgetMember(id: string): MemberChangeOutcome | Failure {
    const bad = checkMemberId(id);
    if (bad) return bad;
    return { ok: true, changed: this.memberDirectory.delete(id) };
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
        assert(s.heldCount >= 0 && s.waitingCount >= 0, `session ${id}: counts are non-negative`);
        assert(s.heldCount + s.waitingCount <= this.limits.locksPerSessionMax, `session ${id} within locksPerSessionMax`);
        assert(
          s.dedupe.size <= this.limits.dedupePerSessionMax && s.dedupe.max === this.limits.dedupePerSessionMax,
          `session ${id} within dedupePerSessionMax`,
        );
        s.dedupe.check();
        for (let slot = 0; slot < s.dedupe.size; slot++) {
          if (s.dedupe.statusCodeAt(slot) !== STATUS_QUEUED) continue;
          const requestId = s.dedupe.requestIdAt(slot);
          const lock = ns.locks.get(s.dedupe.nameAt(slot));
          assert(
            lock !== undefined && lock.waiters[waiterIndex(lock, s.id)]?.requestId === requestId,
            `QUEUED ${requestId} of ${id} is waiting`,
          );
        }
      }
      // Per session: the locks that list it, counted, and all present in its own list.
      const held = new Map<string, number>();
      const waiting = new Map<string, number>();
      const listed = new Map<string, Set<LockRecord>>();
      for (const [id, s] of ns.sessions) {
        assert(
          s.lockListLength <= s.lockList.length && s.lockList.slice(s.lockListLength).every((l) => l.name === ''),
          `session ${id}: unused list slots hold no lock`,
        );
        listed.set(id, new Set(s.lockList.slice(0, s.lockListLength)));
      }
      for (const [lockName, lock] of ns.locks) {
        assert(lock.name === lockName, 'lock record under its own name');
        const parsed = parseLockName(lockName);
        assert(parsed.ok && parsed.namespace === name, `lock ${lockName} belongs to ${name}`);
        assert(lock.holders.length > 0 || lock.waiters.length > 0 || lock.delayRevision !== 0, `free lock ${lockName} was dropped`);
        assert((lock.delayRevision === 0) === (lock.delayMs === 0), `${lockName}: delay revision and length agree`);
        assert(
          lock.holders.length <= holdersMax && lock.waiters.length <= this.limits.waitersPerLockMax,
          `${lockName} within per-lock limits`,
        );
        if (lock.holders.length > 1)
          assert(
            lock.holders.every((h) => h.mode === 'SHARED'),
            `${lockName}: an exclusive holder is alone`,
          );
        for (const h of lock.holders) {
          assert(listed.get(h.sessionId)?.has(lock) === true, `holder ${h.sessionId} of ${lockName} is a live session that lists it`);
          assert(lock.holders.filter((x) => x.sessionId === h.sessionId).length === 1, `${h.sessionId} is a holder of ${lockName} once`);
          assert(waiterIndexOf(lock, h.sessionId) < 0, `${h.sessionId} holds ${lockName} and does not also wait`);
          held.set(h.sessionId, (held.get(h.sessionId) ?? 0) + 1);
        }
        for (const w of lock.waiters) {
          assert(listed.get(w.sessionId)?.has(lock) === true, `waiter ${w.sessionId} of ${lockName} is a live session that lists it`);
          assert(lock.waiters.filter((x) => x.sessionId === w.sessionId).length === 1, `${w.sessionId} is a waiter of ${lockName} once`);
          waiting.set(w.sessionId, (waiting.get(w.sessionId) ?? 0) + 1);
        }
        const head = lock.waiters[0];
        if (head !== undefined && lock.delayRevision === 0)
          assert(!canHold(lock.holders, head.mode, holdersMax), `${lockName}: head waiter is blocked`);
      }
      checkNamespaceCounts(ns, held, waiting);
    }
    assert(sessions === this.sessionCount && sessions <= this.limits.sessionsMax, 'session count matches');
    assert(this.sessionsById.size === sessions, 'every live session is indexed by id');
    for (const [id, s] of this.sessionsById)
      assert(s.ns.sessions.get(id) === s && this.namespaceRecords.get(s.ns.name) === s.ns, 'the id index points at live sessions');
    this.checkCellLimits();
  }

  private checkCellLimits(): void {
    assert(this.namespaceRecords.size <= this.limits.namespacesMax, 'within namespacesMax');
    let staged = 0;
    for (const st of this.staging.values()) {
      assert(st.received > 0 && st.received <= st.totalBytes, 'a staged import holds part of its export');
      staged += st.totalBytes;
    }
    assert(staged <= this.limits.importBytesMax, 'staged imports within importBytesMax');
    assert(this.fences.size <= fencesMax(this.limits), 'move fences within their bound');
  }
}

/** Each session's held and waiting counts against the locks that list it, the namespace's waiter count, its quotas. */
function checkNamespaceCounts(ns: NamespaceRecord, held: ReadonlyMap<string, number>, waiting: ReadonlyMap<string, number>): void {
  let waiters = 0;
  for (const [id, s] of ns.sessions) {
    assert(
      s.heldCount === (held.get(id) ?? 0) && s.waitingCount === (waiting.get(id) ?? 0),
      `session ${id}: held and waiting counts match the locks`,
    );
    waiters += s.waitingCount;
  }
  assert(ns.waiterCount === waiters, `${ns.name}: the waiter count matches the queues`);
  assert(checkQuotas(ns.quotas) === undefined, `${ns.name}: quotas are well-formed`);
  assert(checkCredentials(ns.credentials) === undefined, `${ns.name}: credentials are well-formed`);
}

function namespaceInfoOf(ns: NamespaceRecord): NamespaceInfo {
  return {
    namespace: ns.name,
    state: ns.state,
    lastRevision: ns.lastRevision as Revision,
    sessions: ns.sessions.size,
    locks: ns.locks.size,
    waiters: ns.waiterCount,
    quotas: ns.quotas,
    credentials: ns.credentials,
  };
}

function sessionInfoOf(s: SessionRecord): SessionInfo {
  return {
    sessionId: s.id,
    clientId: s.clientId,
    namespace: s.ns.name,
    ttlMs: s.ttlMs,
    openedRevision: s.openedRevision,
    heldCount: s.heldCount,
    waitingCount: s.waitingCount,
  };
}

/**
 * Checks that `data` is an export this cell's limits accept, for the server
 * or control plane to run before proposing an ImportNamespace.
 */
export function validateNamespaceExport(
  data: Uint8Array,
  limits: Partial<FsmLimits> = {},
): { namespace: Namespace; highestRevision: Revision } | Failure {
  try {
    const decoded = decodeExport(data, { ...LIMITS, ...limits });
    return { namespace: decoded.namespace, highestRevision: decoded.highestRevision as Revision };
  } catch (e) {
    if (e instanceof DecodeError) return fail('INVALID_ARGUMENT', `namespace export is malformed: ${e.message}`);
    throw e;
  }
}
