/**
 * KeepAlive heartbeats for batches of sessions.
 *
 * On the leader a batch is answered only after the leader has confirmed it
 * still leads: one ReadIndex round begun after the batch arrived, shared by
 * every batch that arrived before it began (@fencer/group's
 * ReadIndexRounds, spaced by heartbeatRoundSpacingMs). A deposed leader
 * that has not noticed yet therefore never acknowledges a heartbeat: a
 * client's lease, counted from when it sent the heartbeat, ends no later
 * than the fresh TTL a new leader grants at its election, so the client
 * never believes in a session the cell may expire
 * (docs/decisions/0001-heartbeats-are-never-logged.md).
 *
 * On a follower a batch joins the relay's next batch to the leader
 * (heartbeat-relay.ts), and the caller gets its share of the leader's
 * answer; a relayed batch is never relayed again.
 */
import { FencerError, SessionId, err, ok } from '@fencer/base';
import { type Cancel, type Done, type GroupCore, ReadIndexRounds } from '@fencer/group';
import type { LockStateMachine } from '@fencer/lock-fsm';
import type { LockCellConfig, LockCellTestHooks } from './config.js';
import type { CellEnv } from './env.js';
import { HeartbeatRelay, type RelayRoute } from './heartbeat-relay.js';
import type { LeaderDuties } from './leader-duties.js';
import {
  FORWARD_TIMEOUT_MS,
  HEARTBEATS_WAITING_MAX,
  HEARTBEAT_BATCH_SESSIONS_MAX,
  HEARTBEAT_RELAY_WAITING_MAX,
  HEARTBEAT_RELAY_WINDOW_MS,
} from './limits.js';
import { type CallContext, type LeaderForwarder, leaderTarget } from './request-api.js';
import type { HeartbeatAnswer } from './wire.js';
import type { NamespaceMoves } from './namespace-moves.js';
import { namespaceOfSessionId } from '@fencer/contract';

/**
 * The session's namespace moved out of this cell (its tombstone): this cell
 * cannot say the session expired, only that it no longer keeps it. A session
 * proxy whose routing table still points here learns the new cell and asks
 * there (docs/decisions/0019-the-move-worker.md).
 */
function movedOut(fsm: LockStateMachine, sessionId: string): boolean {
  const ns = namespaceOfSessionId(sessionId);
  return ns !== undefined && fsm.namespaceState(ns) === 'moved';
}

/**
 * The session's namespace is frozen here as a move's source: its lease is
 * not extended (no TTL, not expired). The export may be taken already, and
 * the target gives each imported session a full TTL from its import, so an
 * extension acknowledged here could promise more than the target keeps (the
 * moves simulation's early-expiry checker found this). The client retries;
 * after the switch its heartbeats reach the target, whose frozen import
 * does extend them.
 */
function sourceFrozen(fsm: LockStateMachine, moves: NamespaceMoves, sessionId: string): boolean {
  const ns = namespaceOfSessionId(sessionId);
  return ns !== undefined && fsm.namespaceState(ns) === 'frozen' && !moves.frozenKeepsLeases(ns);
}

export interface HeartbeatsParts {
  readonly config: LockCellConfig;
  readonly env: CellEnv;
  readonly hooks: LockCellTestHooks;
  readonly core: GroupCore;
  readonly duties: LeaderDuties;
  readonly moves: NamespaceMoves;
  readonly forwarder: LeaderForwarder;
  /** The lock state as applied here now. */
  readonly fsm: () => LockStateMachine;
}

export class Heartbeats {
  /** The leader's confirmation rounds: a batch is answered after one that began after it arrived. */
  private readonly confirmations: ReadIndexRounds;
  /** A follower's batches of its own clients' heartbeats to the leader. */
  private readonly relay: HeartbeatRelay;

  constructor(private readonly parts: HeartbeatsParts) {
    const { config, env, core } = parts;
    this.confirmations = new ReadIndexRounds((done) => core.replica.readIndex((r) => done(r.ok ? null : r.error)), HEARTBEATS_WAITING_MAX, {
      spacingMs: config.heartbeatRoundSpacingMs,
      nowMs: () => env.clock.monoMs(),
      after: (ms, run) => void env.after(ms, run),
    });
    this.relay = new HeartbeatRelay({
      after: (ms, run) => env.after(ms, run),
      route: () => this.relayRoute(),
      windowMs: HEARTBEAT_RELAY_WINDOW_MS,
      timeoutMs: FORWARD_TIMEOUT_MS,
      batchSessionsMax: HEARTBEAT_BATCH_SESSIONS_MAX,
      waitingMax: HEARTBEAT_RELAY_WAITING_MAX,
    });
  }

  /** Heartbeats for a batch of sessions: confirmed and recorded on the leader, relayed to it from a follower. */
  heartbeat(sessionIds: readonly string[], ctx: CallContext, done: Done<HeartbeatAnswer[]>): Cancel {
    if (sessionIds.length > HEARTBEAT_BATCH_SESSIONS_MAX) {
      done(err(new FencerError('INVALID_ARGUMENT', `at most ${HEARTBEAT_BATCH_SESSIONS_MAX} sessions per heartbeat batch`)));
      return () => {};
    }
    if (this.parts.core.isLeader) {
      this.onLeader(sessionIds, done);
      return () => {};
    }
    try {
      leaderTarget(this.parts.core, ctx);
    } catch (e) {
      done(err(e as FencerError));
      return () => {};
    }
    return this.relay.relay(sessionIds, (r) => {
      if (r.ok) this.parts.env.metrics.heartbeatsAnswered('relayed', r.value.length);
      done(r);
    });
  }

  private onLeader(sessionIds: readonly string[], done: Done<HeartbeatAnswer[]>): void {
    if (this.parts.hooks.heartbeatWithoutConfirmation === true) return done(ok(this.record(sessionIds)));
    const queued = this.confirmations.confirm((error) => {
      if (error)
        return done(
          err(error instanceof FencerError ? error : new FencerError('NOT_LEADER', error.message, this.parts.core.leaderAddress())),
        );
      done(ok(this.record(sessionIds)));
    });
    if (!queued) done(err(new FencerError('TOO_MANY_REQUESTS', 'too many heartbeats waiting for confirmation')));
  }

  /**
   * Where the relay's next batch goes: the leader this replica knows of, or
   * this replica itself if it has become the leader since the heartbeats
   * arrived (they then take this leader's confirmation round, as if sent here).
   */
  private relayRoute(): RelayRoute {
    const { core, forwarder } = this.parts;
    if (core.isLeader) {
      return {
        key: core.id,
        address: core.leaderAddress() ?? core.id,
        send: (sessionIds, done) => {
          this.onLeader(sessionIds, done);
          return () => {};
        },
      };
    }
    const target = leaderTarget(core, { forwarded: false });
    return {
      key: target.id,
      address: target.address,
      send: (sessionIds, done) => forwarder.heartbeats(target.id, target.address, sessionIds, done),
    };
  }

  /**
   * After the confirmation round this leader has applied everything
   * committed before the heartbeats: "expired" is said only of a session
   * gone from that state (its locks released). One whose expiry is proposed
   * but not applied gets no TTL and is not yet called expired.
   */
  private record(sessionIds: readonly string[]): HeartbeatAnswer[] {
    const { env, duties, fsm, moves } = this.parts;
    const now = env.clock.monoMs();
    env.metrics.heartbeatsAnswered('leader', sessionIds.length);
    return sessionIds.map((id) => {
      if (sourceFrozen(fsm(), moves, id)) return { sessionId: id, ttlMsRemaining: 0, expired: false };
      const remaining = duties.heartbeat(now, SessionId(id));
      if (remaining !== undefined) return { sessionId: id, ttlMsRemaining: remaining, expired: false };
      return { sessionId: id, ttlMsRemaining: 0, expired: fsm().getSession(id) === undefined && !movedOut(fsm(), id) };
    });
  }
}
