/**
 * One cell node: the replica (raft + WAL + lock state machine) with the
 * leader's duties, the watch hub, held-open calls and the peer transport.
 * The gRPC services (lock-service.ts, admin-service.ts) sit on top of it.
 */
import {
  type Clock,
  FencerError,
  type LogIndex,
  NodeId,
  type Random,
  type RequestId,
  type SessionId,
  assert,
} from '@fencer/base';
import type { ConfChange, Entry } from '@fencer/raft';
import { type Applied, Replica, type StateMachine } from '@fencer/replica';
import type { RaftLogStore } from '@fencer/wal';
import {
  type Command,
  LeaderDuties,
  LockStateMachine,
  decodeCommand,
  encodeCommand,
  type LockEvent,
  type Outcome,
  type LockState,
  LIST_LOCKS_LIMIT_MAX,
  isFailure,
} from '@fencer/lock-fsm';
import { WatchHub } from './watch-hub.js';
import { WaitingCalls } from './waiting-calls.js';
import { type ConfirmerTiming, HeartbeatConfirmer } from './heartbeat-confirmer.js';
import type { CellNodeConfig } from './config.js';
import type { Logger } from './logger.js';
import type { NodeMetrics } from './metrics.js';
import { shiftPort } from './address.js';

export interface NodeEnv {
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger;
  readonly metrics: NodeMetrics;
  /** Hands Raft messages to the peer transport. */
  readonly send: (messages: readonly import('@fencer/raft').Message[]) => void;
  /** The replica hit a storage error: the process must exit (never retry an fsync). */
  readonly onFatal: (error: Error) => void;
  /** Runs `run` once after `ms` (spaced confirmation rounds). */
  readonly after: (ms: number, run: () => void) => void;
}

/** The lock state machine as the replica sees it, feeding every applied entry to the node. */
class FsmAdapter implements StateMachine {
  constructor(private readonly node: CellNode) {}

  apply(entry: Entry): unknown {
    const command = decodeCommand(entry.data);
    const applied = this.node.fsm.apply(entry.index, command);
    this.node.afterApply(command, applied.outcome, applied.events, applied.revision);
    return applied.outcome;
  }

  snapshot(): Uint8Array {
    return this.node.fsm.snapshot();
  }

  restore(data: Uint8Array): void {
    this.node.fsm = LockStateMachine.restore(data, { autoClaim: !this.node.config.managed });
    this.node.afterRestore();
  }
}

export class CellNode {
  fsm: LockStateMachine;
  readonly replica: Replica;
  readonly hub: WatchHub;
  readonly duties = new LeaderDuties();
  readonly waits: WaitingCalls;
  readonly heartbeats: HeartbeatConfirmer;
  /**
   * Linearizable reads share ReadIndex rounds the same way: one round in
   * flight, and every read that arrives meanwhile waits for the next one
   * (which begins after it arrived, so it sees every write committed before
   * it). One round per read meant one heartbeat broadcast and one reply from
   * every follower per CheckToken.
   */
  readonly readRounds: HeartbeatConfirmer;
  /** Node id → gRPC address of every member this node knows: --peers, then the replicated member directory. */
  readonly addresses: Map<NodeId, string>;
  /** Node id → Raft peer address, for members the replicated directory names (others: derived from --peers). */
  readonly peerAddresses = new Map<NodeId, string>();
  private readonly log: Logger;
  /** Told when a member's addresses become known or change (the peer transport dials it). */
  onAddress: ((id: NodeId, address: string) => void) | undefined;
  private wasLeader = false;
  private ticksSinceStats = 0;
  private lastLeader: NodeId | null = null;

  constructor(
    readonly config: CellNodeConfig,
    store: RaftLogStore,
    readonly env: NodeEnv,
  ) {
    this.log = env.logger;
    this.fsm = new LockStateMachine({ autoClaim: !config.managed });
    this.addresses = new Map(config.peers);
    this.hub = new WatchHub({
      historyMax: config.watchHistoryMax,
      watcherBufferMax: config.watcherBufferMax,
      watchersMax: config.watchersMax,
      progressIntervalMs: config.watchProgressMs,
    });
    this.waits = new WaitingCalls(config.waitingCallsMax);
    const readIndexRound = (done: (error: Error | null) => void): void => this.replica.readIndex((r) => done(r.ok ? null : r.error));
    // Heartbeat rounds are spaced (see HeartbeatConfirmer); read rounds are not, since spacing them
    // gained nothing (docs/benchmarks.md, fifth session).
    const heartbeatTiming: ConfirmerTiming = { spacingMs: config.heartbeatRoundSpacingMs, nowMs: () => env.clock.monoMs(), after: env.after };
    this.heartbeats = new HeartbeatConfirmer(readIndexRound, 1_000_000, heartbeatTiming);
    this.readRounds = new HeartbeatConfirmer(readIndexRound, config.waitingCallsMax);
    const peers = config.join ? undefined : [...config.peers.keys()];
    this.replica = new Replica(
      {
        id: config.id,
        ...(peers ? { peers } : {}),
        raft: { electionTicks: config.electionTicks, heartbeatTicks: config.heartbeatTicks, broadcastCommit: config.broadcastCommit },
        snapshotEveryEntries: config.snapshotEveryEntries,
      },
      store,
      new FsmAdapter(this),
      {
        clock: env.clock,
        random: env.random,
        transport: { send: (m) => env.send(m) },
        logger: env.logger,
        metrics: env.metrics.replica,
        onFatal: env.onFatal,
        observer: { softStateChanged: () => this.leadershipMaybeChanged() },
      },
    );
  }

  get id(): NodeId {
    return this.config.id;
  }

  get isLeader(): boolean {
    return this.replica.isLeader;
  }

  /** The current leader's gRPC address, when known. */
  leaderAddress(): string | undefined {
    const leader = this.replica.leader;
    return leader ? this.addresses.get(leader) : undefined;
  }

  tick(): void {
    const now = this.env.clock.monoMs();
    this.replica.tick();
    if (this.isLeader) for (const command of this.duties.due(now)) this.proposeDuty(command);
    this.hub.tick(now);
    const m = this.env.metrics;
    const st = this.replica.status();
    m.term.set(st.term);
    m.commitIndex.set(st.commit);
    m.appliedIndex.set(this.replica.applied);
    m.isLeader.set(this.isLeader ? 1 : 0);
    m.watchers.set(this.hub.watcherCount);
    // Table sizes walk the waiters: refresh about once a second, not every tick.
    if (++this.ticksSinceStats >= Math.max(1, Math.round(1000 / this.config.tickMs))) {
      this.ticksSinceStats = 0;
      const stats = this.fsmStats();
      m.sessions.set(stats.sessions);
      m.locks.set(stats.locks);
      m.waiters.set(stats.waiters);
    }
  }

  /** Proposes a command; resolves with the state machine's outcome once applied. */
  propose(command: Command): Promise<{ index: LogIndex; outcome: unknown }> {
    const startedMs = this.env.clock.monoMs();
    return new Promise((resolve, reject) => {
      this.replica.propose(encodeCommand(command), (r) => {
        this.env.metrics.proposals.inc({ outcome: r.ok ? 'applied' : r.error.code });
        if (!r.ok) return reject(r.error);
        this.env.metrics.commitLatency.observe((this.env.clock.monoMs() - startedMs) / 1000);
        const applied: Applied = r.value;
        resolve({ index: applied.index, outcome: applied.result });
      });
    });
  }

  proposeConfChange(change: ConfChange): Promise<LogIndex> {
    return new Promise((resolve, reject) => this.replica.proposeConfChange(change, (r) => (r.ok ? resolve(r.value.index) : reject(r.error))));
  }

  /** A linearizable read barrier: resolves once this leader confirmed it leads and applied the commit index. */
  readBarrier(): Promise<void> {
    const startedMs = this.env.clock.monoMs();
    return new Promise((resolve, reject) => {
      const queued = this.readRounds.confirm((error) => {
        if (error) return reject(error);
        this.env.metrics.readIndexLatency.observe((this.env.clock.monoMs() - startedMs) / 1000);
        resolve();
      });
      if (!queued) reject(new FencerError('TOO_MANY_REQUESTS', 'too many reads waiting for a ReadIndex round on this node; retry later'));
    });
  }

  private proposeDuty(command: Command): void {
    this.propose(command).then(
      () => {},
      (err: FencerError) => this.log.debug({ kind: command.kind, code: err.code }, 'leader duty proposal did not land; retried later'),
    );
  }

  /** Called by the adapter after every applied command, on every replica. */
  afterApply(command: Command, outcome: Outcome, events: readonly LockEvent[], revision: number): void {
    this.hub.publish(revision, events);
    this.duties.applied(this.env.clock.monoMs(), command, outcome, events);
    if (command.kind === 'ExpireSession' && outcome.ok) this.env.metrics.expiries.inc();
    if (command.kind === 'SetMemberAddress' && outcome.ok) this.learnMember(NodeId(command.id), command.address, command.peerAddress);
    if (command.kind === 'ForgetMember' && outcome.ok) this.peerAddresses.delete(NodeId(command.id));
    for (const event of events) {
      const requestId = event.requestId;
      if (!requestId) continue;
      if (event.type === 'ACQUIRED') this.waits.resolve(event.sessionId, requestId, { kind: 'granted', token: event.token, revision: event.revision });
      else if (event.type === 'CANCELED') this.waits.resolve(event.sessionId, requestId, { kind: 'cancelled', revision: event.revision });
      else if (event.type === 'EXPIRED') this.waits.resolve(event.sessionId, requestId, { kind: 'session-gone' });
    }
  }

  /** The state machine was replaced by a snapshot (restart or InstallSnapshot). */
  afterRestore(): void {
    this.hub.reset(this.fsm.revision);
    for (const [id, m] of this.fsm.members()) this.learnMember(NodeId(id), m.address, m.peerAddress);
    // On a restart the replica restores its snapshot while it is being constructed: there is no
    // replica (and no leadership) yet.
    if (this.replica !== undefined && this.isLeader) this.seedDuties();
  }

  private seedDuties(): void {
    const now = this.env.clock.monoMs();
    this.duties.becomeLeader(now, this.fsm.sessions(), this.fsm.waiters(), this.fsm.delayedLocks());
  }

  private leadershipMaybeChanged(): void {
    const leader = this.replica.leader;
    if (leader !== this.lastLeader) {
      this.env.metrics.leaderChanges.inc();
      this.log.info({ leader, term: this.replica.status().term }, 'leader changed');
      this.lastLeader = leader;
    }
    const isLeader = this.isLeader;
    if (isLeader && !this.wasLeader) {
      // Every session, waiter and lock-delay gets a fresh full period (ARCHITECTURE "Expiry").
      this.seedDuties();
    } else if (!isLeader && this.wasLeader) {
      this.duties.stepDown();
      this.waits.resolveAll({ kind: 'leadership-lost' });
    }
    this.wasLeader = isLeader;
  }

  /** Queue position of a waiting request, for a QUEUED answer. */
  queuePosition(name: string, sessionId: SessionId, requestId: RequestId): number {
    const lock = this.fsm.getLock(name);
    const at = lock.waiters.findIndex((w) => w.sessionId === sessionId && w.requestId === requestId);
    return Math.max(0, at);
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

  /** Every live lock under a prefix, ordered by name (Watch's starting SNAPSHOT). */
  *allLocks(prefix: string): Generator<LockState> {
    let pageToken = '';
    do {
      const page = this.fsm.listLocks(prefix, LIST_LOCKS_LIMIT_MAX, pageToken);
      if (isFailure(page)) return;
      yield* page.locks;
      pageToken = page.nextPageToken;
    } while (pageToken !== '');
  }

  /** Counts for status and metrics (walks the sessions and waiters: for operators, not hot paths). */
  fsmStats(): { revisionBase: number; sessions: number; locks: number; waiters: number } {
    let sessions = 0;
    let locks = 0;
    for (const ns of this.fsm.namespaces()) {
      sessions += ns.sessions;
      locks += ns.locks;
    }
    let waiters = 0;
    for (const _ of this.fsm.waiters()) waiters++;
    return { revisionBase: this.fsm.revisionBase, sessions, locks, waiters };
  }

  /** Where a member listens for the TCP peer transport: the directory's address, else its gRPC port + the offset. */
  peerAddressOf(id: NodeId): string | undefined {
    const known = this.peerAddresses.get(id);
    if (known !== undefined) return known;
    const address = this.addresses.get(id);
    return address === undefined ? undefined : this.defaultPeerAddress(address);
  }

  /** The peer address a member at `address` has unless told otherwise (--peer-port-offset). */
  defaultPeerAddress(address: string): string {
    try {
      return shiftPort(address, this.config.peerPortOffset);
    } catch (err) {
      throw new FencerError('INVALID_ARGUMENT', `no default peer address for ${address}: ${(err as Error).message}; give peer_address`);
    }
  }

  /** A member's addresses, from the replicated directory: every replica applies the same ones. */
  private learnMember(id: NodeId, address: string, peerAddress: string): void {
    if (this.addresses.get(id) === address && this.peerAddresses.get(id) === peerAddress) return;
    this.addresses.set(id, address);
    this.peerAddresses.set(id, peerAddress);
    this.onAddress?.(id, address);
  }

  /** Takes a state-machine snapshot now and compacts the log below it. */
  snapshotNow(): Promise<{ index: LogIndex; bytes: number }> {
    return new Promise((resolve, reject) => this.replica.snapshotNow((r) => (r.ok ? resolve(r.value) : reject(r.error))));
  }

  assertInvariants(): void {
    assert(this.waits.size >= 0, 'waiting calls never negative');
  }
}
