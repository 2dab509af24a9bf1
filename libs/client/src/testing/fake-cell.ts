/**
 * The leader of one fake cell, over the real lock state machine. Every
 * request becomes a command that `LockStateMachine` (@fencer/lock-fsm)
 * applies at the next log index (revision = index, revision base 0), so
 * sessions, FIFO waits, request-id dedupe, tokens, lock-delay and every
 * outcome are the real semantics, not a second copy of them. This class adds
 * only what a leader adds around the state machine:
 * - deadlines on an injected Scheduler: a waiter's deadline (CancelWait
 *   timed-out, counted from its first arrival), lock-delay lifts, and session
 *   expiry when autoExpire is on (otherwise tests expire sessions themselves);
 * - held-open Acquire calls, answered from the applied events, QUEUED early
 *   after acquireHoldMs, or QUEUED when the fake stops (as on a leader change);
 * - the watch history, bounded by historyMax, for watchers that resume.
 * Like a cell node, it checks the stateless rules (validateCommand) before
 * applying, so refused input takes no revision.
 */
import { FencerError, Namespace, RequestId, Revision, SessionId, assert, err, ok, type Result } from '@fencer/base';
import {
  LIST_LOCKS_LIMIT_MAX,
  LOCK_DELAY_MS_MAX,
  TTL_MS_MAX,
  TTL_MS_MIN,
  WAIT_MS_MAX,
  checkNamespace,
  makeSessionId,
  namespaceOfSessionId,
  parseLockName,
  parseLockPrefix,
} from '@fencer/contract';
import {
  LockStateMachine,
  isFailure,
  validateCommand,
  type ApplyResult,
  type Command,
  type DelayedLock,
  type Failure,
  type LockEvent,
  type LockState,
  type OutcomeOf,
} from '@fencer/lock-fsm';
import { lockservice } from '@fencer/protocol';
import type { Scheduler, TimerHandle } from '../scheduler.js';
import { eventToPb, holderToPb, modeFromPb, serverEvent, stateToPb } from './fake-wire.js';

const { AcquireStatus } = lockservice;

/** Acquire calls held open at once: a runaway test fails loudly instead of piling them up. */
export const HELD_ACQUIRES_MAX = 10_000;
/** Node fires a longer setTimeout at once; longer deadlines are armed in steps of this. */
const TIMER_STEP_MS_MAX = 2 ** 31 - 1;
/** ListLocks pages one watch snapshot reads at most (each holds LIST_LOCKS_LIMIT_MAX locks). */
const SNAPSHOT_PAGES_MAX = 10_000;

export type Reply<T> = (r: Result<T, FencerError>) => void;

export interface FakeCellOptions {
  readonly scheduler: Scheduler;
  readonly historyMax: number;
  readonly ttlDefaultMs: number;
  readonly autoExpire: boolean;
  readonly acquireHoldMs: number | undefined;
}

/** What the gRPC shell passes on: watch events to its streams, waiter changes to the test's listeners. */
export interface FakeCellListener {
  event(ev: lockservice.WatchEvent): void;
  queued(name: string, sessionId: string, requestId: string): void;
  canceled(name: string, sessionId: string, requestId: string): void;
}

interface HeldAcquire {
  readonly name: string;
  readonly reply: Reply<lockservice.AcquireResponse>;
  early: TimerHandle | undefined;
}

type Success<C extends Command> = Exclude<OutcomeOf[C['kind']], Failure>;

const keyOf = (sessionId: string, requestId: string): string => `${sessionId}\u0000${requestId}`;

/** A watch's match: the name itself, or every name under a prefix. */
export function matches(w: { readonly name: string; readonly prefix: boolean }, name: string): boolean {
  return w.prefix ? name.startsWith(w.name) : name === w.name;
}

function fromFailure(f: Failure | { readonly code: Failure['code']; readonly message: string }): FencerError {
  return new FencerError(f.code, f.message);
}

/** The session id of a request: an id no server could have issued is SESSION_NOT_FOUND, as at a cell node. */
function sessionIdOf(id: string): SessionId {
  if (id === '') throw new FencerError('SESSION_NOT_FOUND', 'session_id is empty: open a session first');
  if (namespaceOfSessionId(id) === undefined) throw new FencerError('SESSION_NOT_FOUND', `session "${id.slice(0, 80)}" does not exist`);
  return SessionId(id);
}

function nameOf(name: string): string {
  const parsed = parseLockName(name);
  if (!parsed.ok) throw fromFailure(parsed);
  return name;
}

export class FakeCell {
  readonly fsm = new LockStateMachine({ autoClaim: true });
  /** The last revision handed out: the state machine's, or a later one appendEvents() set. */
  private revisionValue = 0;
  private readonly history: lockservice.WatchEvent[] = [];
  private floorRevision = 0;
  private readonly held = new Map<string, Set<HeldAcquire>>();
  private heldCount = 0;
  private readonly waitTimers = new Map<string, TimerHandle>();
  private readonly expiryTimers = new Map<string, TimerHandle>();
  private readonly delayTimers = new Map<string, TimerHandle>();
  private nextUnique = 1;

  constructor(
    private readonly o: FakeCellOptions,
    private readonly listener: FakeCellListener,
  ) {}

  get revision(): number {
    return this.revisionValue;
  }

  /** Moves the next entry's revision forward (a cell that has seen more); the log never goes back. */
  set revision(revision: number) {
    assert(
      Number.isSafeInteger(revision) && revision >= this.fsm.revision,
      `revision ${revision} is below the applied ${this.fsm.revision}`,
    );
    this.revisionValue = revision;
  }

  // ---- applying ----

  /** Applies one command at the next index, then does the leader's part for its events and outcome. */
  apply<C extends Command>(command: C): OutcomeOf[C['kind']] {
    const result = this.fsm.apply(this.revisionValue + 1, command);
    this.revisionValue = result.revision;
    for (const ev of result.events) this.publish(ev);
    this.afterOutcome(command, result);
    return result.outcome;
  }

  /** A client's command: refused before it takes a revision when a stateless rule fails, as a cell node does. */
  private propose<C extends Command>(command: C): Success<C> {
    const bad = validateCommand(command);
    if (bad) throw fromFailure(bad);
    const outcome = this.apply(command);
    if (isFailure(outcome)) throw fromFailure(outcome);
    return outcome as Success<C>;
  }

  /** One applied event: into the history and out to watchers, then the leader's duties it triggers. */
  private publish(ev: LockEvent): void {
    this.record(eventToPb(ev));
    const requestId = ev.requestId;
    if (requestId === null) return;
    const key = keyOf(ev.sessionId, requestId);
    if (ev.type === 'QUEUED') {
      this.armWait(ev, requestId);
      this.listener.queued(ev.name, ev.sessionId, requestId);
      return;
    }
    this.clearTimer(this.waitTimers, key);
    if (ev.type === 'ACQUIRED') {
      const holders = ev.lock.holders.map(holderToPb);
      this.settle(
        key,
        ok({ status: AcquireStatus.ACQUIRE_STATUS_GRANTED, token: ev.token, holders, queuePosition: 0, revision: ev.revision }),
      );
    } else if (ev.type === 'CANCELED') {
      this.listener.canceled(ev.name, ev.sessionId, requestId);
      this.settle(key, ok(this.timedOut(ev.lock, ev.revision)));
    } else if (ev.type === 'EXPIRED') {
      this.settle(key, err(new FencerError('SESSION_NOT_FOUND', `session ${ev.sessionId} expired or was closed while waiting`)));
    }
  }

  private afterOutcome(command: Command, result: ApplyResult): void {
    if (isFailure(result.outcome)) return;
    if (command.kind === 'OpenSession') this.armExpiry(command.sessionId, command.ttlMs);
    if (command.kind === 'CloseSession' || command.kind === 'ExpireSession') this.clearTimer(this.expiryTimers, command.sessionId);
    if (command.kind === 'ExpireSession')
      for (const d of (result.outcome as OutcomeOf['ExpireSession'] & { ok: true }).delayed) this.armLift(d);
  }

  // ---- deadlines: the leader's, on the injected scheduler ----

  /** A waiter's deadline runs from its first arrival, whatever happens to the call that brought it. */
  private armWait(ev: LockEvent, requestId: RequestId): void {
    const waiter = ev.lock.waiters.find((w) => w.sessionId === ev.sessionId && w.requestId === requestId);
    assert(waiter !== undefined, 'a QUEUED event names a waiter of its lock');
    const command: Command = { kind: 'CancelWait', sessionId: ev.sessionId, name: ev.name, requestId, reason: 'timed-out' };
    this.arm(this.waitTimers, keyOf(ev.sessionId, requestId), waiter.waitMs, () => this.apply(command));
  }

  /** With autoExpire, a session whose heartbeats stop for its TTL expires, as at a leader. */
  private armExpiry(sessionId: SessionId, ttlMs: number): void {
    if (this.o.autoExpire) this.arm(this.expiryTimers, sessionId, ttlMs, () => this.apply({ kind: 'ExpireSession', sessionId }));
  }

  private armLift(d: DelayedLock): void {
    this.arm(this.delayTimers, d.name, d.delayMs, () =>
      this.apply({ kind: 'LiftLockDelay', name: d.name, delayRevision: d.delayRevision }),
    );
  }

  private arm(timers: Map<string, TimerHandle>, key: string, delayMs: number, fire: () => void): void {
    this.clearTimer(timers, key);
    const step = Math.min(delayMs, TIMER_STEP_MS_MAX);
    const left = delayMs - step;
    timers.set(
      key,
      this.o.scheduler.setTimer(() => {
        timers.delete(key);
        if (left > 0) this.arm(timers, key, left, fire);
        else fire();
      }, step),
    );
  }

  private clearTimer(timers: Map<string, TimerHandle>, key: string): void {
    const t = timers.get(key);
    if (t === undefined) return;
    timers.delete(key);
    this.o.scheduler.clearTimer(t);
  }

  // ---- held-open Acquire calls ----

  /** Holds a QUEUED call open until the log decides; returns what to do when its caller goes away. */
  private hold(sessionId: SessionId, requestId: RequestId, name: string, reply: Reply<lockservice.AcquireResponse>): () => void {
    if (this.heldCount >= HELD_ACQUIRES_MAX) {
      reply(err(new FencerError('TOO_MANY_REQUESTS', `the fake holds ${HELD_ACQUIRES_MAX} Acquire calls open already`)));
      return () => {};
    }
    const key = keyOf(sessionId, requestId);
    const entry: HeldAcquire = { name, reply, early: undefined };
    let calls = this.held.get(key);
    if (calls === undefined) this.held.set(key, (calls = new Set()));
    calls.add(entry);
    this.heldCount++;
    if (this.o.acquireHoldMs !== undefined) {
      entry.early = this.o.scheduler.setTimer(() => {
        if (this.unhold(key, entry)) reply(ok(this.queuedAnswer(name, sessionId, requestId)));
      }, this.o.acquireHoldMs);
    }
    // A caller that gives up cancels its wait, as a cell node proposes CancelWait.
    return () => {
      if (this.unhold(key, entry)) this.apply({ kind: 'CancelWait', sessionId, name, requestId, reason: 'cancelled' });
    };
  }

  /** Removes a held call; false when it was answered already. */
  private unhold(key: string, entry: HeldAcquire): boolean {
    const calls = this.held.get(key);
    if (calls === undefined || !calls.delete(entry)) return false;
    this.heldCount--;
    if (calls.size === 0) this.held.delete(key);
    if (entry.early !== undefined) this.o.scheduler.clearTimer(entry.early);
    return true;
  }

  private settle(key: string, result: Result<lockservice.AcquireResponse, FencerError>): void {
    for (const entry of [...(this.held.get(key) ?? [])]) if (this.unhold(key, entry)) entry.reply(result);
  }

  /** Ends everything on the clock and answers held calls QUEUED, as a node that stops leading. */
  stop(): void {
    for (const timers of [this.waitTimers, this.expiryTimers, this.delayTimers])
      for (const key of [...timers.keys()]) this.clearTimer(timers, key);
    for (const [key, calls] of [...this.held]) {
      const [sessionId = '', requestId = ''] = key.split('\u0000');
      for (const entry of [...calls]) if (this.unhold(key, entry)) entry.reply(ok(this.queuedAnswer(entry.name, sessionId, requestId)));
    }
  }

  // ---- requests ----

  openSession(req: lockservice.OpenSessionRequest): lockservice.OpenSessionResponse {
    const bad = checkNamespace(req.namespace);
    if (bad) throw fromFailure(bad);
    // The server clamps the requested TTL to its bounds and answers what it used.
    const asked = req.ttlMs === 0 ? this.o.ttlDefaultMs : req.ttlMs;
    const ttlMs = Math.min(Math.max(asked, TTL_MS_MIN), TTL_MS_MAX);
    const namespace = Namespace(req.namespace);
    const sessionId = makeSessionId(namespace, `fake${this.nextUnique++}`);
    const o = this.propose({ kind: 'OpenSession', sessionId, clientId: req.clientId, namespace, ttlMs });
    return { sessionId: o.sessionId, ttlMs: o.ttlMs };
  }

  closeSession(req: lockservice.CloseSessionRequest): lockservice.CloseSessionResponse {
    return { released: [...this.propose({ kind: 'CloseSession', sessionId: sessionIdOf(req.sessionId) }).released] };
  }

  /** Answers through `reply`, at once or once the log decides; returns the hook for a caller that goes away. */
  acquire(req: lockservice.AcquireRequest, reply: Reply<lockservice.AcquireResponse>): () => void {
    const sessionId = sessionIdOf(req.sessionId);
    const mode = modeFromPb(req.mode);
    if (mode === undefined) throw new FencerError('INVALID_MODE', `mode ${req.mode} is not EXCLUSIVE (1) or SHARED (2)`);
    const requestId = RequestId(req.requestId);
    const waitMs = Math.min(req.waitMs, WAIT_MS_MAX);
    const lockDelayMs = Math.min(req.lockDelayMs, LOCK_DELAY_MS_MAX);
    const o = this.propose({ kind: 'Acquire', sessionId, name: req.name, mode, requestId, waitMs, lockDelayMs, tryLock: waitMs === 0 });
    const holders = o.status === 'GRANTED' ? o.holders.map(holderToPb) : [];
    if (o.status === 'GRANTED')
      reply(ok({ status: AcquireStatus.ACQUIRE_STATUS_GRANTED, token: o.token, holders, queuePosition: 0, revision: o.revision }));
    else if (o.status === 'TIMED_OUT') reply(ok(this.timedOut(this.fsm.getLock(req.name), o.revision)));
    else if (waitMs === 0) reply(ok(this.queuedAnswer(req.name, sessionId, requestId)));
    else return this.hold(sessionId, requestId, req.name, reply);
    return () => {};
  }

  release(req: lockservice.ReleaseRequest): lockservice.ReleaseResponse {
    const sessionId = sessionIdOf(req.sessionId);
    return { ok: this.propose({ kind: 'Release', sessionId, name: req.name, token: Revision(req.token) }).released };
  }

  checkToken(req: lockservice.CheckTokenRequest): lockservice.CheckTokenResponse {
    return { ...this.fsm.checkToken(nameOf(req.name), req.token), revision: this.revision };
  }

  getLock(req: lockservice.GetLockRequest): lockservice.GetLockResponse {
    return { lock: stateToPb(this.fsm.getLock(nameOf(req.name))), revision: this.revision };
  }

  listLocks(req: lockservice.ListLocksRequest): lockservice.ListLocksResponse {
    const page = this.fsm.listLocks(req.prefix, req.limit, req.pageToken);
    if (isFailure(page)) throw fromFailure(page);
    return { locks: page.locks.map(stateToPb), nextPageToken: page.nextPageToken, revision: this.revision };
  }

  /** A heartbeat reached the leader: a live session's TTL starts again. */
  heartbeat(sessionId: string): lockservice.KeepAliveResponse {
    const s = this.fsm.getSession(sessionId);
    if (s === undefined) return { sessionId, ttlMsRemaining: 0, expired: true };
    this.armExpiry(s.sessionId, s.ttlMs);
    return { sessionId, ttlMsRemaining: s.ttlMs, expired: false };
  }

  /** Expires a live session as the leader's deadline would; anything else is a no-op. */
  expireSession(sessionId: string): void {
    const s = this.fsm.getSession(sessionId);
    if (s !== undefined) this.apply({ kind: 'ExpireSession', sessionId: s.sessionId });
  }

  // ---- answers ----

  private timedOut(lock: LockState, revision: number): lockservice.AcquireResponse {
    const holders = lock.holders.map(holderToPb);
    return { status: AcquireStatus.ACQUIRE_STATUS_TIMED_OUT, token: 0, holders, queuePosition: 0, revision };
  }

  /** QUEUED with the waiter's place now: the client retries with the same request id to wait on. */
  private queuedAnswer(name: string, sessionId: string, requestId: string): lockservice.AcquireResponse {
    const lock = this.fsm.getLock(name);
    const at = lock.waiters.findIndex((w) => w.sessionId === sessionId && w.requestId === requestId);
    const holders = lock.holders.map(holderToPb);
    return { status: AcquireStatus.ACQUIRE_STATUS_QUEUED, token: 0, holders, queuePosition: Math.max(0, at), revision: this.revision };
  }

  // ---- watch history ----

  private record(ev: lockservice.WatchEvent): void {
    this.history.push(ev);
    while (this.history.length > this.o.historyMax) this.floorRevision = (this.history.shift() as lockservice.WatchEvent).revision;
    this.listener.event(ev);
  }

  /** Raw events as one entry would yield them; the revision is taken as given (it must not go back). */
  appendEvents(events: readonly lockservice.WatchEvent[]): void {
    for (const ev of events) {
      this.revisionValue = Math.max(this.revisionValue, ev.revision);
      this.record(ev);
    }
  }

  /** Forgets the history up to now: resuming from an older revision answers COMPACTED. */
  compactHistory(): void {
    this.floorRevision = this.revisionValue;
    this.history.length = 0;
  }

  /** The events a new watch starts with: the history after since_revision, or a snapshot of live locks and PROGRESS. */
  watchStart(req: lockservice.WatchRequest): lockservice.WatchEvent[] {
    const parsed = req.prefix ? parseLockPrefix(req.name) : parseLockName(req.name);
    if (!parsed.ok) throw fromFailure(parsed);
    if (req.sinceRevision > 0 && req.sinceRevision < this.floorRevision) {
      throw new FencerError('COMPACTED', `revision ${req.sinceRevision} is older than the history (from ${this.floorRevision})`);
    }
    if (req.sinceRevision > 0) return this.history.filter((ev) => ev.revision > req.sinceRevision && matches(req, ev.name));
    return [...this.liveLocks(req).map((l) => serverEvent(this.revision, l)), serverEvent(this.revision, undefined)];
  }

  private liveLocks(req: lockservice.WatchRequest): LockState[] {
    if (!req.prefix) {
      const lock = this.fsm.getLock(req.name);
      return lock.holders.length > 0 || lock.waiters.length > 0 || lock.delayed ? [lock] : [];
    }
    const locks: LockState[] = [];
    let pageToken = '';
    for (let pages = 0; pages < SNAPSHOT_PAGES_MAX; pages++) {
      const page = this.fsm.listLocks(req.name, LIST_LOCKS_LIMIT_MAX, pageToken);
      if (isFailure(page)) throw fromFailure(page);
      locks.push(...page.locks);
      if (page.nextPageToken === '') return locks;
      pageToken = page.nextPageToken;
    }
    throw new FencerError('TOO_MANY_REQUESTS', `more than ${SNAPSHOT_PAGES_MAX} pages of locks under ${req.name}`);
  }
}
