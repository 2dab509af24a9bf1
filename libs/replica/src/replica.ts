/**
 * One replica: the Raft core, its durable log store and a state machine,
 * composed over an injected environment. The cell node and the simulator run
 * this same code; only the environment differs.
 *
 * The core is callback-based (no promises) so the simulator decides, in
 * virtual time, when every persist completes and every callback runs; see
 * `proposeAsync` / `readIndexAsync` for the promise wrappers the cell node uses.
 *
 * Opening. A replica opens in two steps: the constructor wires fields and
 * reads what the store recovered, and calls nothing back; `open()` then
 * restores the snapshot into the state machine and replays the committed
 * entries above it. The owner (a group member composing the machine with
 * its own layer) finishes building itself between the two, so no apply or
 * restore ever reaches a half-built object.
 *
 * Ordering. `handleOneReady()` is the one function that orders a ready's
 * effects: persist entries and hard state (fsync) → send messages → apply
 * committed entries → advance. At most one ready is in flight; the core
 * keeps stepping meanwhile and batches what arrives into the next one
 * (group commit at the Raft level). Three reorderings, as etcd makes them,
 * drop waits that protect nothing; each is argued where it is made.
 *
 * Messages from the network go through the core's checks (message-check.ts
 * in @fencer/raft): a malformed or misaddressed one is dropped and counted
 * by reason, never asserted on.
 */
import {
  type Clock,
  type LogIndex,
  type NodeId,
  type Result,
  type Term,
  AssertionError,
  ErrorCode,
  FencerError,
  assert,
  assertUint,
  err,
  ok,
} from '@fencer/base';
import {
  type ConfChange,
  type ConfState,
  type DropReason,
  type Entry,
  type Message,
  type RaftBug,
  type RaftConfig,
  type RaftNode,
  type RaftTuning,
  type HardState,
  type Ready,
  type Snapshot,
  type SoftState,
  type Status,
  EntryType,
  MessageType,
  applyConfChange,
  createRaftNode,
  decodeConfChange,
  raftTuning,
} from '@fencer/raft';
import type { RaftLogStore } from '@fencer/wal';
import { type Logger, type Metrics, type ReplicaEnv, noopLogger, noopMetrics } from './env.js';
import { pendingProposalsMax, pendingReadsMax, proposalBytesMax, readTimeoutTicksDefault, snapshotEveryEntriesDefault } from './limits.js';
import type { StateMachine } from './state-machine.js';

/**
 * Bugs a test may put back in: the core's (RaftConfig.bugs) and the
 * replica's own, which only the `testing` export can plant (see testing.ts).
 */
export type ReplicaBug = RaftBug | 'ackBeforeFsync';

export interface ReplicaConfig {
  readonly id: NodeId;
  /** Bootstrap membership when the store is empty (a node joining an existing cell passes none). */
  readonly peers?: readonly NodeId[];
  readonly learners?: readonly NodeId[];
  /** Overrides of the core's tuning; everything else is `raftTuningDefault` from @fencer/raft. */
  readonly raft?: Partial<RaftTuning>;
  /** Take a state-machine snapshot (and compact the log below it) every this many applied entries. */
  readonly snapshotEveryEntries?: number;
  /** A ReadIndex request unanswered after this many ticks fails with DEADLINE_EXCEEDED. */
  readonly readTimeoutTicks?: number;
  /**
   * Test-only: the core's known bugs put back in. Off in production. The
   * replica's own, ackBeforeFsync, is refused here: only the `testing`
   * export's replica can plant it.
   */
  readonly bugs?: Partial<Record<ReplicaBug, boolean>>;
}

/** What a successful proposal receives: where its entry landed and what the state machine returned. */
export interface Applied {
  readonly index: LogIndex;
  readonly term: Term;
  readonly result: unknown;
}

export type ProposeCallback = (outcome: Result<Applied, FencerError>) => void;
/** A read may be served once the callback runs: the state machine has applied at least `index`. */
export type ReadCallback = (outcome: Result<LogIndex, FencerError>) => void;

interface PendingProposal {
  readonly index: LogIndex;
  readonly term: Term;
  readonly done: ProposeCallback;
}

interface PendingRead {
  readonly ctx: string;
  readonly startTick: number;
  /** Known once the core reports the read state. */
  index: LogIndex | null;
  readonly done: ReadCallback;
}

/** How much of a ready must reach the disk before its messages leave. */
type Durability =
  /** Nothing new to write. */
  | 'none'
  /** Only the commit index moved: it is written with the next ready that must be synced. */
  | 'commit-only'
  /** Entries, a snapshot, or a new term or vote: written and fsynced before anything that depends on them. */
  | 'sync';

/** One ready, sorted into what may go before its fsync and what must wait for it. */
interface ReadyPlan {
  readonly rd: Ready;
  /** The term the ready's soft state belongs to. */
  readonly term: Term;
  readonly durability: Durability;
  readonly sendBeforeSync: readonly Message[];
  readonly sendAfterSync: readonly Message[];
  readonly applyBeforeSync: readonly Entry[];
  readonly applyAfterSync: readonly Entry[];
}

export class Replica {
  readonly id: NodeId;
  private readonly raft: RaftNode;
  private readonly logger: Logger;
  private readonly metrics: Metrics;
  private readonly clock: Clock;
  private readonly snapshotEveryEntries: number;
  private readonly readTimeoutTicks: number;
  /** The core's tuning in force: `raftTuningDefault` with ReplicaConfig.raft on top. */
  readonly raftTuning: RaftTuning;

  /**
   * open() has run: it runs once, before anything drives the replica (tick,
   * receive, propose, read), so the state machine has its snapshot before
   * the core hands it an entry.
   */
  private opened = false;
  private stoppedFlag = false;
  /** Set while a ready's persist is in flight: the core gets no new ready() until it completes. */
  private persistInFlight = false;
  /** Guards handleReady against re-entry from synchronous store callbacks. */
  private handlingReady = false;
  private snapshotInFlight = false;

  /** Index of the last entry handed to the state machine (or installed by snapshot). Only grows within a life. */
  private appliedIndex: LogIndex;
  /** Index of the latest snapshot this replica stored or installed. */
  private snapshotIndex: LogIndex;
  /**
   * Membership as of appliedIndex: the latest snapshot's, then every applied
   * ConfChange (the bootstrap membership is the log's first entries).
   */
  private appliedConf: ConfState;
  private softState: SoftState = { leader: null, role: 'follower' };
  /** The term as of the last ready taken (the core may be ahead while a persist is in flight). */
  private readyTerm: Term;
  /** Term and vote as last handed to the store: a ready that changes either must be durable before anything is sent. */
  private savedTerm: Term;
  private savedVote: NodeId | null;
  /** A commit-only hard state not written yet: saved with the next ready that must be synced. */
  private unsavedHardState: HardState | undefined;
  private ticks = 0;
  private nextReadId = 0;
  /** Messages from the network dropped unhandled, by reason. */
  private readonly dropped = new Map<DropReason, number>();

  private readonly proposals = new Map<number, PendingProposal>();
  private readonly reads = new Map<string, PendingRead>();
  /** User callbacks are run after the ready window closes, so a callback may propose again. */
  private completions: (() => void)[] = [];

  constructor(
    config: ReplicaConfig,
    private readonly store: RaftLogStore,
    private readonly stateMachine: StateMachine,
    private readonly env: ReplicaEnv,
  ) {
    this.id = config.id;
    this.logger = env.logger ?? noopLogger;
    this.metrics = env.metrics ?? noopMetrics;
    this.clock = env.clock;
    this.snapshotEveryEntries = config.snapshotEveryEntries ?? snapshotEveryEntriesDefault;
    this.readTimeoutTicks = config.readTimeoutTicks ?? readTimeoutTicksDefault;
    assert(this.snapshotEveryEntries > 0, 'snapshotEveryEntries must be positive');
    assert(this.readTimeoutTicks > 0, 'readTimeoutTicks must be positive');
    const { ackBeforeFsync, ...raftBugs } = config.bugs ?? {};
    assert(
      ackBeforeFsync !== true,
      'the ackBeforeFsync bug is planted only by the testing export (createReplica from @fencer/replica/testing)',
    );

    // Restart: the core starts from the latest snapshot (open() restores the
    // state machine to it); the core then hands back committed entries above it.
    const snapshot = store.snapshot();
    const { hardState } = store.initialState();
    this.snapshotIndex = snapshot.meta.index;
    this.appliedIndex = snapshot.meta.index;
    // Without a snapshot the log from index 1 (bootstrap entries first) replays every change.
    this.appliedConf = snapshot.meta.index > 0 ? snapshot.meta.conf : { voters: [], learners: [] };
    assertUint(hardState.commit, 'recovered commit index');
    this.readyTerm = hardState.term;
    this.savedTerm = hardState.term;
    this.savedVote = hardState.vote;

    this.raftTuning = raftTuning(config.raft);
    const raftConfig: RaftConfig = {
      id: config.id,
      ...(config.peers ? { peers: config.peers } : {}),
      ...(config.learners ? { learners: config.learners } : {}),
      ...this.raftTuning,
      storage: store,
      random: env.random.fork(),
      applied: this.appliedIndex,
      bugs: raftBugs,
    };
    this.raft = createRaftNode(raftConfig);
  }

  /**
   * Brings the state machine up to what the store recovered: restores the
   * latest snapshot, then runs the first ready, which replays the committed
   * entries above it (and may send and persist, as any ready does). Called
   * once, by the owner, after it has finished building whatever the state
   * machine's callbacks reach; before it, nothing has been called back.
   */
  open(): void {
    assert(!this.opened, 'a replica opens once');
    this.opened = true;
    if (this.stoppedFlag) return;
    // The snapshot first: the replay below starts at the entry after it, and
    // appliedIndex (set from it at construction) already says so.
    const snapshot = this.store.snapshot();
    assert(snapshot.meta.index === this.snapshotIndex, 'the store keeps the snapshot it recovered until the replica opens');
    if (snapshot.meta.index > 0) this.stateMachine.restore(snapshot.data);
    const hardState = this.store.initialState().hardState;
    this.logger.info(
      { id: this.id, term: hardState.term, commit: hardState.commit, snapshotIndex: this.snapshotIndex, lastIndex: this.store.lastIndex() },
      'replica started',
    );
    // A restarted replica may have committed entries to replay right away.
    this.handleReady();
  }

  // ---- driving from outside ----

  /** One logical clock tick (heartbeat and election timing are counted in ticks). */
  tick(): void {
    if (this.stoppedFlag) return;
    this.ticks++;
    this.raft.tick();
    this.expireReads();
    this.handleReady();
  }

  /**
   * A message from a peer. Returns null when the core took it, or why it
   * was dropped (counted in `droppedMessages` and the metric
   * replica_messages_dropped_total{reason}). Nothing a peer sends throws.
   */
  receive(message: Message): DropReason | null {
    if (this.stoppedFlag) return null;
    const dropped = this.raft.step(message);
    if (dropped !== null) {
      this.noteDropped(message, dropped);
      return dropped;
    }
    this.handleReady();
    return null;
  }

  /**
   * Proposes a command. `done` runs once the entry is applied (with the state
   * machine's result) or fails (at once, before propose returns, when refused
   * outright): NOT_LEADER when this replica cannot take it,
   * OUTCOME_UNKNOWN once it was handed to Raft but leadership was lost, the
   * entry overwritten or the replica stopped.
   */
  propose(data: Uint8Array, done: ProposeCallback): void {
    if (data.byteLength === 0) {
      // Empty data is the leader's blank entry; the state machine never sees one.
      return this.later(done, err(new FencerError(ErrorCode.INVALID_ARGUMENT, 'a command must not be empty')));
    }
    if (data.byteLength > proposalBytesMax) {
      return this.later(
        done,
        err(new FencerError(ErrorCode.INVALID_ARGUMENT, `a command is at most ${proposalBytesMax} bytes, got ${data.byteLength}`)),
      );
    }
    this.proposeWith(() => this.raft.propose(data), done);
  }

  /** Proposes a membership change (one server at a time); `done` gets the membership after it as result. */
  proposeConfChange(change: ConfChange, done: ProposeCallback): void {
    this.proposeWith(() => this.raft.proposeConfChange(change), done);
  }

  /** A linearizable read barrier (ReadIndex): `done` runs once applied ≥ the leader's confirmed commit index. */
  readIndex(done: ReadCallback): void {
    const refusal = this.refusal();
    if (refusal) return this.later(done, err(refusal));
    if (this.reads.size >= pendingReadsMax) {
      return this.later(done, err(new FencerError(ErrorCode.TOO_MANY_REQUESTS, `more than ${pendingReadsMax} reads pending`)));
    }
    const ctx = `${this.id}/${this.nextReadId++}`;
    this.reads.set(ctx, { ctx, startTick: this.ticks, index: null, done });
    this.metrics.inc('replica_reads_total');
    if (!this.raft.readIndex(ctx)) {
      // Refused at once: leadership was lost since the last ready, or the core's read queue is full.
      this.reads.delete(ctx);
      const refused =
        this.raft.status().role === 'leader'
          ? new FencerError(ErrorCode.TOO_MANY_REQUESTS, 'too many reads queued at the leader; retry')
          : this.notLeader();
      return this.later(done, err(refused));
    }
    this.handleReady();
  }

  /** Asks the leader to hand leadership to `to` (a no-op on a follower). */
  transferLeadership(to: NodeId): void {
    if (this.stoppedFlag) return;
    this.raft.transferLeadership(to);
    this.handleReady();
  }

  /** Starts an election now (operators and tests). */
  campaign(): void {
    if (this.stoppedFlag) return;
    this.raft.campaign();
    this.handleReady();
  }

  /** The transport lost its connection to a peer. */
  reportUnreachable(to: NodeId): void {
    if (this.stoppedFlag) return;
    this.raft.reportUnreachable(to);
    this.handleReady();
  }

  /**
   * The transport saw its connection to `peer` closed or reset by the other
   * side (not a timeout): if `peer` is the leader, this follower starts a
   * pre-vote at once (docs/decisions/0021-crash-detection-by-the-transport.md).
   */
  reportConnectionLost(peer: NodeId): void {
    if (this.stoppedFlag) return;
    this.raft.reportConnectionLost(peer);
    this.handleReady();
  }

  /**
   * Stops the replica: pending proposals fail with OUTCOME_UNKNOWN and reads
   * with SHUTTING_DOWN, and later store callbacks are ignored. The store
   * stays open (see close) so a simulator may crash it instead.
   */
  stop(): void {
    if (this.stoppedFlag) return;
    this.stoppedFlag = true;
    this.failProposals(() => new FencerError(ErrorCode.OUTCOME_UNKNOWN, 'the replica stopped before the entry applied'));
    this.failReads(() => new FencerError(ErrorCode.SHUTTING_DOWN, 'the replica is stopping'));
    this.flushCompletions();
  }

  /** Stops, then closes the store; `done` fires when its file handles are released. */
  close(done: (error: Error | null) => void): void {
    this.stop();
    this.store.close(done);
  }

  // ---- inspection ----

  get stopped(): boolean {
    return this.stoppedFlag;
  }

  get applied(): LogIndex {
    return this.appliedIndex;
  }

  /** Membership as of the applied index (committed). */
  get conf(): ConfState {
    return this.appliedConf;
  }

  get isLeader(): boolean {
    return this.softState.role === 'leader';
  }

  get leader(): NodeId | null {
    return this.softState.leader;
  }

  get pendingProposals(): number {
    return this.proposals.size;
  }

  /** Messages from the network dropped unhandled since start, by reason. */
  get droppedMessages(): ReadonlyMap<DropReason, number> {
    return this.dropped;
  }

  status(): Status {
    return this.raft.status();
  }

  // ---- the one ready loop ----

  /** Drains the core's readies, one in flight at a time. */
  private handleReady(): void {
    // Whatever reaches the core (tick, receive, propose, read, campaign...) drains here: the first ready is open()'s.
    assert(this.opened, 'a replica is opened before anything drives it');
    if (this.handlingReady) return;
    this.handlingReady = true;
    try {
      while (!this.stoppedFlag && !this.persistInFlight && this.raft.hasReady()) this.handleOneReady(this.raft.ready());
    } finally {
      this.handlingReady = false;
    }
    this.flushCompletions();
  }

  /**
   * The one function that orders a ready's effects:
   *   1. persist entries, snapshot and hard state, and wait for the fsync;
   *   2. send messages;
   *   3. install the snapshot, apply committed entries, serve reads;
   *   4. advance the core.
   * Three reorderings move work ahead of step 1's wait where the wait
   * protects nothing; planReady decides which messages and entries qualify.
   */
  private handleOneReady(rd: Ready): void {
    const plan = this.planReady(rd);
    // Reordering 1: a leader's AppendEntries and Heartbeats leave while its
    // own fsync runs (Raft dissertation §10.2.1). They acknowledge nothing:
    // the core counts the leader's own log toward commitment only in
    // advance(), after the fsync (Raft.onPersisted), so a commit still needs
    // a majority of durable copies.
    this.send(plan.sendBeforeSync);
    // Reordering 2: a leader applies committed entries that were already on
    // disk here before this ready while its fsync runs, so its answers to
    // clients wait for one fsync, not two. Each entry is still applied only
    // once durable here, and only after it committed on a majority.
    this.applyEntries(plan.applyBeforeSync);
    const afterPersist = (): void => {
      this.send(plan.sendAfterSync);
      this.applyReady(plan);
      this.advanceReady(plan);
    };
    switch (plan.durability) {
      case 'none':
        afterPersist();
        return;
      case 'commit-only':
        // Reordering 3: a ready whose only durable change is the commit index
        // costs no write and no fsync (etcd's MustSync): its hard state goes
        // to disk with the next ready that must be synced. The commit index
        // needs no fsync for safety: a replica that restarts with an older
        // one re-learns it from the leader, a snapshot above it counts as
        // committed, and the entries being applied are already durable on
        // the majority that committed them.
        this.unsavedHardState = rd.hardState;
        afterPersist();
        return;
      case 'sync': {
        this.persistInFlight = true;
        const startedMs = this.clock.monoMs();
        this.persistReady(rd, () => this.persistReadyDone(startedMs, afterPersist));
        return;
      }
    }
  }

  /**
   * Sorts a ready: what it needs from the disk, and which of its messages
   * and committed entries may go ahead of that (reorderings 1 and 2). Every
   * message waits when the ready changes term or vote (a vote must be
   * durable before it is granted) or carries a snapshot; a follower's
   * answers always wait, since they acknowledge its log.
   */
  private planReady(rd: Ready): ReadyPlan {
    const hs = rd.hardState;
    // A term change always comes with a hard state: this is the term the ready's soft state belongs to.
    if (hs !== undefined) this.readyTerm = hs.term;
    const termOrVoteChanged = hs !== undefined && (hs.term !== this.savedTerm || hs.vote !== this.savedVote);
    if (hs !== undefined) {
      this.savedTerm = hs.term;
      this.savedVote = hs.vote;
    }
    const mustSync = rd.snapshot !== undefined || rd.entries.length > 0 || termOrVoteChanged;
    const durability: Durability = mustSync ? 'sync' : hs !== undefined ? 'commit-only' : 'none';
    const leaderMayOvertake = durability === 'sync' && rd.snapshot === undefined && this.leadsThrough(rd);
    const sendBeforeSync = leaderMayOvertake && !termOrVoteChanged ? rd.messages.filter(isLeaderOutbound) : [];
    // A follower applies after its answer to the leader has left: the commit waits for that answer.
    const applyBeforeSync = leaderMayOvertake && this.committedAlreadyDurable(rd) ? rd.committedEntries : [];
    return {
      rd,
      term: this.readyTerm,
      durability,
      sendBeforeSync,
      sendAfterSync: sendBeforeSync.length === 0 ? rd.messages : rd.messages.filter((m) => !isLeaderOutbound(m)),
      applyBeforeSync,
      applyAfterSync: applyBeforeSync.length === 0 ? rd.committedEntries : [],
    };
  }

  /** The ready's fsync completed: run the rest of its order, then keep draining. */
  private persistReadyDone(startedMs: number, afterPersist: () => void): void {
    this.metrics.observe('replica_persist_ms', this.clock.monoMs() - startedMs);
    this.persistInFlight = false;
    // Hold user callbacks (and so any re-entrant propose) until advance() has run.
    const wasHandling = this.handlingReady;
    this.handlingReady = true;
    try {
      afterPersist();
    } finally {
      this.handlingReady = wasHandling;
    }
    // Completed asynchronously: keep draining. (A synchronous completion
    // lands inside handleReady's loop, whose guard makes this a no-op.)
    this.handleReady();
  }

  /** Step 3: the state machine catches up with the ready. */
  private applyReady(plan: ReadyPlan): void {
    if (plan.rd.snapshot) this.installSnapshot(plan.rd.snapshot);
    this.applyEntries(plan.applyAfterSync);
    this.noteReadStates(plan.rd);
  }

  /** Step 4: the core learns the ready is handled; then the replica's own follow-ups. */
  private advanceReady(plan: ReadyPlan): void {
    this.noteSoftState(plan.rd.softState, plan.term);
    this.raft.advance();
    this.maybeSnapshot();
  }

  /**
   * Whether every committed entry of the ready sits below its new entries:
   * whatever the ready does not hand out to persist was made durable by an
   * earlier ready (one is in flight at a time), so those entries are on disk.
   */
  private committedAlreadyDurable(rd: Ready): boolean {
    const last = rd.committedEntries[rd.committedEntries.length - 1];
    const first = rd.entries[0];
    return last !== undefined && (first === undefined || last.index < first.index);
  }

  /** Leader before and after this ready (a ready that makes or unmakes the leader keeps the strict order). */
  private leadsThrough(rd: Ready): boolean {
    return this.softState.role === 'leader' && (rd.softState === undefined || rd.softState.role === 'leader');
  }

  /**
   * Writes a ready's snapshot, hard state and entries; `persisted` runs once
   * all of it is durable. Protected only so that the testing export can
   * plant the ackBeforeFsync bug in a subclass.
   */
  protected persistReady(rd: Ready, persisted: () => void): void {
    let waiting = 1;
    const done = (error: Error | null): void => {
      if (this.stoppedFlag) return;
      if (error) return this.fatal(error);
      waiting--;
      assert(waiting >= 0, 'a persist completed twice');
      if (waiting === 0) persisted();
    };
    if (rd.snapshot) {
      waiting++;
      this.store.saveSnapshot(rd.snapshot, done);
    }
    const hardState = rd.hardState ?? this.unsavedHardState;
    this.unsavedHardState = undefined;
    if (hardState !== undefined || rd.entries.length > 0) {
      waiting++;
      this.store.save(hardState, rd.entries, done);
    }
    done(null);
  }

  private noteDropped(message: Message, reason: DropReason): void {
    this.dropped.set(reason, (this.dropped.get(reason) ?? 0) + 1);
    this.metrics.inc('replica_messages_dropped_total', 1, { reason });
    const from: unknown = (message as { from?: unknown } | null)?.from;
    this.logger.debug({ id: this.id, reason, from: typeof from === 'string' ? from.slice(0, 64) : typeof from }, 'dropped a peer message');
  }

  private send(messages: readonly Message[]): void {
    if (messages.length === 0) return;
    this.metrics.inc('replica_messages_sent_total', messages.length);
    this.env.transport.send(messages);
  }

  private installSnapshot(snapshot: Snapshot): void {
    const { index } = snapshot.meta;
    if (index <= this.appliedIndex) {
      // The core handed an old snapshot; the state machine is already past it.
      this.logger.warn({ id: this.id, index, applied: this.appliedIndex }, 'ignoring a snapshot at or below applied');
      return;
    }
    this.stateMachine.restore(snapshot.data);
    this.appliedIndex = index;
    this.appliedConf = snapshot.meta.conf;
    this.snapshotIndex = index;
    this.metrics.inc('replica_snapshots_installed_total');
    this.env.observer?.snapshotInstalled?.(snapshot.meta);
    this.logger.info({ id: this.id, index, term: snapshot.meta.term }, 'installed snapshot');
    // Proposals at or below the snapshot never reached our state machine.
    for (const [at, p] of this.proposals) {
      if (at > index) continue;
      this.proposals.delete(at);
      this.later(p.done, err(new FencerError(ErrorCode.OUTCOME_UNKNOWN, 'a snapshot replaced the entry before it applied here')));
    }
  }

  private applyEntries(entries: readonly Entry[]): void {
    for (const entry of entries) {
      if (entry.index <= this.appliedIndex) continue; // Already covered by an installed snapshot.
      if (entry.index !== this.appliedIndex + 1) throw new AssertionError(`apply out of order: ${entry.index} after ${this.appliedIndex}`);
      let result: unknown = undefined;
      if (entry.type === EntryType.ConfChange) {
        // Our own copy of the membership as of the applied index (the core's may already sit past it,
        // at a snapshot it accepted but we have not installed yet); the proposer gets the new one.
        this.appliedConf = applyConfChange(this.appliedConf, decodeConfChange(entry.data));
        result = this.appliedConf;
      } else if (entry.data.byteLength > 0) {
        result = this.stateMachine.apply(entry);
      }
      this.appliedIndex = entry.index;
      this.env.observer?.applied?.(entry, result);
      const p = this.proposals.get(entry.index);
      if (p) {
        this.proposals.delete(entry.index);
        if (p.term === entry.term) {
          this.later(p.done, ok({ index: entry.index, term: entry.term, result }));
        } else {
          this.later(
            p.done,
            err(new FencerError(ErrorCode.OUTCOME_UNKNOWN, `entry ${entry.index} of term ${p.term} was overwritten by term ${entry.term}`)),
          );
        }
      }
    }
    if (entries.length > 0) this.metrics.inc('replica_applied_entries_total', entries.length);
    this.serveReads();
  }

  private noteReadStates(rd: Ready): void {
    for (const rs of rd.readStates) {
      const read = this.reads.get(rs.requestCtx);
      if (!read) continue; // Timed out or failed meanwhile.
      read.index = rs.index;
    }
    this.serveReads();
  }

  private serveReads(): void {
    if (this.reads.size === 0) return;
    for (const [ctx, read] of this.reads) {
      if (read.index === null || read.index > this.appliedIndex) continue;
      this.reads.delete(ctx);
      this.later(read.done, ok(read.index));
    }
  }

  private noteSoftState(soft: SoftState | undefined, term: Term): void {
    if (!soft) return;
    const wasLeader = this.softState.role === 'leader';
    this.softState = soft;
    if (wasLeader && soft.role !== 'leader') {
      this.logger.info({ id: this.id, leader: soft.leader }, 'lost leadership');
      this.failProposals(() => new FencerError(ErrorCode.OUTCOME_UNKNOWN, 'leadership was lost before the entry applied'));
      this.failReads(
        () => new FencerError(ErrorCode.NOT_LEADER, 'leadership was lost before the read was confirmed', soft.leader ?? undefined),
      );
    } else if (!wasLeader && soft.role === 'leader') {
      this.logger.info({ id: this.id }, 'became leader');
    }
    this.env.observer?.softStateChanged?.(soft, term);
  }

  /** Index of the latest snapshot this replica stored or installed (0 when none). */
  get latestSnapshotIndex(): LogIndex {
    return this.snapshotIndex;
  }

  /**
   * Takes a snapshot now (operators: before a risky change, or to compact a
   * long log) unless one is being written; `done` gets its index and size
   * once it is durable.
   */
  snapshotNow(done: (outcome: Result<{ index: LogIndex; bytes: number }, FencerError>) => void): void {
    if (this.stoppedFlag) return this.later(done, err(new FencerError(ErrorCode.SHUTTING_DOWN, 'the replica is stopping')));
    if (this.snapshotInFlight)
      return this.later(done, err(new FencerError(ErrorCode.TOO_MANY_REQUESTS, 'a snapshot is being written; try again shortly')));
    if (this.appliedIndex === this.snapshotIndex) {
      return this.later(done, ok({ index: this.snapshotIndex, bytes: this.store.snapshot().data.byteLength }));
    }
    this.takeSnapshot((bytes) => done(ok({ index: this.snapshotIndex, bytes })));
  }

  /** Snapshot policy: every snapshotEveryEntries applied entries, one in flight at a time. */
  private maybeSnapshot(): void {
    if (this.snapshotInFlight || this.appliedIndex - this.snapshotIndex < this.snapshotEveryEntries) return;
    this.takeSnapshot(() => {});
  }

  private takeSnapshot(durable: (bytes: number) => void): void {
    const index = this.appliedIndex;
    const snapshot: Snapshot = {
      meta: { index, term: this.store.term(index), conf: this.appliedConf },
      data: this.stateMachine.snapshot(),
    };
    this.snapshotInFlight = true;
    this.snapshotIndex = index;
    this.metrics.inc('replica_snapshots_taken_total');
    this.store.saveSnapshot(snapshot, (error) => {
      if (this.stoppedFlag) return;
      if (error) return this.fatal(error);
      this.snapshotInFlight = false;
      durable(snapshot.data.byteLength);
    });
  }

  // ---- proposals and reads bookkeeping ----

  private proposeWith(append: () => LogIndex | null, done: ProposeCallback): void {
    const refusal = this.refusal();
    if (refusal) return this.later(done, err(refusal));
    if (this.proposals.size >= pendingProposalsMax) {
      return this.later(done, err(new FencerError(ErrorCode.TOO_MANY_REQUESTS, `more than ${pendingProposalsMax} proposals pending`)));
    }
    const index = append();
    if (index === null) {
      // Not leader (or a leadership transfer is under way).
      return this.later(done, err(this.notLeader()));
    }
    assertUint(index, 'proposal index');
    const term = this.raft.status().term;
    if (this.proposals.has(index)) throw new AssertionError(`two proposals at index ${index}`);
    this.proposals.set(index, { index, term, done });
    this.metrics.inc('replica_proposals_total');
    this.handleReady();
  }

  private refusal(): FencerError | null {
    if (this.stoppedFlag) return new FencerError(ErrorCode.SHUTTING_DOWN, 'the replica is stopped');
    if (this.softState.role !== 'leader') return this.notLeader();
    return null;
  }

  private notLeader(): FencerError {
    const leader = this.softState.leader;
    return leader === null || leader === this.id
      ? new FencerError(ErrorCode.NO_LEADER, 'no leader is known')
      : new FencerError(ErrorCode.NOT_LEADER, `${leader} is the leader`, leader);
  }

  private expireReads(): void {
    if (this.reads.size === 0) return;
    for (const [ctx, read] of this.reads) {
      if (this.ticks - read.startTick < this.readTimeoutTicks) continue;
      this.reads.delete(ctx);
      this.later(read.done, err(new FencerError(ErrorCode.DEADLINE_EXCEEDED, 'the read was not confirmed in time')));
    }
  }

  private failProposals(error: () => FencerError): void {
    for (const p of this.proposals.values()) this.later(p.done, err(error()));
    this.proposals.clear();
  }

  private failReads(error: () => FencerError): void {
    for (const r of this.reads.values()) this.later(r.done, err(error()));
    this.reads.clear();
  }

  /**
   * Queues a user callback. Inside the ready loop it waits for the loop's end
   * (so a callback may propose again safely); elsewhere it runs at once,
   * before the call that refused returns.
   */
  private later<T>(done: (outcome: T) => void, outcome: T): void {
    this.completions.push(() => done(outcome));
    this.flushCompletions();
  }

  private flushCompletions(): void {
    if (this.handlingReady) return;
    while (this.completions.length > 0) {
      const batch = this.completions;
      this.completions = [];
      for (const run of batch) run();
    }
  }

  private fatal(error: Error): void {
    this.logger.error({ id: this.id, error: error.message }, 'storage failed; stopping');
    this.stop();
    if (this.env.onFatal) this.env.onFatal(error);
    else throw error instanceof AssertionError ? error : new AssertionError(`storage failed: ${error.message}`);
  }
}

/** Messages a leader sends that acknowledge nothing, so they may leave before its own fsync. */
function isLeaderOutbound(m: Message): boolean {
  return m.type === MessageType.AppendEntries || m.type === MessageType.Heartbeat;
}

/** Promise wrapper for the cell node. The simulator uses the callbacks directly (promises resolve in microtasks). */
export function proposeAsync(replica: Replica, data: Uint8Array): Promise<Applied> {
  return new Promise((resolve, reject) => {
    replica.propose(data, (outcome) => (outcome.ok ? resolve(outcome.value) : reject(outcome.error)));
  });
}

export function proposeConfChangeAsync(replica: Replica, change: ConfChange): Promise<Applied> {
  return new Promise((resolve, reject) => {
    replica.proposeConfChange(change, (outcome) => (outcome.ok ? resolve(outcome.value) : reject(outcome.error)));
  });
}

export function readIndexAsync(replica: Replica): Promise<LogIndex> {
  return new Promise((resolve, reject) => {
    replica.readIndex((outcome) => (outcome.ok ? resolve(outcome.value) : reject(outcome.error)));
  });
}
