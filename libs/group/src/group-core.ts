/**
 * One Raft group member, whatever its state machine. It owns the Replica
 * (raft + log store + the machine's adapter), the proposal and read-barrier
 * plumbing with its metrics, the leadership observer, and the member
 * directory. A state-machine layer (the lock cell, or the control plane's
 * meta group) composes one of these, hands it its StateMachine adapter,
 * hears about leadership through GroupEvents, and calls `open()` once it is
 * fully built.
 *
 * Linearizable reads share ReadIndex rounds (read-index-rounds.ts): one
 * round in flight, and every read that arrives meanwhile waits for the next
 * one (which begins after it arrived, so it sees every write committed
 * before it).
 */
import { FencerError, type LogIndex, type NodeId, type Result, ok } from '@fencer/base';
import type { ConfChange } from '@fencer/raft';
import { type Applied, Replica, type ReplicaConfig, type ReplicaEnv, type StateMachine } from '@fencer/replica';
import type { RaftLogStore } from '@fencer/wal';
import type { GroupEnv } from './env.js';
import { MemberDirectory } from './member-directory.js';
import { ReadIndexRounds } from './read-index-rounds.js';

export interface GroupConfig {
  readonly id: NodeId;
  /** Node id → client address of the initial members (this node included unless it joins). */
  readonly peers: ReadonlyMap<NodeId, string>;
  /** Joins a running group: starts empty and learns the membership by replication. */
  readonly join: boolean;
  /** The replica's settings (Raft tuning, snapshot cadence, read timeout; test-only bugs stay unset in production). */
  readonly replica: Omit<ReplicaConfig, 'id' | 'peers' | 'learners'>;
  /** Linearizable reads waiting for the next ReadIndex round on this node. */
  readonly readsWaitingMax: number;
  readonly defaultPeerAddress: (address: string) => string;
}

/** What the state-machine layer hears from the group, always after the replica reported it. */
export interface GroupEvents {
  becameLeader(): void;
  steppedDown(): void;
}

export type Done<T> = (outcome: Result<T, FencerError>) => void;

/**
 * Builds the replica, constructed but not opened (GroupCore.open opens it);
 * tests pass `createReplica` from `@fencer/replica/testing` to plant
 * replica-level bugs.
 */
export type ReplicaFactory = (config: ReplicaConfig, store: RaftLogStore, machine: StateMachine, env: ReplicaEnv) => Replica;
const plainReplica: ReplicaFactory = (config, store, machine, env) => new Replica(config, store, machine, env);

export class GroupCore {
  readonly replica: Replica;
  readonly members: MemberDirectory;
  private readonly readRounds: ReadIndexRounds;
  private wasLeader = false;
  private lastLeader: NodeId | null = null;

  constructor(
    readonly config: GroupConfig,
    store: RaftLogStore,
    machine: StateMachine,
    private readonly env: GroupEnv,
    private readonly events: GroupEvents,
    makeReplica: ReplicaFactory = plainReplica,
  ) {
    this.members = new MemberDirectory({ peers: config.peers, defaultPeerAddress: config.defaultPeerAddress });
    this.readRounds = new ReadIndexRounds((done) => this.replica.readIndex((r) => done(r.ok ? null : r.error)), config.readsWaitingMax);
    const peers = config.join ? undefined : [...config.peers.keys()];
    const extra = env.observer;
    this.replica = makeReplica({ id: config.id, ...(peers ? { peers } : {}), ...config.replica }, store, machine, {
      clock: env.clock,
      random: env.random,
      transport: { send: (m) => env.send(m) },
      logger: env.logger,
      metrics: env.metrics.replica,
      onFatal: env.onFatal,
      observer: {
        softStateChanged: (soft, term) => {
          extra?.softStateChanged?.(soft, term);
          this.leadershipMaybeChanged();
        },
        applied: (entry, result) => extra?.applied?.(entry, result),
        snapshotInstalled: (meta) => extra?.snapshotInstalled?.(meta),
      },
    });
  }

  /**
   * Opens the replica: restores its snapshot and replays the committed
   * entries above it through the adapter, which may reach every part of the
   * state-machine layer and GroupEvents. So the layer calls this last, once
   * it has built everything they touch (the constructor above built the
   * replica without calling anything back).
   */
  open(): void {
    this.replica.open();
  }

  get id(): NodeId {
    return this.config.id;
  }

  get isLeader(): boolean {
    return this.replica.isLeader;
  }

  /** The leader as this replica knows it (null: none known). */
  get leader(): NodeId | null {
    return this.replica.leader;
  }

  /** The current leader's client address, when known. */
  leaderAddress(): string | undefined {
    const leader = this.replica.leader;
    return leader ? this.members.addressOf(leader) : undefined;
  }

  tick(): void {
    this.replica.tick();
  }

  /** Proposes an encoded command; `done` gets where it landed and the machine's outcome once applied here. */
  propose(data: Uint8Array, done: Done<Applied>): void {
    const startedMs = this.env.clock.monoMs();
    this.replica.propose(data, (r) => {
      this.env.metrics.proposed(r.ok ? 'applied' : r.error.code, r.ok ? (this.env.clock.monoMs() - startedMs) / 1000 : null);
      done(r);
    });
  }

  proposeConfChange(change: ConfChange, done: Done<LogIndex>): void {
    this.replica.proposeConfChange(change, (r) => done(r.ok ? ok(r.value.index) : r));
  }

  /**
   * A linearizable read barrier: `done(null)` once this leader confirmed it
   * still leads (one ReadIndex round begun after this call) and applied the
   * commit index it noted; an error otherwise (NOT_LEADER, TOO_MANY_REQUESTS...).
   */
  readBarrier(done: (error: FencerError | null) => void): void {
    const startedMs = this.env.clock.monoMs();
    const queued = this.readRounds.confirm((error) => {
      if (error) return done(error instanceof FencerError ? error : new FencerError('NO_LEADER', error.message));
      this.env.metrics.readConfirmed((this.env.clock.monoMs() - startedMs) / 1000);
      done(null);
    });
    if (!queued) done(new FencerError('TOO_MANY_REQUESTS', 'too many reads waiting for a ReadIndex round on this node; retry later'));
  }

  /** The most up-to-date other voter (leadership transfer target). */
  bestTransferTarget(): NodeId | undefined {
    const st = this.replica.status();
    let best: NodeId | undefined;
    let bestMatch = -1;
    for (const [id, p] of Object.entries(st.progress ?? {})) {
      if (id === this.id || !st.voters.includes(id as NodeId)) continue;
      if (p.match > bestMatch) {
        bestMatch = p.match;
        best = id as NodeId;
      }
    }
    return best;
  }

  /** Takes a state-machine snapshot now and compacts the log below it. */
  snapshotNow(done: Done<{ index: LogIndex; bytes: number }>): void {
    this.replica.snapshotNow(done);
  }

  private leadershipMaybeChanged(): void {
    const leader = this.replica.leader;
    if (leader !== this.lastLeader) {
      this.env.metrics.leaderChanged();
      this.env.logger.info({ leader, term: this.replica.status().term }, 'leader changed');
      this.lastLeader = leader;
    }
    const isLeader = this.isLeader;
    const was = this.wasLeader;
    this.wasLeader = isLeader;
    if (isLeader && !was) this.events.becameLeader();
    else if (!isLeader && was) this.events.steppedDown();
  }
}
