/**
 * One replica of a lock cell: @fencer/group's GroupCore (replica, proposals,
 * read barrier, leadership, member directory) with the lock layer on top.
 * This file composes the layer's parts, each in its own file:
 * - apply-stream.ts: the lock state machine as the group's adapter, and
 *   what follows each applied command or restored snapshot;
 * - leader-duties.ts: the leader's session, wait and lock-delay deadlines
 *   on the monotonic clock, proposed from tick();
 * - request-api.ts: call() (validate, serve on the leader or forward),
 *   with held-acquire.ts for Acquire and waiting-calls.ts for held calls;
 * - heartbeats.ts: KeepAlive batches behind the leader's confirmation
 *   round, relayed by followers (heartbeat-relay.ts);
 * - watches.ts: Watch over the hub (watch-hub.ts), linearizable from now.
 *
 * Everything is callbacks over the injected environment, never promises or
 * real timers, so the simulator runs this very class on virtual time.
 */
import { type FencerError, type NodeId, assert } from '@fencer/base';
import { type Cancel, type Done, GroupCore } from '@fencer/group';
import type { Applied } from '@fencer/replica';
import type { RaftLogStore } from '@fencer/wal';
import { type Command, type LockState, type LockStateMachine, encodeCommand } from '@fencer/lock-fsm';
import { ApplyStream } from './apply-stream.js';
import type { LockCellConfig, LockCellTestHooks } from './config.js';
import type { CellEnv } from './env.js';
import { HeldAcquires } from './held-acquire.js';
import { Heartbeats } from './heartbeats.js';
import { type DutyCommand, LeaderDuties, waitKey } from './leader-duties.js';
import { namespaceOfSessionId } from '@fencer/contract';
import { type CallContext, type CallDone, type LeaderForwarder, RequestApi } from './request-api.js';
import { refusal } from './auth.js';
import { WaitingCalls } from './waiting-calls.js';
import { NamespaceMoves } from './namespace-moves.js';
import type { WatchSink } from './watch-hub.js';
import { type WatchRequest, Watches } from './watches.js';
import type { CellMethod, HeartbeatAnswer, RequestOf, ResponseOf } from './wire.js';

export class LockCell {
  readonly core: GroupCore;
  /** The leader's deadlines: active exactly while this replica leads (asserted on every tick). */
  private readonly duties = new LeaderDuties();
  /** Held-open Acquire calls: only ever on the leader, since stepping down answers them all (asserted on every tick). */
  private readonly waits: WaitingCalls;
  private readonly stream: ApplyStream;
  private readonly watches: Watches;
  private readonly requests: RequestApi;
  private readonly heartbeats: Heartbeats;
  private readonly hooks: LockCellTestHooks;
  /** Tenant moves as this replica sees them (namespace-moves.ts). */
  readonly moves = new NamespaceMoves();
  private ticksSinceStats = 0;

  constructor(
    readonly config: LockCellConfig,
    store: RaftLogStore,
    readonly env: CellEnv,
    forwarder: LeaderForwarder,
    hooks: LockCellTestHooks = {},
  ) {
    this.hooks = hooks;
    this.waits = new WaitingCalls(config.waitingCallsMax);
    const fsm = (): LockStateMachine => this.stream.fsm;
    // The group calls nothing back until open() below: the adapter and the events may reach parts built after it.
    this.core = new GroupCore(
      config,
      store,
      {
        apply: (entry) => this.stream.apply(entry),
        snapshot: () => this.stream.snapshot(),
        restore: (data) => this.stream.restore(data),
      },
      env,
      {
        becameLeader: () => this.stream.seedDuties(),
        steppedDown: () => {
          this.duties.stepDown();
          this.waits.resolveAll({ kind: 'leadership-lost' });
        },
      },
      hooks.makeReplica,
    );
    const core = this.core;
    this.watches = new Watches({ config, env, core, fsm, requests: () => this.requests });
    this.stream = new ApplyStream({
      config,
      env,
      hooks,
      core,
      duties: this.duties,
      waits: this.waits,
      watches: this.watches,
      moves: this.moves,
    });
    const acquires = new HeldAcquires({ env, hooks, core, waits: this.waits, fsm, propose: (command) => this.propose(command, () => {}) });
    const refusal = (namespace: string, token: string | undefined): FencerError | undefined => this.refusal(namespace, token);
    this.requests = new RequestApi({ config, env, hooks, core, forwarder, acquires, fsm, refusal });
    this.heartbeats = new Heartbeats({ config, env, hooks, core, duties: this.duties, moves: this.moves, forwarder, fsm });
    // Last, with every part built: the replica restores its snapshot and replays its log through the stream.
    this.core.open();
  }

  /** The lock state as applied here (replaced whole when a snapshot is restored). */
  get fsm(): LockStateMachine {
    return this.stream.fsm;
  }

  get id(): NodeId {
    return this.config.id;
  }

  get isLeader(): boolean {
    return this.core.isLeader;
  }

  leaderAddress(): string | undefined {
    return this.core.leaderAddress();
  }

  /** Advances Raft one tick, proposes the leader's passed deadlines, sends watch PROGRESS, reports metrics. */
  tick(): void {
    const now = this.env.clock.monoMs();
    this.core.tick();
    assert(this.duties.isActive === this.isLeader, 'the leader, and only the leader, keeps the deadlines');
    assert(this.waits.size === 0 || this.isLeader, 'held Acquires live only on the leader');
    if (this.isLeader) for (const command of this.duties.due(now)) this.proposeDuty(command);
    this.watches.hub.tick(now);
    this.env.metrics.raftStatus(() => {
      const st = this.core.replica.status();
      return {
        term: st.term,
        commit: st.commit,
        applied: this.core.replica.applied,
        isLeader: this.isLeader,
        watchers: this.watches.hub.watcherCount,
      };
    });
    if (++this.ticksSinceStats >= Math.max(1, Math.round(1000 / this.config.tickMs))) {
      this.ticksSinceStats = 0;
      this.env.metrics.tableSizes(() => this.fsmStats());
    }
  }

  /** Proposes a command; `done` gets where it landed and the state machine's outcome once applied here. */
  propose(command: Command, done: Done<Applied>): void {
    this.core.propose(encodeCommand(command), done);
  }

  /**
   * Serves one unary call: validated here, then run on the leader or
   * forwarded to it (request-api.ts). Returns a cancel for a caller that
   * gives up (a held Acquire then withdraws its wait).
   */
  call<M extends CellMethod>(method: M, request: RequestOf<M>, ctx: CallContext, done: CallDone<ResponseOf<M>>): Cancel {
    return this.requests.call(method, request, ctx, done);
  }

  /** Heartbeats for a batch of sessions: after a confirmation round on the leader, relayed from a follower (heartbeats.ts). */
  /**
   * Why `token` may not call `namespace` on this replica now (auth.ts), by its
   * applied copy of the namespace's hashes; undefined when it may, or when the
   * cell runs without auth.
   */
  refusal(namespace: string, token: string | undefined): FencerError | undefined {
    return refusal({ auth: this.config.auth, clock: this.env.clock, autoClaim: this.config.autoClaim }, this.fsm, namespace, token);
  }

  heartbeat(sessionIds: readonly string[], ctx: CallContext, done: Done<HeartbeatAnswer[]>): Cancel {
    return this.heartbeats.heartbeat(sessionIds, ctx, done);
  }

  /** Starts a Watch on this replica, linearizable from now wherever it runs (watches.ts). */
  watch(req: WatchRequest, sink: WatchSink, started: (error: FencerError | null) => void): Cancel {
    return this.watches.watch(req, sink, started);
  }

  /** Every live lock under a prefix, ordered by name (Watch's starting SNAPSHOT). */
  allLocks(prefix: string): Generator<LockState> {
    return this.watches.allLocks(prefix);
  }

  /** Counts for status and metrics (walks the sessions and waiters: for operators, not hot paths). */
  fsmStats(): { revisionBase: number; sessions: number; locks: number; waiters: number } {
    const fsm = this.fsm;
    let sessions = 0;
    let locks = 0;
    for (const ns of fsm.namespaces()) {
      sessions += ns.sessions;
      locks += ns.locks;
    }
    let waiters = 0;
    for (const _ of fsm.waiters()) waiters++;
    return { revisionBase: fsm.revisionBase, sessions, locks, waiters };
  }

  /**
   * What is left of each wait of a frozen namespace by this leader's
   * deadlines (for a move to carry to the next cell), keyed by session and
   * request id; empty on a follower.
   */
  waitsLeft(namespace: string): Map<string, number> {
    const now = this.env.clock.monoMs();
    const left = new Map<string, number>();
    if (!this.isLeader) return left;
    for (const w of this.fsm.waiters()) {
      if (namespaceOfSessionId(w.sessionId) !== namespace) continue;
      const ms = this.duties.waitRemainingMs(now, w.sessionId, w.requestId);
      if (ms !== undefined) left.set(waitKey(w.sessionId, w.requestId), ms);
    }
    return left;
  }

  /** Ends every held call and watcher (the node is shutting down). */
  close(): void {
    this.waits.resolveAll({ kind: 'leadership-lost' });
    this.watches.hub.close();
  }

  private proposeDuty(command: DutyCommand): void {
    this.hooks.dutyProposed?.(command);
    this.propose(command, (r) => {
      if (!r.ok) this.env.logger.debug({ kind: command.kind, code: r.error.code }, 'leader duty proposal did not land; retried later');
    });
  }
}
