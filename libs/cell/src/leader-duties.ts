/**
 * What only the leader does, on its monotonic clock
 * (docs/decisions/0001-heartbeats-are-never-logged.md,
 * docs/decisions/0002-apply-never-reads-a-clock.md): track session deadlines from heartbeats that are never logged,
 * wait deadlines of queued Acquires, and lock-delays; and turn each passed
 * deadline into a command for the log (ExpireSession, CancelWait,
 * LiftLockDelay). Deterministic: time comes in as numbers, commands go out
 * as values; the cell node (and the simulator, on virtual time) proposes them.
 *
 * Safety of expiry: a deadline is only ever set to now + the full TTL, on
 * becoming leader (every session gets a fresh TTL), on a session opening and
 * on a heartbeat. So the leader proposes ExpireSession only after a full TTL
 * without a heartbeat it received, never before. And once it has proposed
 * one, it acknowledges no further heartbeat of that session as alive.
 *
 * Session deadlines are kept in a heap that a heartbeat does not touch (it
 * only moves the deadline): `due()` looks at a session when its heap entry
 * surfaces, and queues it again at its new deadline if a heartbeat moved it.
 * Each session is looked at about once per TTL, not on every tick.
 */
import { assert, type RequestId, type Revision, type SessionId } from '@fencer/base';
import { namespaceOfSessionId, parseLockName } from '@fencer/contract';
import type { Command, LockEvent, Outcome } from '@fencer/lock-fsm';
import { DeadlineHeap } from './deadline-heap.js';

export interface SessionSeed {
  readonly sessionId: SessionId;
  readonly ttlMs: number;
}

export interface WaiterSeed {
  readonly sessionId: SessionId;
  readonly name: string;
  readonly requestId: RequestId;
  readonly waitMs: number;
}

export interface DelaySeed {
  readonly name: string;
  readonly delayMs: number;
  readonly delayRevision: Revision;
}

export type DutyCommand =
  | { readonly kind: 'ExpireSession'; readonly sessionId: SessionId }
  | {
      readonly kind: 'CancelWait';
      readonly sessionId: SessionId;
      readonly name: string;
      readonly requestId: RequestId;
      readonly reason: 'timed-out';
    }
  | { readonly kind: 'LiftLockDelay'; readonly name: string; readonly delayRevision: Revision };

interface SessionDeadline {
  readonly sessionId: SessionId;
  ttlMs: number;
  deadlineMonoMs: number;
  /** An ExpireSession is in flight; not proposed again until retryAtMonoMs. */
  retryAtMonoMs: number;
}

interface WaitDeadline {
  readonly seed: WaiterSeed;
  deadlineMonoMs: number;
  retryAtMonoMs: number;
}

interface DelayDeadline {
  readonly seed: DelaySeed;
  liftAtMonoMs: number;
  retryAtMonoMs: number;
}

/** A proposal that did not land (lost leadership, outcome unknown) is tried again after this long. */
export const DUTY_RETRY_MS = 1_000;

/** A wait's key: its session and request id. */
export const waitKey = (sessionId: string, requestId: string): string => `${sessionId}\u0000${requestId}`;

export class LeaderDuties {
  private active = false;
  private readonly sessions = new Map<SessionId, SessionDeadline>();
  /**
   * Every tracked session, by the time due() must next look at it (at or
   * before its deadline): one entry per record, pushed when it opens and
   * again each time its entry is popped. An entry whose record is no longer
   * the one in `sessions` (closed, expired, replaced, or a new term) is stale.
   */
  private readonly sessionQueue = new DeadlineHeap<SessionDeadline>();
  private readonly waits = new Map<string, WaitDeadline>();
  private readonly delays = new Map<string, DelayDeadline>();

  get isActive(): boolean {
    return this.active;
  }

  /** This node became leader: every session, waiter and lock-delay starts a fresh full period now. */
  becomeLeader(nowMonoMs: number, sessions: Iterable<SessionSeed>, waiters: Iterable<WaiterSeed>, delays: Iterable<DelaySeed>): void {
    this.stepDown();
    this.active = true;
    for (const s of sessions) this.sessionOpened(nowMonoMs, s);
    for (const w of waiters) this.waiterQueued(nowMonoMs, w);
    for (const d of delays) this.lockDelayed(nowMonoMs, d);
  }

  stepDown(): void {
    this.active = false;
    this.sessions.clear();
    this.sessionQueue.clear();
    this.waits.clear();
    this.delays.clear();
  }

  sessionOpened(nowMonoMs: number, s: SessionSeed): void {
    if (!this.active) return;
    assert(s.ttlMs > 0, 'a session TTL is positive');
    const rec: SessionDeadline = { sessionId: s.sessionId, ttlMs: s.ttlMs, deadlineMonoMs: nowMonoMs + s.ttlMs, retryAtMonoMs: 0 };
    this.sessions.set(s.sessionId, rec);
    this.sessionQueue.push(rec.deadlineMonoMs, rec);
  }

  /**
   * Keeps the deadlines in step with a command every replica applied: opened
   * and gone sessions, lock-delays begun and lifted, waits queued and ended.
   */
  applied(nowMonoMs: number, command: Command, outcome: Outcome, events: readonly LockEvent[]): void {
    if (outcome.ok) {
      if (command.kind === 'OpenSession') this.sessionOpened(nowMonoMs, { sessionId: command.sessionId, ttlMs: command.ttlMs });
      else if (command.kind === 'CloseSession') this.sessionGone(command.sessionId);
      else if (command.kind === 'ExpireSession') {
        this.sessionGone(command.sessionId);
        for (const d of (outcome as { delayed?: readonly DelaySeed[] }).delayed ?? []) this.lockDelayed(nowMonoMs, d);
      } else if (command.kind === 'LiftLockDelay' && (outcome as { lifted?: boolean }).lifted === true) this.lockDelayLifted(command.name);
    }
    for (const e of events) {
      if (e.requestId === null) continue;
      if (e.type === 'QUEUED') {
        if (command.kind === 'Acquire')
          this.waiterQueued(nowMonoMs, { sessionId: e.sessionId, name: e.name, requestId: e.requestId, waitMs: command.waitMs });
      } else if (e.type === 'ACQUIRED' || e.type === 'CANCELED' || e.type === 'EXPIRED') {
        this.waiterGone(e.sessionId, e.requestId);
      }
    }
  }

  sessionGone(sessionId: SessionId): void {
    this.sessions.delete(sessionId);
  }

  /**
   * A namespace moved in (ImportNamespace applied): its sessions get a fresh
   * full TTL, as after a leader change, so none expires because of the move;
   * its waiters get what was left of their waits on the old cell when known
   * (`remainingWaitMs`, from the old leader), else their full wait; its
   * lock-delays a full period (longer is the safe side).
   */
  namespaceImported(
    nowMonoMs: number,
    sessions: Iterable<SessionSeed>,
    waiters: Iterable<WaiterSeed>,
    delays: Iterable<DelaySeed>,
    remainingWaitMs?: ReadonlyMap<string, number>,
  ): void {
    if (!this.active) return;
    for (const s of sessions) this.sessionOpened(nowMonoMs, s);
    for (const w of waiters) {
      const left = remainingWaitMs?.get(waitKey(w.sessionId, w.requestId));
      this.waiterQueued(nowMonoMs, left === undefined ? w : { ...w, waitMs: Math.min(w.waitMs, left) });
    }
    for (const d of delays) this.lockDelayed(nowMonoMs, d);
  }

  /** A namespace moved out (DropNamespace applied): its sessions, waits and lock-delays are another cell's now. */
  namespaceDropped(namespace: string): void {
    for (const id of [...this.sessions.keys()]) if (namespaceOfSessionId(id) === namespace) this.sessions.delete(id);
    for (const [k, w] of [...this.waits]) if (namespaceOfSessionId(w.seed.sessionId) === namespace) this.waits.delete(k);
    for (const name of [...this.delays.keys()]) {
      const parsed = parseLockName(name);
      if (parsed.ok && parsed.namespace === namespace) this.delays.delete(name);
    }
  }

  /** What is left of a tracked wait (for a move carrying it to another cell); undefined when not tracked. */
  waitRemainingMs(nowMonoMs: number, sessionId: SessionId, requestId: RequestId): number | undefined {
    const w = this.waits.get(waitKey(sessionId, requestId));
    return w === undefined ? undefined : Math.max(0, w.deadlineMonoMs - nowMonoMs);
  }

  /**
   * A heartbeat reached the leader: the session gets a full TTL from now.
   * Returns the TTL granted; 0 for a session whose ExpireSession has been
   * proposed (acknowledging it as alive would promise a TTL it does not
   * have, yet it is not gone until that entry applies, and the entry may
   * still be lost with this leader); undefined for a session the leader does
   * not track (closed, expired, never opened).
   */
  heartbeat(nowMonoMs: number, sessionId: SessionId): number | undefined {
    const s = this.sessions.get(sessionId);
    if (!s) return undefined;
    if (s.retryAtMonoMs > 0) return 0;
    s.deadlineMonoMs = nowMonoMs + s.ttlMs;
    return s.ttlMs;
  }

  /** TTL left for a session without renewing it; undefined when unknown. */
  remainingMs(nowMonoMs: number, sessionId: SessionId): number | undefined {
    const s = this.sessions.get(sessionId);
    return s ? Math.max(0, s.deadlineMonoMs - nowMonoMs) : undefined;
  }

  waiterQueued(nowMonoMs: number, w: WaiterSeed): void {
    if (!this.active) return;
    const key = waitKey(w.sessionId, w.requestId);
    // A retry of the same request keeps the deadline of the wait already tracked.
    if (this.waits.has(key)) return;
    this.waits.set(key, { seed: w, deadlineMonoMs: nowMonoMs + w.waitMs, retryAtMonoMs: 0 });
  }

  waiterGone(sessionId: SessionId, requestId: RequestId): void {
    this.waits.delete(waitKey(sessionId, requestId));
  }

  lockDelayed(nowMonoMs: number, d: DelaySeed): void {
    if (!this.active) return;
    this.delays.set(d.name, { seed: d, liftAtMonoMs: nowMonoMs + d.delayMs, retryAtMonoMs: 0 });
  }

  lockDelayLifted(name: string): void {
    this.delays.delete(name);
  }

  get sessionCount(): number {
    return this.sessions.size;
  }

  get waitCount(): number {
    return this.waits.size;
  }

  /** Commands for every deadline that has passed; each is proposed once, then retried after DUTY_RETRY_MS until it lands. */
  due(nowMonoMs: number): DutyCommand[] {
    if (!this.active) return [];
    const out: DutyCommand[] = [];
    // Sessions whose heap entry is due: expire those past their deadline, re-queue the others
    // (a heartbeat moved their deadline) after the loop, so none is looked at twice in one call.
    const requeue: SessionDeadline[] = [];
    for (let e = this.sessionQueue.popDue(nowMonoMs); e !== undefined; e = this.sessionQueue.popDue(nowMonoMs)) {
      const s = e.item;
      if (this.sessions.get(s.sessionId) !== s) continue;
      if (nowMonoMs > s.deadlineMonoMs && nowMonoMs >= s.retryAtMonoMs) {
        s.retryAtMonoMs = nowMonoMs + DUTY_RETRY_MS;
        out.push({ kind: 'ExpireSession', sessionId: s.sessionId });
      }
      requeue.push(s);
    }
    for (const s of requeue) this.sessionQueue.push(Math.max(s.deadlineMonoMs, s.retryAtMonoMs), s);
    for (const w of this.waits.values()) {
      if (nowMonoMs >= w.deadlineMonoMs && nowMonoMs >= w.retryAtMonoMs) {
        w.retryAtMonoMs = nowMonoMs + DUTY_RETRY_MS;
        const { sessionId, name, requestId } = w.seed;
        out.push({ kind: 'CancelWait', sessionId, name, requestId, reason: 'timed-out' });
      }
    }
    for (const d of this.delays.values()) {
      if (nowMonoMs >= d.liftAtMonoMs && nowMonoMs >= d.retryAtMonoMs) {
        d.retryAtMonoMs = nowMonoMs + DUTY_RETRY_MS;
        out.push({ kind: 'LiftLockDelay', name: d.seed.name, delayRevision: d.seed.delayRevision });
      }
    }
    return out;
  }
}
