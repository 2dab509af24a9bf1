/**
 * The production lock state machine inside a simulated replica, wrapped the
 * way the cell node wraps it (apps/cell-node's FsmAdapter): decode the
 * entry, apply it at its index, hand the command and its result to the node,
 * return the outcome to the proposer; snapshot and restore are the state
 * machine's own. Same options as production (auto-claim: a cell without a
 * control plane owns every namespace).
 *
 * `SimDuties` is the simulated leader's deadline tracker: what the cell
 * node's LeaderDuties does for sessions and waits, on the node's virtual
 * monotonic clock. It lives here because the production one is part of the
 * cell-node app, which a library cannot import.
 */
import { type RequestId, type SessionId, assert } from '@fencer/base';
import type { Entry } from '@fencer/raft';
import type { StateMachine } from '@fencer/replica';
import { type ApplyResult, type Command, type LockEvent, LockStateMachine, decodeCommand } from '@fencer/lock-fsm';

/** Options of every simulated replica's state machine: production's (apps/cell-node/src/node.ts). */
export const LOCK_FSM_OPTIONS = { autoClaim: true } as const;

/**
 * Planted lock-level bugs, to show the lock checkers fire (tests only). Each
 * rewrites what the state machine reports, the same way on every replica, so
 * the replicas still agree and only a lock-level checker can tell:
 * - reuseToken: a fresh grant reports a token shared by every grant in its
 *   block of 64 revisions (tokens stop strictly increasing);
 * - doubleGrant: an Acquire that queued reports GRANTED at once, so a second
 *   holder is told it holds a busy lock;
 * - staleLockRead (in the simulation's read path): a linearizable read is
 *   answered from the most lagging replica's state.
 */
export type PlantedBug = 'reuseToken' | 'doubleGrant' | 'staleLockRead';
export const PLANTED_BUGS: readonly PlantedBug[] = ['reuseToken', 'doubleGrant', 'staleLockRead'];

/** What the node sees of every applied command (the cell node's afterApply). */
export type AfterApply = (command: Command, result: ApplyResult, fsm: LockStateMachine) => void;

export class LockMachine implements StateMachine {
  fsm = new LockStateMachine(LOCK_FSM_OPTIONS);

  constructor(
    private readonly afterApply: AfterApply,
    private readonly afterRestore: (fsm: LockStateMachine) => void,
    private readonly bug: PlantedBug | null = null,
  ) {}

  apply(entry: Entry): unknown {
    const command = decodeCommand(entry.data);
    let applied: ApplyResult = this.fsm.apply(entry.index, command);
    if (this.bug !== null && command.kind === 'Acquire') applied = plant(this.bug, applied);
    this.afterApply(command, applied, this.fsm);
    return applied.outcome;
  }

  snapshot(): Uint8Array {
    return this.fsm.snapshot();
  }

  restore(data: Uint8Array): void {
    this.fsm = LockStateMachine.restore(data, LOCK_FSM_OPTIONS);
    this.afterRestore(this.fsm);
  }

  /** The hash of the snapshot bytes: equal on replicas in the same state. */
  stateHash(): string {
    return this.fsm.stateHash();
  }
}

function plant(bug: PlantedBug, applied: ApplyResult): ApplyResult {
  const o = applied.outcome;
  if (!o.ok || !('status' in o) || o.deduped) return applied;
  if (bug === 'reuseToken' && o.status === 'GRANTED') {
    const token = (Math.floor(o.token / 64) * 64 + 1) as typeof o.token;
    const events = applied.events.map((e) => (e.type === 'ACQUIRED' && e.token === o.token ? { ...e, token } : e));
    return { ...applied, outcome: { ...o, token, revision: token }, events };
  }
  if (bug === 'doubleGrant' && o.status === 'QUEUED') {
    const token = applied.revision;
    const events = applied.events.map((e): LockEvent => (e.type === 'QUEUED' ? { ...e, type: 'ACQUIRED', token } : e));
    return { ...applied, outcome: { ok: true, status: 'GRANTED', token, holders: [], revision: token, deduped: false }, events };
  }
  return applied;
}

// ---- the leader's deadlines ----

/** An ExpireSession or CancelWait that did not land is proposed again after this long (production's DUTY_RETRY_MS). */
export const DUTY_RETRY_MS = 1_000;

interface Deadline {
  deadlineMs: number;
  /** Proposed, and not again before this time (0: not proposed yet). */
  retryAtMs: number;
}

interface SessionDeadline extends Deadline {
  readonly ttlMs: number;
}

interface WaitDeadline extends Deadline {
  readonly sessionId: SessionId;
  readonly name: string;
  readonly requestId: RequestId;
}

export type DutyCommand =
  | { readonly kind: 'ExpireSession'; readonly sessionId: SessionId }
  | { readonly kind: 'CancelWait'; readonly sessionId: SessionId; readonly name: string; readonly requestId: RequestId; readonly reason: 'timed-out' };

/**
 * Session and wait deadlines, kept only while leading. A deadline is only
 * ever set to now + the full period (on becoming leader, on open or queue,
 * on a heartbeat), so an expiry is never proposed early.
 */
export class SimDuties {
  active = false;
  private readonly sessions = new Map<string, SessionDeadline>();
  private readonly waits = new Map<string, WaitDeadline>();

  /** Became leader: every live session and waiter gets a fresh full period from now. */
  becomeLeader(nowMs: number, fsm: LockStateMachine): void {
    this.stepDown();
    this.active = true;
    for (const s of fsm.sessions()) this.sessionOpened(nowMs, s.sessionId, s.ttlMs);
    for (const w of fsm.waiters()) this.waiterQueued(nowMs, w.sessionId, w.name, w.requestId, w.waitMs);
  }

  stepDown(): void {
    this.active = false;
    this.sessions.clear();
    this.waits.clear();
  }

  sessionOpened(nowMs: number, sessionId: SessionId, ttlMs: number): void {
    if (this.active) this.sessions.set(sessionId, { ttlMs, deadlineMs: nowMs + ttlMs, retryAtMs: 0 });
  }

  /** A heartbeat reached the leader; false for a session it does not track or is already expiring. */
  heartbeat(nowMs: number, sessionId: SessionId): boolean {
    const s = this.sessions.get(sessionId);
    if (s === undefined || s.retryAtMs > 0) return false;
    s.deadlineMs = nowMs + s.ttlMs;
    return true;
  }

  waiterQueued(nowMs: number, sessionId: SessionId, name: string, requestId: RequestId, waitMs: number): void {
    const key = `${sessionId} ${requestId}`;
    if (this.active && !this.waits.has(key)) this.waits.set(key, { sessionId, name, requestId, deadlineMs: nowMs + waitMs, retryAtMs: 0 });
  }

  /** Keeps the deadlines in step with an applied command (the cell node's afterApply). */
  applied(nowMs: number, command: Command, result: ApplyResult): void {
    if (!this.active) return;
    if (result.outcome.ok) {
      if (command.kind === 'OpenSession') this.sessionOpened(nowMs, command.sessionId, command.ttlMs);
      else if (command.kind === 'CloseSession' || command.kind === 'ExpireSession') this.sessions.delete(command.sessionId);
    }
    for (const e of result.events) {
      if (e.requestId === null) continue;
      if (e.type === 'QUEUED') {
        assert(command.kind === 'Acquire', 'only an Acquire queues');
        this.waiterQueued(nowMs, e.sessionId, e.name, e.requestId, command.waitMs);
      } else {
        this.waits.delete(`${e.sessionId} ${e.requestId}`);
      }
    }
  }

  /** Every passed deadline as a command; each is proposed once, then again every DUTY_RETRY_MS until it lands. */
  due(nowMs: number): DutyCommand[] {
    const out: DutyCommand[] = [];
    if (!this.active) return out;
    for (const [sessionId, s] of this.sessions) {
      if (nowMs > s.deadlineMs && nowMs >= s.retryAtMs) {
        s.retryAtMs = nowMs + DUTY_RETRY_MS;
        out.push({ kind: 'ExpireSession', sessionId: sessionId as SessionId });
      }
    }
    for (const w of this.waits.values()) {
      if (nowMs >= w.deadlineMs && nowMs >= w.retryAtMs) {
        w.retryAtMs = nowMs + DUTY_RETRY_MS;
        out.push({ kind: 'CancelWait', sessionId: w.sessionId, name: w.name, requestId: w.requestId, reason: 'timed-out' });
      }
    }
    return out;
  }
}
