/**
 * The meta group: one control-plane instance's replica of the meta state
 * machine. It composes @fencer/replica (Raft core + WAL, fsync before any
 * acknowledgement, snapshots, crash recovery) with @fencer/meta-fsm, and is
 * the only glue between them: the HTTP app sees the `MetaStore` seam.
 *
 * Writes are proposed here on the leader; elsewhere they fail with
 * NOT_LEADER (the app forwards them to the leader's HTTP URL). Reads wait for
 * a ReadIndex round (Raft §6.4), so they are linearizable.
 */
import { type Clock, FencerError, type NodeId, type Random } from '@fencer/base';
import type { Entry, Message } from '@fencer/raft';
import { Replica, type Logger, type Metrics, type RaftTuning, type StateMachine } from '@fencer/replica';
import type { RaftLogStore } from '@fencer/wal';
import { MetaStateMachine, decodeMetaEntry, encodeMetaEntry, type MetaApplied, type MetaEntry, type MetaLimits } from '@fencer/meta-fsm';

/** What the HTTP app needs of the meta group (a test may pass a fake). */
export interface MetaStore {
  /** Proposes on the leader; resolves with the outcome once applied here. Rejects with FencerError NOT_LEADER elsewhere. */
  write(entry: MetaEntry): Promise<MetaApplied>;
  /** The state once a linearizable read may be served from it. */
  read(): Promise<MetaStateMachine>;
  /** The state as applied here, without a barrier (for long polls that already passed one). */
  readonly state: MetaStateMachine;
  readonly isLeader: boolean;
  /** The leader's id, when known. */
  readonly leader: NodeId | null;
  /** Told after every applied entry; returns the unsubscribe function. */
  onApplied(listener: () => void): () => void;
}

export interface MetaGroupConfig {
  readonly id: NodeId;
  /** Bootstrap voters (this instance included), when the log is empty. */
  readonly peers: readonly NodeId[];
  readonly raft?: Partial<RaftTuning>;
  readonly snapshotEveryEntries?: number;
  /** Overrides of META_LIMITS: replicated semantics, the same on every member. */
  readonly limits?: Partial<MetaLimits>;
}

export interface MetaGroupEnv {
  readonly clock: Clock;
  readonly random: Random;
  readonly send: (messages: readonly Message[]) => void;
  readonly logger?: Logger;
  readonly metrics?: Metrics;
  /** A storage error: the process must exit (an fsync is never retried). */
  readonly onFatal: (error: Error) => void;
}

export class MetaGroup implements MetaStore {
  private fsm: MetaStateMachine;
  readonly replica: Replica;
  private readonly listeners = new Set<() => void>();

  constructor(config: MetaGroupConfig, store: RaftLogStore, env: MetaGroupEnv) {
    this.fsm = new MetaStateMachine(config.limits);
    const adapter: StateMachine = {
      apply: (entry: Entry) => {
        const applied = this.fsm.apply(entry.index, decodeMetaEntry(entry.data));
        for (const l of this.listeners) l();
        return applied;
      },
      snapshot: () => this.fsm.snapshot(),
      restore: (data) => {
        this.fsm = MetaStateMachine.restore(data, config.limits);
        for (const l of this.listeners) l();
      },
    };
    this.replica = new Replica(
      { id: config.id, peers: config.peers, ...(config.raft ? { raft: config.raft } : {}), ...(config.snapshotEveryEntries ? { snapshotEveryEntries: config.snapshotEveryEntries } : {}) },
      store,
      adapter,
      {
        clock: env.clock,
        random: env.random,
        transport: { send: (m) => env.send(m) },
        ...(env.logger ? { logger: env.logger } : {}),
        ...(env.metrics ? { metrics: env.metrics } : {}),
        onFatal: env.onFatal,
      },
    );
  }

  get state(): MetaStateMachine {
    return this.fsm;
  }

  get isLeader(): boolean {
    return this.replica.isLeader;
  }

  get leader(): NodeId | null {
    return this.replica.leader;
  }

  tick(): void {
    this.replica.tick();
  }

  receive(message: Message): void {
    this.replica.receive(message);
  }

  write(entry: MetaEntry): Promise<MetaApplied> {
    return new Promise((resolve, reject) =>
      this.replica.propose(encodeMetaEntry(entry), (r) => (r.ok ? resolve(r.value.result as MetaApplied) : reject(r.error))),
    );
  }

  read(): Promise<MetaStateMachine> {
    return new Promise((resolve, reject) => this.replica.readIndex((r) => (r.ok ? resolve(this.fsm) : reject(r.error))));
  }

  onApplied(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  close(): Promise<void> {
    return new Promise((resolve, reject) => this.replica.close((err) => (err ? reject(err) : resolve())));
  }
}

export function isNotLeader(e: unknown): e is FencerError {
  return e instanceof FencerError && (e.code === 'NOT_LEADER' || e.code === 'NO_LEADER');
}
