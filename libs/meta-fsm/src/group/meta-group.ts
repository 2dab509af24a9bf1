/**
 * The meta group: one control-plane instance's member of the meta Raft
 * group. The meta state machine plugs into @fencer/group's `GroupCore` as its
 * `StateMachine` adapter, so the replica, fsync-before-acknowledge,
 * snapshots, crash recovery, shared ReadIndex rounds, the leadership observer
 * and the member directory are the very code a lock cell runs. This file adds
 * only what is the meta group's own: encoding its entries, and waiting for
 * the routing version to pass a value.
 *
 * Pure, like GroupCore: time, randomness, timers and the network come in
 * through the `GroupEnv`, so the control-plane process and the simulator run
 * this same class. Both callback (`propose`, `readBarrier`) and promise
 * (`write`, `read`) forms are offered: the HTTP app awaits, the simulator's
 * synchronous event loop cannot.
 */
import { FencerError, type NodeId } from '@fencer/base';
import {
  type Cancel,
  type Done,
  type GroupEnv,
  type GroupEvents,
  GroupCore,
  type ReplicaFactory,
  afterChained,
  noopGroupMetrics,
} from '@fencer/group';
import { noopLogger, type RaftTuning, type Replica, type ReplicaConfig, type StateMachine } from '@fencer/replica';
import type { RaftLogStore } from '@fencer/wal';
import { decodeMetaEntry, encodeMetaEntry, type MetaEntry } from '../commands.js';
import type { MetaLimits } from '../limits.js';
import { MetaStateMachine, type MetaApplied } from '../state-machine.js';
import { META_READS_WAITING_MAX, META_ROUTING_WAITERS_MAX } from './limits.js';

export interface MetaGroupConfig {
  readonly id: NodeId;
  /** Bootstrap members (this instance included) → the address clients reach them at (the control plane: its HTTP URL). */
  readonly peers: ReadonlyMap<NodeId, string>;
  readonly raft?: Partial<RaftTuning>;
  readonly snapshotEveryEntries?: number;
  /** Overrides of META_LIMITS: replicated semantics, the same on every member. */
  readonly limits?: Partial<MetaLimits>;
  /** Test-only: replica bugs put back in (the simulator's planted bugs, with `createReplica` as the factory). Unset in production. */
  readonly bugs?: ReplicaConfig['bugs'];
}

/** The group's environment: GroupEnv, with the logger and metrics sink optional (no-ops by default). */
export type MetaGroupEnv = Omit<GroupEnv, 'logger' | 'metrics'> & Partial<Pick<GroupEnv, 'logger' | 'metrics'>>;

export class MetaGroup {
  private fsm: MetaStateMachine;
  readonly core: GroupCore;
  private readonly routingWaiters = new Set<() => void>();
  /** Index of the last entry applied here (the replica's own counter moves only after the apply returns). */
  private lastApplied = 0;

  constructor(
    config: MetaGroupConfig,
    store: RaftLogStore,
    private readonly env: MetaGroupEnv,
    makeReplica?: ReplicaFactory,
  ) {
    this.fsm = new MetaStateMachine(config.limits);
    const adapter: StateMachine = {
      apply: (entry) => {
        const applied = this.fsm.apply(entry.index, decodeMetaEntry(entry.data));
        this.lastApplied = entry.index;
        this.changed();
        return applied;
      },
      snapshot: () => this.fsm.snapshot(),
      restore: (data) => {
        this.fsm = MetaStateMachine.restore(data, config.limits);
        this.changed();
      },
    };
    // The meta group has no leader-only duties: a new leader serves from the replicated state as it is.
    const events: GroupEvents = { becameLeader: () => {}, steppedDown: () => {} };
    const replica = {
      ...(config.raft ? { raft: config.raft } : {}),
      ...(config.snapshotEveryEntries ? { snapshotEveryEntries: config.snapshotEveryEntries } : {}),
      ...(config.bugs ? { bugs: config.bugs } : {}),
    };
    this.core = new GroupCore(
      { id: config.id, peers: config.peers, join: false, replica, readsWaitingMax: META_READS_WAITING_MAX, defaultPeerAddress: (a) => a },
      store,
      adapter,
      { logger: noopLogger, metrics: noopGroupMetrics, ...env },
      events,
      makeReplica,
    );
    // Last: the replica restores its snapshot and replays its log through the adapter, which needs `fsm` and the waiters.
    this.core.open();
  }

  get replica(): Replica {
    return this.core.replica;
  }

  /** The state as applied here, without a barrier (for long polls that already passed one). */
  get state(): MetaStateMachine {
    return this.fsm;
  }

  get isLeader(): boolean {
    return this.core.isLeader;
  }

  get leader(): NodeId | null {
    return this.core.leader;
  }

  /** The leader's address from the member directory (the control plane: its HTTP URL), when known. */
  leaderAddress(): string | undefined {
    return this.core.leaderAddress();
  }

  tick(): void {
    this.core.tick();
  }

  receive(message: Parameters<Replica['receive']>[0]): void {
    this.core.replica.receive(message);
  }

  /** Proposes on the leader; `done` gets the outcome once applied here (NOT_LEADER elsewhere). */
  propose(entry: MetaEntry, done: Done<MetaApplied>): void {
    this.core.propose(encodeMetaEntry(entry), (r) => done(r.ok ? { ok: true, value: r.value.result as MetaApplied } : r));
  }

  /** `done(null)` once the state here may serve a linearizable read (a ReadIndex round begun after this call). */
  readBarrier(done: (error: FencerError | null) => void): void {
    this.core.readBarrier(done);
  }

  write(entry: MetaEntry): Promise<MetaApplied> {
    return new Promise((resolve, reject) => this.propose(entry, (r) => (r.ok ? resolve(r.value) : reject(r.error))));
  }

  read(): Promise<MetaStateMachine> {
    return new Promise((resolve, reject) => this.readBarrier((error) => (error ? reject(error) : resolve(this.fsm))));
  }

  /**
   * Calls `done` once, when the routing version applied here passes
   * `sinceVersion` or after `waitMs`, whichever is first; the returned Cancel
   * drops the wait without calling `done`. Throws TOO_MANY_REQUESTS (the HTTP edge: 429 RESOURCE_EXHAUSTED) past
   * META_ROUTING_WAITERS_MAX waits.
   */
  waitRouting(sinceVersion: number, waitMs: number, done: () => void): Cancel {
    if (this.fsm.routingVersion > sinceVersion) {
      done();
      return () => {};
    }
    if (this.routingWaiters.size >= META_ROUTING_WAITERS_MAX) {
      throw new FencerError('TOO_MANY_REQUESTS', `more than ${META_ROUTING_WAITERS_MAX} routing long polls here; retry`);
    }
    let cancelTimer: Cancel = () => {};
    const cancel = (): void => {
      this.routingWaiters.delete(check);
      cancelTimer();
    };
    const check = (): void => {
      if (this.fsm.routingVersion <= sinceVersion) return;
      cancel();
      done();
    };
    this.routingWaiters.add(check);
    cancelTimer = afterChained(this.env.after, waitMs, () => {
      this.routingWaiters.delete(check);
      done();
    });
    return cancel;
  }

  /** The index of the last entry applied here (a snapshot restored counts up to its index). */
  get appliedIndex(): number {
    return Math.max(this.lastApplied, this.core.replica.applied);
  }

  /**
   * Calls `done(true)` once the state here has applied `index`, or
   * `done(false)` after `waitMs`, whichever is first: a follower serving a
   * read waits here for the index its leader's ReadIndex round confirmed.
   * Throws TOO_MANY_REQUESTS past META_ROUTING_WAITERS_MAX waits (they share
   * the routing long polls' bound).
   */
  waitApplied(index: number, waitMs: number, done: (reached: boolean) => void): Cancel {
    if (this.appliedIndex >= index) {
      done(true);
      return () => {};
    }
    if (this.routingWaiters.size >= META_ROUTING_WAITERS_MAX) {
      throw new FencerError('TOO_MANY_REQUESTS', `more than ${META_ROUTING_WAITERS_MAX} waits here; retry`);
    }
    let cancelTimer: Cancel = () => {};
    const cancel = (): void => {
      this.routingWaiters.delete(check);
      cancelTimer();
    };
    const check = (): void => {
      if (this.appliedIndex < index) return;
      cancel();
      done(true);
    };
    this.routingWaiters.add(check);
    cancelTimer = afterChained(this.env.after, waitMs, () => {
      this.routingWaiters.delete(check);
      done(false);
    });
    return cancel;
  }

  close(done: (error: Error | null) => void): void {
    this.core.replica.close((err) => done(err ?? null));
  }

  private changed(): void {
    for (const w of [...this.routingWaiters]) w();
  }
}

export function isNotLeader(e: unknown): e is FencerError {
  return e instanceof FencerError && (e.code === 'NOT_LEADER' || e.code === 'NO_LEADER');
}
