/**
 * A follower's relay of its own clients' heartbeats to the leader, batched
 * as a session proxy batches them: the heartbeats that arrive close
 * together leave as one HeartbeatBatch, and the leader's answer is split
 * back to each caller.
 *
 * When a batch leaves:
 * - nothing in flight to the batch's destination: `windowMs` after its
 *   first heartbeat (heartbeats arriving in the same burst join it);
 * - a batch in flight to that destination: as soon as that call returns
 *   (answered, failed or timed out), so one batch per destination is at the
 *   leader at a time and the next gathers everything that arrived meanwhile
 *   (under load a batch is as large as one relay round trip's arrivals);
 * - at once when it holds `batchSessionsMax` sessions.
 * The destination is resolved when the batch leaves: after a leader change
 * the pending batch goes to the new leader, and a call still in flight to
 * the old one does not hold it back.
 *
 * Safety: a caller is answered only from the leader's answer to the batch
 * that carried its heartbeat (the leader confirms it still leads after the
 * batch arrived), so the relay never claims a lease the leader did not
 * extend. A session heartbeated by several callers of one batch is sent
 * once and each caller gets the same answer. A failed or timed-out batch
 * answers every caller still waiting with the same error. A caller that
 * gives up is dropped (its sessions leave the pending batch unless another
 * caller asked for them); the batch goes on for the others, and a batch in
 * flight whose every caller gave up is cancelled.
 *
 * Pure: timers only through the injected `after`.
 */
import { FencerError, assert, err, ok } from '@fencer/base';
import type { Cancel, Done } from '@fencer/group';
import type { HeartbeatAnswer } from './wire.js';

/** Where a batch goes when it leaves. */
export interface RelayRoute {
  /** Batches to one key are sent one at a time (the leader's node id). */
  readonly key: string;
  /** The leader's client address: named in errors and given as the leader hint of a timeout. */
  readonly address: string;
  /** Sends one batch of distinct session ids; `done` once with one answer per id. */
  readonly send: (sessionIds: readonly string[], done: Done<HeartbeatAnswer[]>) => Cancel;
}

export interface HeartbeatRelayOptions {
  /** The cell's injected timer. */
  readonly after: (ms: number, run: () => void) => Cancel;
  /** Where a batch goes now; throws a FencerError when it cannot go anywhere (no leader known). */
  readonly route: () => RelayRoute;
  /** How long a batch gathers heartbeats when nothing is in flight to its destination. */
  readonly windowMs: number;
  /** A batch the leader does not answer within this long fails with NO_LEADER. */
  readonly timeoutMs: number;
  /** Distinct sessions in one batch. */
  readonly batchSessionsMax: number;
  /** Callers waiting on this relay (pending and in flight); beyond it TOO_MANY_REQUESTS. */
  readonly waitingMax: number;
}

interface Caller {
  readonly sessionIds: readonly string[];
  readonly done: Done<HeartbeatAnswer[]>;
  /** Answered, or gave up: never called again. */
  over: boolean;
  batch: Batch;
}

interface Batch {
  readonly callers: Caller[];
  /** Distinct session ids, in arrival order, with how many waiting callers asked for each. */
  readonly sessions: Map<string, number>;
  /** Callers not yet answered nor given up. */
  live: number;
  state: 'pending' | 'in-flight' | 'over';
  key: string;
  cancelCall: Cancel;
  cancelTimer: Cancel;
}

const newBatch = (): Batch => ({
  callers: [],
  sessions: new Map(),
  live: 0,
  state: 'pending',
  key: '',
  cancelCall: () => {},
  cancelTimer: () => {},
});

export class HeartbeatRelay {
  private pending: Batch = newBatch();
  private windowTimer: Cancel | undefined;
  /** Batches in flight per destination key. */
  private readonly inFlight = new Map<string, number>();
  /** Callers pending or in flight, not yet answered nor given up. */
  private waitingCount = 0;

  constructor(private readonly options: HeartbeatRelayOptions) {
    assert(options.batchSessionsMax >= 1 && options.waitingMax >= 1, 'a relay holds at least one session and one caller');
    assert(options.windowMs >= 0 && options.timeoutMs > 0, 'a relay window of 0 ms or more and a positive timeout');
  }

  /** Callers waiting for an answer (pending or in flight). */
  get waiting(): number {
    return this.waitingCount;
  }

  /** Batches sent and not yet returned. */
  get batchesInFlight(): number {
    let n = 0;
    for (const count of this.inFlight.values()) n += count;
    return n;
  }

  /**
   * Relays heartbeats for `sessionIds` (at most batchSessionsMax of them);
   * `done` gets one answer per id, in the same order, or the batch's error.
   * The returned cancel gives up without touching the other callers.
   */
  relay(sessionIds: readonly string[], done: Done<HeartbeatAnswer[]>): Cancel {
    const { batchSessionsMax, waitingMax } = this.options;
    assert(sessionIds.length <= batchSessionsMax, `a caller relays at most ${batchSessionsMax} sessions`);
    if (this.waitingCount >= waitingMax) {
      done(err(new FencerError('TOO_MANY_REQUESTS', `${waitingMax} heartbeats are already waiting for the leader on this replica`)));
      return () => {};
    }
    if (this.pending.sessions.size + this.newSessions(sessionIds) > batchSessionsMax) this.flush();
    const batch = this.pending;
    const caller: Caller = { sessionIds, done, over: false, batch };
    batch.callers.push(caller);
    batch.live++;
    this.waitingCount++;
    for (const id of sessionIds) batch.sessions.set(id, (batch.sessions.get(id) ?? 0) + 1);
    assert(batch.sessions.size <= batchSessionsMax, 'a pending batch never exceeds the batch limit');
    if (batch.sessions.size === batchSessionsMax) this.flush();
    else this.sendWhenDue(false);
    return () => this.giveUp(caller);
  }

  /** Session ids of `sessionIds` the pending batch does not hold yet. */
  private newSessions(sessionIds: readonly string[]): number {
    const seen = this.pending.sessions;
    if (sessionIds.length === 1) return seen.has(sessionIds[0]!) ? 0 : 1;
    return new Set(sessionIds.filter((id) => !seen.has(id))).size;
  }

  /**
   * Sends the pending batch now (`now`), or when it is due: after the window
   * when nothing is in flight to its destination, else when that call returns.
   */
  private sendWhenDue(now: boolean): void {
    if (this.pending.live === 0) return;
    let key: string | undefined;
    try {
      key = this.options.route().key;
    } catch (e) {
      if (!(e instanceof FencerError)) throw e;
      // No destination: flush() answers every caller with the same error.
    }
    if (key !== undefined && (this.inFlight.get(key) ?? 0) > 0) return;
    if (now) return this.flush();
    if (this.windowTimer !== undefined) return;
    this.windowTimer = this.options.after(this.options.windowMs, () => {
      this.windowTimer = undefined;
      this.sendWhenDue(true);
    });
  }

  /** Sends the pending batch (if anyone still waits on it) to where the route says now. */
  private flush(): void {
    this.windowTimer?.();
    this.windowTimer = undefined;
    const batch = this.pending;
    this.pending = newBatch();
    if (batch.live === 0) return;
    let route: RelayRoute;
    try {
      route = this.options.route();
    } catch (e) {
      if (!(e instanceof FencerError)) throw e;
      batch.state = 'over';
      return this.answer(batch, err(e));
    }
    batch.state = 'in-flight';
    batch.key = route.key;
    this.inFlight.set(route.key, (this.inFlight.get(route.key) ?? 0) + 1);
    const { timeoutMs } = this.options;
    batch.cancelTimer = this.options.after(timeoutMs, () => {
      batch.cancelCall();
      this.returned(
        batch,
        err(new FencerError('NO_LEADER', `heartbeat relay to ${route.address} got no answer within ${timeoutMs} ms`, route.address)),
      );
    });
    // The leader path may answer synchronously: the batch is in flight before the call.
    const cancelCall = route.send([...batch.sessions.keys()], (r) => this.returned(batch, r));
    if (batch.state === 'in-flight') batch.cancelCall = cancelCall;
  }

  /** A batch in flight came back (or timed out, or every caller gave up): answer it, then send what gathered meanwhile. */
  private returned(batch: Batch, outcome: Parameters<Done<HeartbeatAnswer[]>>[0] | null): void {
    if (batch.state !== 'in-flight') return;
    batch.state = 'over';
    batch.cancelTimer();
    const left = (this.inFlight.get(batch.key) ?? 0) - 1;
    assert(left >= 0, `a batch returned from ${batch.key} with none in flight there`);
    if (left === 0) this.inFlight.delete(batch.key);
    else this.inFlight.set(batch.key, left);
    if (outcome !== null) this.answer(batch, outcome);
    this.sendWhenDue(true);
  }

  /** Splits the leader's answer (or its error) back to every caller still waiting. */
  private answer(batch: Batch, outcome: Parameters<Done<HeartbeatAnswer[]>>[0]): void {
    let byId: Map<string, HeartbeatAnswer> | undefined;
    if (outcome.ok) {
      byId = new Map();
      for (const a of outcome.value) byId.set(a.sessionId, a);
    }
    for (const caller of batch.callers) {
      if (caller.over) continue;
      caller.over = true;
      batch.live--;
      this.waitingCount--;
      if (!byId) {
        caller.done(outcome);
        continue;
      }
      const answers: HeartbeatAnswer[] = [];
      let missing: string | undefined;
      for (const id of caller.sessionIds) {
        const a = byId.get(id);
        if (a === undefined) missing ??= id;
        else answers.push(a);
      }
      if (missing === undefined) caller.done(ok(answers));
      else
        caller.done(
          err(
            new FencerError(
              'INTERNAL',
              `the leader's answer to a relayed heartbeat batch has no entry for session "${missing.slice(0, 80)}"`,
            ),
          ),
        );
    }
    assert(batch.live === 0, 'every caller of an answered batch is over');
  }

  private giveUp(caller: Caller): void {
    if (caller.over) return;
    caller.over = true;
    const batch = caller.batch;
    batch.live--;
    this.waitingCount--;
    if (batch.state === 'pending') {
      for (const id of caller.sessionIds) {
        const n = batch.sessions.get(id)! - 1;
        if (n === 0) batch.sessions.delete(id);
        else batch.sessions.set(id, n);
      }
      if (batch.live === 0 && batch === this.pending) {
        this.windowTimer?.();
        this.windowTimer = undefined;
        this.pending = newBatch();
      }
      return;
    }
    if (batch.state === 'in-flight' && batch.live === 0) {
      batch.cancelCall();
      this.returned(batch, null);
    }
  }
}
