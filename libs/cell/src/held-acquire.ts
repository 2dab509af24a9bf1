/**
 * Acquire on the leader. A request that queues with a wait is held open
 * until the log grants or cancels it, its session ends, leadership moves,
 * or its wait (plus a grace period) runs out on this node's timer; then
 * QUEUED tells the client to retry with the same request id.
 *
 * Two things may decide a held call: its own proposal's outcome (GRANTED,
 * TIMED_OUT, a failure, or QUEUED) and, once it queued, what the apply
 * stream later hands its WaitingCalls registration (a grant, a
 * cancellation, its session gone, leadership lost). Both are inputs to one
 * `HeldAcquire`, whose phase says which of them decides, and whose one
 * `answer()` is the only place the caller is answered; it asserts it runs
 * once. Every path reaches it: the replica completes each proposal once
 * (with an error when leadership is lost or it stops), a queued call's
 * registration is resolved by the log or by this node stepping down, and
 * its safety timer ends it otherwise.
 */
import { FencerError, RequestId, type Result, SessionId, assert, err, ok, unreachable } from '@fencer/base';
import { type Cancel, type GroupCore, afterChained } from '@fencer/group';
import type { Applied } from '@fencer/replica';
import { LOCK_DELAY_MS_MAX, WAIT_MS_MAX, namespaceOfSessionId } from '@fencer/contract';
import { type AcquireOutcome, type Command, type LockStateMachine, encodeCommand } from '@fencer/lock-fsm';
import type { LockCellTestHooks } from './config.js';
import type { CellEnv } from './env.js';
import { WAIT_GRACE_MS } from './limits.js';
import type { CallDone, Receipt } from './request-api.js';
import { failureOf } from './validation.js';
import type { WaitHandle, WaitResult, WaitingCalls } from './waiting-calls.js';
import { type AcquireRequest, type AcquireResponse, WIRE_ACQUIRE_STATUS, holderToWire, modeFromWire } from './wire.js';

export interface HeldAcquiresParts {
  readonly env: CellEnv;
  readonly hooks: LockCellTestHooks;
  readonly core: GroupCore;
  readonly waits: WaitingCalls;
  /** The lock state as applied here now. */
  readonly fsm: () => LockStateMachine;
  /** Proposes a command whose outcome nobody waits for (the CancelWait of a caller that gave up). */
  readonly propose: (command: Command) => void;
}

type AcquireCommand = Extract<Command, { kind: 'Acquire' }>;

/** Serves Acquire calls on the leader, each as one HeldAcquire. */
export class HeldAcquires {
  constructor(private readonly parts: HeldAcquiresParts) {}

  acquire(req: AcquireRequest, done: CallDone<unknown>): Cancel {
    const command = acquireCommand(req);
    const call = new HeldAcquire(this.parts, command, done);
    // Registered before the proposal, so a grant applied in the same batch as the queueing still reaches it.
    if (command.waitMs > 0 && !call.register()) return () => {};
    const { hooks, core, fsm } = this.parts;
    const freeBefore = hooks.grantBeforeCommit === true && isFree(fsm(), req.name);
    const data = encodeCommand(command);
    core.propose(data, (r) => call.proposed(r, data));
    // The planted bug: GRANTED, with the token of the entry just appended to this leader's log, before it commits.
    if (freeBefore) call.grantedBeforeCommit(core.replica.status().lastIndex + fsm().revisionBase);
    return () => call.giveUp();
  }
}

function acquireCommand(req: AcquireRequest): AcquireCommand {
  const waitMs = Math.min(req.waitMs, WAIT_MS_MAX);
  return {
    kind: 'Acquire',
    sessionId: SessionId(req.sessionId),
    name: req.name,
    mode: modeFromWire(req.mode)!,
    requestId: RequestId(req.requestId),
    waitMs,
    lockDelayMs: Math.min(req.lockDelayMs, LOCK_DELAY_MS_MAX),
    tryLock: waitMs === 0,
  };
}

function movingError(sessionId: string): FencerError {
  return new FencerError(
    'NAMESPACE_MOVING',
    `namespace "${namespaceOfSessionId(sessionId) ?? ''}" is frozen for a move; retry with the same request id`,
  );
}

function isFree(fsm: LockStateMachine, name: string): boolean {
  const lock = fsm.getLock(name);
  return lock.holders.length === 0 && lock.waiters.length === 0;
}

/**
 * One Acquire call on the leader, from its proposal to its one answer.
 *
 * 'proposing': its entry has not applied here yet; the proposal's outcome
 *   decides, and a result its registration gets meanwhile (a grant applied
 *   in the same batch as its queueing) waits in `early` until the proposal
 *   says QUEUED.
 * 'queued': the log queued it and it has a registration; what the
 *   registration gets decides, or the safety timer (QUEUED).
 * 'answered': the caller has its answer; the registration is withdrawn and
 *   the timer cancelled, so nothing but a late proposal outcome (the caller
 *   gave up, or the planted early grant answered) can arrive, and it is
 *   dropped.
 */
class HeldAcquire {
  private phase: 'proposing' | 'queued' | 'answered' = 'proposing';
  /** The registration's result, when it came while proposing; set at most once, and only in that phase. */
  private early: WaitResult | undefined;
  /** Where the entry landed, once the proposal applied here. */
  private receipt: Receipt | undefined;
  /** Present for a call with a wait (registered before it proposed); withdrawn when it is answered. */
  private registration: WaitHandle | undefined;
  private cancelSafety: Cancel = () => {};

  constructor(
    private readonly parts: HeldAcquiresParts,
    private readonly command: AcquireCommand,
    private readonly done: CallDone<unknown>,
  ) {}

  /** Registers the call's wait; false (the caller answered TOO_MANY_REQUESTS) when the node holds too many. */
  register(): boolean {
    const { sessionId, requestId } = this.command;
    this.registration = this.parts.waits.register(sessionId, requestId, (w) => this.resolved(w));
    if (this.registration === undefined) {
      this.answer(err(new FencerError('TOO_MANY_REQUESTS', 'too many Acquire calls are waiting on this node; retry later')));
      return false;
    }
    return true;
  }

  /** The proposal's outcome (the replica delivers it once). */
  proposed(r: Result<Applied, FencerError>, data: Uint8Array): void {
    if (this.phase === 'answered') return;
    assert(this.phase === 'proposing', 'a proposal completes once, and a call queues only when it does');
    if (!r.ok) return this.answer(r);
    this.receipt = { index: r.value.index, term: r.value.term, data };
    const failure = failureOf(r.value.result);
    if (failure) return this.answer(err(new FencerError(failure.code, failure.message)));
    const o = r.value.result as AcquireOutcome;
    if (o.status === 'GRANTED')
      return this.answer(
        ok({
          status: WIRE_ACQUIRE_STATUS.GRANTED,
          token: o.token,
          holders: o.holders.map(holderToWire),
          queuePosition: 0,
          revision: o.revision,
        }),
      );
    if (o.status === 'TIMED_OUT') return this.answer(ok(this.timedOut(o.revision)));
    if (this.registration === undefined) return this.answer(ok(this.queued(o.revision)));
    // A retry answered QUEUED from its dedupe record while the namespace is frozen for a move: no call is held
    // there now (the freeze ended them); the caller retries and finds its wait wherever the namespace then lives.
    if (this.frozen()) return this.answer(err(movingError(this.command.sessionId)));
    this.phase = 'queued';
    if (this.early !== undefined) return this.decide(this.early);
    this.cancelSafety = afterChained(this.parts.env.after, this.command.waitMs + WAIT_GRACE_MS, () => this.decide('wait-over'));
  }

  /** What the registration got from the apply stream or from this node stepping down. */
  private resolved(w: WaitResult): void {
    assert(this.phase !== 'answered', 'an answered call has withdrawn its registration');
    if (this.phase === 'queued') return this.decide(w);
    assert(this.early === undefined, 'a registration is resolved once');
    this.early = w;
  }

  /** The caller gave up: CANCELLED, and a queued wait is withdrawn from the log too. */
  giveUp(): void {
    if (this.phase === 'answered') return;
    const wasQueued = this.phase === 'queued';
    this.answer(err(new FencerError('CANCELLED', 'the caller gave up')));
    const { sessionId, name, requestId } = this.command;
    if (wasQueued) this.parts.propose({ kind: 'CancelWait', sessionId, name, requestId, reason: 'cancelled' });
  }

  /** The planted bug grantBeforeCommit: GRANTED before the entry commits, unless something answered first. */
  grantedBeforeCommit(token: number): void {
    if (this.phase === 'answered') return;
    this.answer(ok({ status: WIRE_ACQUIRE_STATUS.GRANTED, token, holders: [], queuePosition: 0, revision: token }));
  }

  /** A queued call's end: its registration's result, or its wait (plus grace) over on this node's timer. */
  private decide(w: WaitResult | 'wait-over'): void {
    assert(this.phase === 'queued', 'a wait decides only a queued call');
    if (w === 'wait-over') return this.answer(ok(this.queued(this.parts.fsm().revision)));
    switch (w.kind) {
      case 'granted': {
        const holders = this.parts.fsm().getLock(this.command.name).holders.map(holderToWire);
        return this.answer(ok({ status: WIRE_ACQUIRE_STATUS.GRANTED, token: w.token, holders, queuePosition: 0, revision: w.revision }));
      }
      case 'cancelled':
        return this.answer(ok(this.timedOut(w.revision)));
      case 'session-gone':
        return this.answer(
          err(new FencerError('SESSION_NOT_FOUND', `session ${this.command.sessionId} expired or was closed while waiting`)),
        );
      case 'leadership-lost':
        return this.answer(ok(this.queued(this.parts.fsm().revision)));
      case 'namespace-moving':
        return this.answer(err(movingError(this.command.sessionId)));
      default:
        return unreachable(w, 'wait result');
    }
  }

  private frozen(): boolean {
    const ns = namespaceOfSessionId(this.command.sessionId);
    return ns !== undefined && this.parts.fsm().namespaceInfo(ns)?.state === 'frozen';
  }

  /** The one place the caller is answered. */
  private answer(outcome: Result<AcquireResponse, FencerError>): void {
    assert(this.phase !== 'answered', `Acquire ${this.command.requestId} is answered once`);
    this.phase = 'answered';
    this.cancelSafety();
    this.registration?.withdraw();
    this.done(outcome, this.receipt);
  }

  private timedOut(revision: number): AcquireResponse {
    const holders = this.parts.fsm().getLock(this.command.name).holders.map(holderToWire);
    return { status: WIRE_ACQUIRE_STATUS.TIMED_OUT, token: 0, holders, queuePosition: 0, revision };
  }

  private queued(revision: number): AcquireResponse {
    const lock = this.parts.fsm().getLock(this.command.name);
    const { sessionId, requestId } = this.command;
    const at = lock.waiters.findIndex((w) => w.sessionId === sessionId && w.requestId === requestId);
    return {
      status: WIRE_ACQUIRE_STATUS.QUEUED,
      token: 0,
      holders: lock.holders.map(holderToWire),
      queuePosition: Math.max(0, at),
      revision,
    };
  }
}
