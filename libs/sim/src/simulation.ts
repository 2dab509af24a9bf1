/**
 * One deterministic run: a cell of replicas (the production `Replica` over
 * the production log store on an in-memory disk), a faulty network, a
 * nemesis that injects faults, clients that write and read, and the
 * checkers. Everything random comes from one seed, and everything happens in
 * virtual time on one scheduler, so a seed replays a run exactly.
 */
import { performance } from 'node:perf_hooks';
import { type NodeId, type Random, NodeId as toNodeId, SeededRandom, assert } from '@fencer/base';
import { type ConfChange, type Entry, type HardState, type Message, type SoftState, ConfChangeType } from '@fencer/raft';
import { type ReplicaEnv, Replica } from '@fencer/replica';
import type { RaftLogStore } from '@fencer/wal';
import { type ApplyResult, type Command, LeaderDuties, type LockStateMachine, encodeCommand } from '@fencer/lock-fsm';
import { type AckedWrite, type CheckerName, type ReadBarrier, type Violation, Checkers } from './checkers.js';
import { digest } from './hash.js';
import { KV_KEYS, KvStateMachine, encodePut } from './kv.js';
import { type LockReadAnswer, type LockReadBarrier, LockCheckers } from './lock-checkers.js';
import { LockMachine } from './lock-machine.js';
import { type LockClient, type LockOp, type WaitAnswer, lockClientDied, lockWaitAnswered, lockWritten, newLockClient, nextLockOp } from './lock-workload.js';
import { type NetworkProfile, Network, faultyNetwork, messageCode, quietNetwork } from './network.js';
import { type FaultMix, type SimOptions } from './options.js';
import { PARTITION_SHAPES, cutBetween, makePartition } from './partitions.js';
import { Scheduler } from './scheduler.js';
import { type SimDisk, createSimDisk, openSimStore } from './store.js';
import { Tag } from './tags.js';

const MS = 1_000;
const SECOND = 1_000_000;
/** Most nodes a run ever creates (joiners included): a guard on membership churn. */
const nodesMax = 24;
const clientTimeoutUs = 2 * SECOND;
const clientLatencyUs = 300;
/** Chance that a lock client's process dies before an operation (outside the quiet tail); it comes back with a new session. */
const clientDeathP = 0.006;

export interface RunReport {
  readonly seed: number;
  readonly ok: boolean;
  readonly violations: readonly Violation[];
  readonly violationCount: number;
  /** Checkers that fired, in the order they first fired. */
  readonly fired: readonly CheckerName[];
  readonly traceHash: string;
  readonly simulatedSeconds: number;
  readonly realMs: number;
  readonly stats: RunStats;
}

export interface RunStats {
  events: number;
  messagesSent: number;
  messagesDropped: number;
  elections: number;
  writesAcked: number;
  writesFailed: number;
  clientTimeouts: number;
  /** Votes a node granted to a second candidate in a term (possible only if a vote was forgotten). */
  doubleVotes: number;
  /** Times a leader's commit index landed on an entry of an older term (only with the Figure 8 bug). */
  oldTermCommits: number;
  readsChecked: number;
  /** Lock machine: grants clients were told of, sessions expired and waits timed out by the leader, client deaths. */
  grantsAcked: number;
  expiries: number;
  waitsTimedOut: number;
  clientDeaths: number;
  crashes: number;
  restarts: number;
  pauses: number;
  partitions: number;
  transfers: number;
  confChanges: number;
  snapshotsInstalled: number;
  committedIndexMax: number;
  finalLeader: string | null;
  finalMembers: number;
}

type NodeState = 'starting' | 'up' | 'down' | 'removed';

class SimNode {
  state: NodeState = 'down';
  /** Bumped on every crash or removal: events of an older life are dropped. */
  life = 0;
  replica: Replica | null = null;
  store: RaftLogStore | null = null;
  machine: KvStateMachine | LockMachine | null = null;
  /** The lock machine's leader duties (deadlines of sessions and waits), and Acquire calls held open here. */
  duties: LeaderDuties | null = null;
  readonly waits = new Map<string, (answer: WaitAnswer) => void>();
  pausedUntilUs = 0;
  deferred: (() => void)[] = [];
  /** Clock rate: a drifting node ticks faster or slower than real time. */
  rate = 1;
  localMs = 0;
  localAtUs = 0;
  /** Multiplies disk latency (a slow disk). */
  diskSlowFactor = 1;
  diskFreeAtUs = 0;
  role: SoftState['role'] = 'follower';
  leaderSinceUs = 0;
  joinedAtUs = 0;
  member = true;

  constructor(
    readonly id: NodeId,
    readonly num: number,
    readonly random: Random,
    readonly disk: SimDisk,
  ) {}

  monoMs(nowUs: number): number {
    return this.localMs + ((nowUs - this.localAtUs) * this.rate) / MS;
  }

  setRate(nowUs: number, rate: number): void {
    this.localMs = this.monoMs(nowUs);
    this.localAtUs = nowUs;
    this.rate = rate;
  }
}

interface ClientState {
  readonly id: number;
  target: NodeId | null;
  /** The operation in flight (its id), or 0. */
  op: number;
  /** The lock workload's client (null with the KV machine). */
  readonly lock: LockClient | null;
  /** Where its session's heartbeats go (a node that said who leads, as a session proxy would follow). */
  heartbeatTarget: NodeId | null;
}

export class Simulation {
  readonly options: SimOptions;
  readonly scheduler = new Scheduler();
  readonly checkers: Checkers;
  readonly lockCheckers: LockCheckers;
  private readonly rootRandom: Random;
  private readonly netRandom: Random;
  private readonly nemesisRandom: Random;
  private readonly clientRandom: Random;
  private readonly spawnRandom: Random;
  private readonly network: Network;
  private readonly faulty: NetworkProfile;
  private readonly nodes = new Map<string, SimNode>();
  private readonly bootstrap: NodeId[] = [];
  private readonly endUs: number;
  private readonly quietUs: number;
  private quiet = false;
  private nextOp = 1;
  private nextWriteId = 1;
  private partitionEpoch = 0;
  private membershipBusy = false;
  private stopped = false;
  private tailAcks = 0;
  readonly stats: RunStats = {
    events: 0,
    messagesSent: 0,
    messagesDropped: 0,
    elections: 0,
    writesAcked: 0,
    writesFailed: 0,
    clientTimeouts: 0,
    doubleVotes: 0,
    oldTermCommits: 0,
    readsChecked: 0,
    grantsAcked: 0,
    expiries: 0,
    waitsTimedOut: 0,
    clientDeaths: 0,
    crashes: 0,
    restarts: 0,
    pauses: 0,
    partitions: 0,
    transfers: 0,
    confChanges: 0,
    snapshotsInstalled: 0,
    committedIndexMax: 0,
    finalLeader: null,
    finalMembers: 0,
  };

  /** Human-readable event log (the runner's --verbose); off by default. */
  private readonly log: ((line: string) => void) | undefined;

  constructor(options: SimOptions, log?: (line: string) => void) {
    this.log = log;
    assert(options.replicas >= 1 && options.replicas <= 9, 'a cell has 1 to 9 replicas');
    assert(options.quietSeconds < options.seconds, 'the quiet tail is part of the run');
    this.options = options;
    this.checkers = new Checkers(() => this.scheduler.now);
    this.lockCheckers = new LockCheckers(this.checkers);
    this.rootRandom = new SeededRandom(options.seed);
    this.netRandom = this.rootRandom.fork();
    this.nemesisRandom = this.rootRandom.fork();
    this.clientRandom = this.rootRandom.fork();
    this.spawnRandom = this.rootRandom.fork();
    this.endUs = options.seconds * SECOND;
    this.quietUs = (options.seconds - options.quietSeconds) * SECOND;
    this.network = new Network(this.scheduler, this.netRandom, (m) => this.deliver(m), (id) => this.nodes.get(id)?.num ?? 0);
    this.faulty = { ...faultyNetwork, ...options.network };
    this.network.profile = this.faulty;
    for (let i = 1; i <= options.replicas; i++) this.bootstrap.push(toNodeId(`n${i}`));
  }

  run(): RunReport {
    const started = performance.now();
    try {
      for (const id of this.bootstrap) this.start(this.addNode(id));
      for (let c = 0; c < this.options.clients; c++) {
        const client: ClientState = { id: c, target: null, op: 0, lock: this.options.machine === 'lock' ? newLockClient(c) : null, heartbeatTarget: null };
        this.startClient(client);
        if (client.lock) this.heartbeatLoop(client, client.lock);
      }
      this.scheduleNemesis();
      this.scheduler.at(this.quietUs, Tag.phase, () => this.beginQuiet());
      // A run stops at its first violation, unless the code under test only asserted: the node
      // crashed as a process would, and what follows may show what the assertion guarded.
      const finished = this.scheduler.runUntil(this.endUs, () => this.stopped || this.checkers.violationCount > this.checkers.assertionCount);
      if (finished) this.finalChecks();
    } catch (e) {
      const error = e as Error;
      this.checkers.fail('sim-error', describeError(error));
    }
    const realMs = performance.now() - started;
    this.stats.events = this.scheduler.eventsRun;
    this.stats.messagesSent = this.network.messagesSent;
    this.stats.messagesDropped = this.network.messagesDropped;
    this.stats.elections = this.checkers.electionsSeen;
    this.stats.readsChecked = this.checkers.readsChecked;
    this.stats.committedIndexMax = this.checkers.committedIndexMax;
    this.stats.grantsAcked = this.lockCheckers.grantsAcked;
    this.stats.expiries = this.lockCheckers.expiries;
    this.stats.waitsTimedOut = this.lockCheckers.waitsTimedOut;
    const fired = [...new Set(this.checkers.violations.map((v) => v.checker))];
    return {
      seed: this.options.seed,
      ok: this.checkers.violationCount === 0,
      violations: this.checkers.violations,
      violationCount: this.checkers.violationCount,
      fired,
      traceHash: this.scheduler.trace.hex(),
      simulatedSeconds: this.scheduler.now / SECOND,
      realMs,
      stats: this.stats,
    };
  }

  /** Records a notable event in the trace hash, and in the log when one is attached. */
  private note(text: string): void {
    this.scheduler.trace.str(text);
    if (this.log) this.log(`${(this.scheduler.now / SECOND).toFixed(6)} ${text}`);
  }

  // ---- nodes ----

  private addNode(id: NodeId): SimNode {
    assert(this.nodes.size < nodesMax, `more than ${nodesMax} nodes`);
    const random = this.spawnRandom.fork();
    const num = this.nodes.size + 1;
    // Filled in below: the disk's scheduler needs the node to route completions through its pauses.
    let node: SimNode | null = null;
    const disk = createSimDisk(this.options.store, random.fork(), (_op, delayMs, fn) => {
      const n = node as SimNode;
      const life = n.life;
      const latencyUs = Math.max(1, Math.round(delayMs * MS * n.diskSlowFactor));
      // One queue per disk: operations complete in the order they were issued.
      const at = Math.max(this.scheduler.now + latencyUs, n.diskFreeAtUs);
      n.diskFreeAtUs = at;
      this.scheduler.at(at, Tag.disk | (n.num << 8), () => this.onNode(n, life, fn, true));
    }, this.options.fsyncMs);
    node = new SimNode(id, num, random, disk);
    node.localAtUs = this.scheduler.now;
    node.localMs = random.range(0, 10_000_000);
    node.joinedAtUs = this.scheduler.now;
    this.nodes.set(id, node);
    return node;
  }

  /** Opens the node's store (recovering it) and starts a replica over it. */
  private start(node: SimNode): void {
    assert(node.state === 'down', `start of a ${node.state} node`);
    node.state = 'starting';
    node.life++;
    const life = node.life;
    openSimStore(node.disk, (error, store) => {
      if (node.life !== life) return;
      if (error && (error as { code?: unknown }).code === 'EIO') {
        // An injected fsync error hit recovery: the process exits, as on any fsync error, and starts again later.
        this.note(`${node.id} open failed: ${error.message}`);
        node.state = 'down';
        node.life++;
        const again = node.life;
        this.scheduler.after(this.nemesisRandom.range(200 * MS, 2 * SECOND), Tag.restart | (node.num << 8), () => {
          if (node.life === again && node.state === 'down') this.start(node);
        });
        return;
      }
      if (error || !store) {
        // The store refuses to open a disk that only lost unsynced data (or tore its last write): a real failure.
        this.checkers.fail('store-open-failed', `${node.id} failed to open its store: ${error?.message ?? 'no store'}`);
        this.stopped = true;
        return;
      }
      this.checkers.recovered(node.id, store.initialState().hardState, store.snapshot().meta.index);
      const machine = this.options.machine === 'lock' ? this.lockMachineFor(node, life) : new KvStateMachine();
      const observed = observeStore(store, node.id, this.checkers, () => node.life === life, (hs) => {
        // Diagnostic: a leader's commit index landing on an entry of an older term (Figure 8's mistake).
        if (node.role === 'leader' && hs.commit >= store.firstIndex() && hs.commit <= store.lastIndex() && store.term(hs.commit) !== hs.term) {
          this.stats.oldTermCommits++;
          this.note(`${node.id} commits (${hs.commit}, term ${store.term(hs.commit)}) in term ${hs.term}`);
        }
      });
      const env = this.envFor(node, life);
      node.store = store;
      node.machine = machine;
      node.role = 'follower';
      node.state = 'up';
      node.replica = new Replica(
        {
          id: node.id,
          // The bootstrap nodes write the first membership into the log; a
          // joiner starts empty and learns it by replication.
          ...(this.bootstrap.includes(node.id) ? { peers: this.bootstrap } : {}),
          raft: {
            electionTicks: this.options.electionTicks,
            heartbeatTicks: this.options.heartbeatTicks,
            preVote: this.options.preVote,
            checkQuorum: true,
            broadcastCommit: this.options.broadcastCommit,
            maxEntriesPerMsg: this.options.maxEntriesPerMsg,
            maxBytesPerMsg: 64 * 1024,
            maxInflightMsgs: 16,
            snapshotChunkBytes: 64,
          },
          snapshotEveryEntries: this.options.snapshotEveryEntries,
          readTimeoutTicks: 3 * this.options.electionTicks,
          bugs: this.options.bugs,
        },
        observed,
        machine,
        env,
      );
      this.scheduleTick(node, life);
    });
  }

  /**
   * The production lock state machine for one life of a node, with what the
   * cell node does after each apply: the checkers' applied history, the
   * leader's deadlines, and answers to Acquire calls held open here.
   */
  private lockMachineFor(node: SimNode, life: number): LockMachine {
    const duties = new LeaderDuties();
    node.duties = duties;
    node.waits.clear();
    const planted = this.options.planted === 'staleLockRead' ? null : this.options.planted;
    return new LockMachine(
      (command: Command, result: ApplyResult, fsm: LockStateMachine) => {
        if (node.life !== life) return;
        this.lockCheckers.applied(node.id, result.index, command, result, (name) => fsm.getLock(name));
        duties.applied(node.monoMs(this.scheduler.now), command, result.outcome, result.events);
        if (node.waits.size > 0) this.answerWaits(node, result);
      },
      (fsm) => {
        // A snapshot replaced the state (restore at start, or installed from the leader).
        if (node.life === life && node.role === 'leader') duties.becomeLeader(node.monoMs(this.scheduler.now), fsm.sessions(), fsm.waiters(), fsm.delayedLocks());
      },
      planted,
    );
  }

  /** Acquire calls held open on `node` (production's WaitingCalls), answered by the events of an applied entry. */
  private answerWaits(node: SimNode, result: ApplyResult): void {
    for (const e of result.events) {
      if (e.requestId === null) continue;
      const key = `${e.sessionId} ${e.requestId}`;
      const answer = node.waits.get(key);
      if (answer === undefined) continue;
      if (e.type === 'ACQUIRED') answer({ kind: 'granted', token: e.token });
      else if (e.type === 'CANCELED') answer({ kind: 'cancelled' });
      else if (e.type === 'EXPIRED') answer({ kind: 'session-gone' });
      else continue;
      node.waits.delete(key);
    }
  }

  /** Every call held open on `node` ends without an answer (leadership lost, or the process died). */
  private dropWaits(node: SimNode): void {
    const waits = [...node.waits.values()];
    node.waits.clear();
    for (const answer of waits) answer({ kind: 'unknown' });
  }

  private envFor(node: SimNode, life: number): ReplicaEnv {
    return {
      clock: { monoMs: () => node.monoMs(this.scheduler.now), wallMs: () => 1_700_000_000_000 + node.monoMs(this.scheduler.now) },
      random: node.random.fork(),
      transport: {
        send: (messages: readonly Message[]) => {
          if (node.life !== life) return;
          for (const m of messages) {
            assert(m.from === node.id, 'a replica sends only as itself');
            if (m.type === 'AppendEntries' || m.type === 'Heartbeat' || m.type === 'InstallSnapshot') {
              this.checkers.leaderMessage(node.id, m.term);
            } else if (m.type === 'RequestVoteResponse' && m.reject !== true) {
              this.voteGranted(node, m.to, m.term);
            }
          }
          this.network.send(messages);
        },
      },
      onFatal: (error) => {
        if (node.life !== life) return;
        // An fsync error: the process exits. Crash the node; it restarts later.
        this.crash(node, `fatal: ${error.message}`, this.nemesisRandom.range(200 * MS, 4 * SECOND));
      },
      observer: {
        softStateChanged: (soft, term) => {
          if (node.life !== life) return;
          const was = node.role;
          node.role = soft.role;
          if (soft.role !== was && this.log) this.log(`${(this.scheduler.now / SECOND).toFixed(6)} ${node.id} ${soft.role} term ${term}`);
          if (was === 'leader' && soft.role !== 'leader') {
            node.duties?.stepDown();
            this.dropWaits(node);
          }
          if (soft.role === 'leader' && was !== 'leader') {
            node.leaderSinceUs = this.scheduler.now;
            // Every session and waiter gets a fresh full period (ARCHITECTURE "Expiry").
            if (node.duties && node.machine instanceof LockMachine) {
              const fsm = node.machine.fsm;
              node.duties.becomeLeader(node.monoMs(this.scheduler.now), fsm.sessions(), fsm.waiters(), fsm.delayedLocks());
            }
            if (!this.quiet && (this.infantLeaders > 0 || this.nemesisRandom.chance(this.options.leaderChurnP))) this.killInfant(node);
            const hook = this.leaderHook;
            if (hook && !this.quiet) {
              this.leaderHook = null;
              hook(node);
            }
            this.checkers.becameLeader(node.id, term, node.store as RaftLogStore);
          }
        },
        applied: (entry: Entry) => {
          if (node.life !== life) return;
          this.checkers.appliedEntry(node.id, entry.index, entry.term, digest(entry.type, entry.data));
        },
        snapshotInstalled: () => {
          this.stats.snapshotsInstalled++;
        },
      },
    };
  }

  /** Who granted votes to whom, for the latest term seen: the amnesia fault's partition follows it. */
  private votesTerm = 0;
  private readonly votesFor = new Map<string, Set<string>>();
  private amnesiaArmed = false;

  private readonly votedIn = new Map<string, string>();

  private voteGranted(voter: SimNode, candidate: NodeId, term: number): void {
    const key = `${voter.id}:${term}`;
    const before = this.votedIn.get(key);
    if (before !== undefined && before !== candidate) this.stats.doubleVotes++;
    this.votedIn.set(key, candidate);
    if (term > this.votesTerm) {
      this.votesTerm = term;
      this.votesFor.clear();
    }
    if (term === this.votesTerm) {
      let set = this.votesFor.get(candidate);
      if (!set) this.votesFor.set(candidate, (set = new Set()));
      set.add(voter.id);
    }
    if (!this.amnesiaArmed || this.quiet) return;
    this.amnesiaArmed = false;
    const r = this.nemesisRandom;
    // Not from inside the replica's send: the power cut comes right after it.
    this.scheduler.after(0, Tag.nemesis, () => this.crash(voter, 'amnesia', r.range(5 * MS, 20 * MS)));
    // Once the vote has reached the candidate, cut the candidate (and its other voters)
    // off from the rest, before its first append reaches the restarted voter.
    this.scheduler.after(r.range(2 * MS, 4 * MS), Tag.nemesis, () => {
      if (this.quiet) return;
      const voters = this.votesFor.get(candidate) ?? new Set<string>();
      const side = [candidate, ...[...voters].filter((v) => v !== voter.id && v !== candidate)] as NodeId[];
      const rest = this.live()
        .map((n) => n.id)
        .filter((id) => !side.includes(id));
      const epoch = ++this.partitionEpoch;
      this.stats.partitions++;
      this.note(`partition amnesia ${side.join(',')} | ${rest.join(',')}`);
      this.network.setCut(cutBetween(side, rest));
      this.scheduler.after(r.range(1_500 * MS, 4 * SECOND), Tag.nemesis, () => {
        if (this.partitionEpoch === epoch) this.network.heal();
      });
    });
  }

  /** The next new leader is handed to this (the Figure 8 schedule waits for elections). */
  private leaderHook: ((leader: SimNode) => void) | null = null;

  /**
   * Figure 8 (Raft paper §5.4.2), with roles cast from the live nodes: S1 the
   * leader, S2 a follower; S3..S5 the rest, one of whom (S5) wins the next
   * election.
   */
  private figure8(): void {
    const r = this.nemesisRandom;
    const s1 = this.leader();
    const live = this.up();
    if (!s1 || live.length < 5 || this.leaderHook) return;
    const others = r.shuffle(live.filter((n) => n !== s1).map((n) => n.id));
    const s2 = others[0] as NodeId;
    const rest = others.slice(1);
    const all = live.map((n) => n.id);
    const epoch = ++this.partitionEpoch;
    const cut = (links: ReturnType<typeof cutBetween>, why: string): boolean => {
      if (this.partitionEpoch !== epoch || this.quiet) return false;
      this.note(`figure8 ${why}`);
      this.network.setCut(links);
      return true;
    };
    // (a) S1 and S2 are cut off from the rest: S1's new entries reach S2 only.
    cut(cutBetween([s1.id, s2], rest), `(a) ${s1.id},${s2} | ${rest.join(',')}`);
    this.stats.partitions++;
    const giveUp = (): void => {
      if (this.partitionEpoch !== epoch) return;
      this.leaderHook = null;
      this.network.heal();
      for (const n of this.nodes.values()) n.diskSlowFactor = 1;
    };
    this.scheduler.after(12 * SECOND, Tag.nemesis, giveUp);
    this.leaderHook = (s5) => {
      // (b) The rest elect S5; it appends in its term but is cut off at once, so its entries stay on it.
      if (!rest.includes(s5.id)) return giveUp();
      if (!cut(cutBetween([s5.id], all), `(b) ${s5.id} alone`)) return;
      const voters = rest.filter((id) => id !== s5.id);
      // (c) Everyone but S5 talks again; slow disks on S3/S4 stretch the time they hold an old-term
      // entry without the new leader's own. S1 or S2 (they hold the longest log) leads next.
      for (const id of voters) {
        const n = this.nodes.get(id);
        if (n) n.diskSlowFactor = 50;
      }
      this.leaderHook = (lead) => {
        if (lead.id !== s1.id && lead.id !== s2) return giveUp();
        const partner = lead.id === s1.id ? s2 : s1.id;
        // (d) It dies mid-replication, its partner too; S5 comes back to S3 and S4.
        this.scheduler.after(r.range(20 * MS, 400 * MS), Tag.nemesis, () => {
          if (this.partitionEpoch !== epoch || this.quiet) return;
          this.note(`figure8 (d) ${lead.id} and ${partner} die; ${s5.id} returns`);
          const p = this.nodes.get(partner);
          this.crash(lead, 'figure8', r.range(2 * SECOND, 5 * SECOND));
          if (p) this.crash(p, 'figure8', r.range(2 * SECOND, 5 * SECOND));
          this.network.heal();
        });
      };
    };
  }

  /** How many of the next new leaders the leaderInfancy fault still kills. */
  private infantLeaders = 0;

  private killInfant(node: SimNode): void {
    if (this.infantLeaders > 0) this.infantLeaders--;
    const r = this.nemesisRandom;
    const life = node.life;
    // Late enough to have appended (and maybe replicated a little), too early for much else.
    const [lo, hi] = this.options.leaderLifetimeMs;
    this.scheduler.after(r.range(Math.round(lo * MS), Math.round(hi * MS)), Tag.nemesis, () => {
      if (node.life !== life || this.quiet) return;
      this.crash(node, 'leader infancy', r.range(50 * MS, 600 * MS));
    });
  }

  private scheduleTick(node: SimNode, life: number): void {
    const intervalUs = Math.max(1, Math.round((this.options.tickMs * MS) / node.rate));
    this.scheduler.after(intervalUs, Tag.tick | (node.num << 8), () => {
      if (node.life !== life) return;
      // A paused process misses its timers; it ticks again after it resumes.
      if (this.scheduler.now >= node.pausedUntilUs) {
        this.guard(node, () => {
          node.replica?.tick();
          if (node.replica) this.checkers.commitObserved(node.id, node.replica.status().commit);
          if (node.duties?.isActive) this.proposeDuties(node);
        });
      }
      this.scheduleTick(node, life);
    });
  }

  /** The leader's passed deadlines, proposed as ExpireSession / CancelWait (the cell node's leader duties). */
  private proposeDuties(node: SimNode): void {
    const replica = node.replica;
    const duties = node.duties;
    if (!replica || !duties) return;
    for (const command of duties.due(node.monoMs(this.scheduler.now))) {
      this.note(`${node.id} proposes ${command.kind} ${"sessionId" in command ? command.sessionId : command.name}`);
      // The outcome does not matter: a duty that did not land is proposed again after DUTY_RETRY_MS.
      replica.propose(encodeCommand(command), () => {});
    }
  }

  /** Runs `fn` in the node's process: dropped if it died since, held while it is paused. */
  private onNode(node: SimNode, life: number, fn: () => void, duringStart = false): void {
    if (node.life !== life) return;
    if (node.state !== 'up' && !(duringStart && node.state === 'starting')) return;
    if (this.scheduler.now < node.pausedUntilUs) {
      node.deferred.push(fn);
      return;
    }
    this.guard(node, fn);
  }

  /**
   * Runs code of the node's process. An exception there is an assertion of
   * the code under test: recorded, and the node crashes as the process would
   * exit (then restarts, so the run goes on and the checkers see what follows).
   */
  private guard(node: SimNode, fn: () => void): void {
    try {
      fn();
    } catch (e) {
      if (!(e instanceof Error)) throw e;
      this.checkers.fail('replica-assertion', `${node.id}: ${describeError(e)}`);
      this.crash(node, 'assertion', this.nemesisRandom.range(500 * MS, 3 * SECOND));
    }
  }

  private deliver(m: Message): void {
    const node = this.nodes.get(m.to);
    this.scheduler.trace.word(messageCode(m.type)).num(m.term).num(m.index ?? 0).num(m.entries?.length ?? 0).num(m.commit ?? 0);
    if (!node || node.state !== 'up') return;
    this.onNode(node, node.life, () => node.replica?.receive(m));
  }

  /** A power cut; the node restarts after `restartUs` (at the latest when the quiet tail begins). */
  private crash(node: SimNode, why: string, restartUs: number): void {
    if (node.state === 'down' || node.state === 'removed') return;
    this.stats.crashes++;
    this.note(`crash ${node.id} ${why}`);
    node.life++;
    node.replica?.stop();
    node.replica = null;
    node.store = null;
    node.machine = null;
    node.duties = null;
    node.waits.clear();
    node.state = 'down';
    node.role = 'follower';
    node.pausedUntilUs = 0;
    node.deferred = [];
    node.diskFreeAtUs = 0;
    node.disk.crash(node.random);
    const life = node.life;
    // In the quiet tail (an fsync fault injected before it can still fire) a node comes back quickly.
    this.scheduler.after(this.quiet ? Math.min(restartUs, SECOND) : restartUs, Tag.restart | (node.num << 8), () => {
      if (node.life !== life || node.state !== 'down') return;
      this.note(`restart ${node.id}`);
      this.stats.restarts++;
      this.start(node);
    });
  }

  private pause(node: SimNode, durationUs: number): void {
    if (node.state !== 'up') return;
    this.stats.pauses++;
    this.note(`pause ${node.id} ${(durationUs / SECOND).toFixed(3)} s`);
    node.pausedUntilUs = Math.max(node.pausedUntilUs, this.scheduler.now + durationUs);
    const life = node.life;
    this.scheduler.at(node.pausedUntilUs, Tag.resume | (node.num << 8), () => this.resume(node, life));
  }

  private resume(node: SimNode, life: number): void {
    if (node.life !== life || this.scheduler.now < node.pausedUntilUs) return;
    const deferred = node.deferred;
    node.deferred = [];
    this.note(`resume ${node.id} with ${deferred.length} deferred`);
    for (const fn of deferred) {
      if (node.life !== life) return;
      this.guard(node, fn);
    }
  }

  private decommission(node: SimNode): void {
    if (node.state === 'removed') return;
    this.note(`remove ${node.id}`);
    node.life++;
    node.replica?.stop();
    node.replica = null;
    node.store = null;
    node.machine = null;
    node.duties = null;
    node.waits.clear();
    node.state = 'removed';
    node.member = false;
    this.checkers.forget(node.id);
  }

  // ---- views ----

  private live(): SimNode[] {
    return [...this.nodes.values()].filter((n) => n.state !== 'removed');
  }

  private up(): SimNode[] {
    return [...this.nodes.values()].filter((n) => n.state === 'up');
  }

  /** The up node that believes it leads the highest term. */
  private leader(): SimNode | null {
    let best: SimNode | null = null;
    let bestTerm = -1;
    for (const n of this.nodes.values()) {
      if (n.state !== 'up' || n.role !== 'leader' || !n.replica) continue;
      const term = n.replica.status().term;
      if (term > bestTerm) {
        best = n;
        bestTerm = term;
      }
    }
    return best;
  }

  // ---- clients ----

  private startClient(client: ClientState, extraUs = 0): void {
    const think = extraUs + Math.round(this.options.clientThinkMs * MS * (0.2 + 1.6 * this.clientRandom.float()));
    this.scheduler.after(think, Tag.client | (client.id << 16), () => (client.lock ? this.lockClientOp(client, client.lock) : this.clientOp(client)));
  }

  private clientOp(client: ClientState): void {
    if (this.scheduler.now >= this.endUs - 4 * SECOND) return; // Let the last operations settle before the final checks.
    const { op, node, finish } = this.beginClientOp(client);
    const isRead = this.clientRandom.chance(this.options.readShare);
    const key = this.clientRandom.int(KV_KEYS);
    if (isRead) {
      const barrier = this.checkers.readBarrier();
      this.toNode(node, () => this.serveRead(node, key, barrier, (retarget) => this.toClient(() => finish(retarget))));
    } else {
      const writeId = this.nextWriteId++;
      const data = encodePut(key, writeId);
      this.toNode(node, () => {
        const replica = node.replica;
        if (!replica) return;
        replica.propose(data, (outcome) => {
          if (outcome.ok) {
            const { index, term } = outcome.value;
            const ack: AckedWrite = { writeId, key, index, term, digest: digest(0, data), ackUs: 0 };
            this.toClient(() => {
              if (client.op !== op) return; // The client gave up before the answer came.
              this.checkers.ackedWrite({ ...ack, ackUs: this.scheduler.now });
              this.stats.writesAcked++;
              if (this.quiet) this.tailAcks++;
              finish(node.id);
            });
          } else {
            this.stats.writesFailed++;
            const hint = outcome.error.leaderHint;
            this.toClient(() => finish(hint !== undefined ? toNodeId(hint) : null));
          }
        });
      });
    }
  }

  /**
   * Starts a client operation: its id, the node it goes to (the last one,
   * or any), and `finish`, which ends it once (with where to go next) and
   * schedules the next. It gives up after a timeout, its outcome unknown.
   */
  private beginClientOp(client: ClientState): { op: number; node: SimNode; finish: (retarget: NodeId | null) => void } {
    const op = this.nextOp++;
    client.op = op;
    let target = client.target !== null ? this.nodes.get(client.target) : undefined;
    if (!target || target.state === 'removed') target = this.clientRandom.pick(this.live());
    client.target = target.id;
    const finish = (retarget: NodeId | null): void => {
      if (client.op !== op) return;
      client.op = 0;
      client.target = retarget;
      this.startClient(client);
    };
    this.scheduler.after(clientTimeoutUs, Tag.client | (client.id << 16), () => {
      if (client.op === op) this.stats.clientTimeouts++;
      finish(null);
    });
    return { op, node: target, finish };
  }

  /** A linearizable read on `node`: ReadIndex, then `serve` (with the replica) answers from the applied state. */
  private readThrough(node: SimNode, respond: (retarget: NodeId | null) => void, serve: (replica: Replica) => void): void {
    const replica = node.replica;
    if (!replica) return;
    replica.readIndex((outcome) => {
      if (!outcome.ok) {
        const hint = outcome.error.leaderHint;
        respond(hint !== undefined ? toNodeId(hint) : null);
        return;
      }
      serve(replica);
      respond(node.id);
    });
  }

  private serveRead(node: SimNode, key: number, barrier: ReadBarrier, respond: (retarget: NodeId | null) => void): void {
    this.readThrough(node, respond, (replica) => {
      const kv = node.machine as KvStateMachine;
      this.checkers.readServed(node.id, barrier, key, replica.applied, kv.versions[key] as number);
    });
  }

  // ---- lock clients ----

  /**
   * One operation of a lock client: a write proposed through its target
   * node (retried with the same command until answered), or a read through
   * ReadIndex. A queued Acquire is held open on the leader until its grant,
   * cancellation or the end of its session.
   */
  private lockClientOp(client: ClientState, lc: LockClient): void {
    if (this.scheduler.now >= this.endUs - 4 * SECOND) return;
    if (!this.quiet && lc.session !== null && this.clientRandom.chance(clientDeathP)) {
      // The client's process dies: its session stays until the leader expires it; it comes back later.
      this.stats.clientDeaths++;
      this.note(`client ${client.id} dies with ${lc.session.id}`);
      lockClientDied(lc);
      client.target = null;
      this.startClient(client, this.clientRandom.range(1 * SECOND, 6 * SECOND));
      return;
    }
    const { op, node, finish } = this.beginClientOp(client);
    const next = nextLockOp(lc, this.clientRandom, this.options.readShare);
    if (next.kind === 'read') {
      const barrier = this.lockCheckers.readBarrier(next.name);
      this.toNode(node, () => this.serveLockRead(node, next, barrier, (retarget) => this.toClient(() => finish(retarget))));
      return;
    }
    const command = next.command;
    const data = encodeCommand(command);
    this.toNode(node, () => {
      const replica = node.replica;
      if (!replica) return;
      const life = node.life;
      replica.propose(data, (outcome) => {
        if (!outcome.ok) {
          this.stats.writesFailed++;
          const hint = outcome.error.leaderHint;
          this.toClient(() => finish(hint !== undefined ? toNodeId(hint) : null));
          return;
        }
        const { index, term, result } = outcome.value;
        // Held open on the leader: answered by the entry that grants or cancels the wait.
        const queued = command.kind === 'Acquire' && (result as { status?: string }).status === 'QUEUED';
        if (queued && node.life === life) this.holdOpen(node, command, (answer) => this.toClient(() => {
          if (client.op !== op) return;
          const grant = lockWaitAnswered(lc, command, answer);
          if (grant) this.lockCheckers.ackedGrant(grant);
          finish(answer.kind === 'unknown' ? null : node.id);
        }));
        this.toClient(() => {
          if (client.op !== op) return; // The client gave up before the answer came.
          this.checkers.ackedWrite({ writeId: op, index, term, digest: digest(0, data), ackUs: this.scheduler.now });
          this.stats.writesAcked++;
          if (this.quiet) this.tailAcks++;
          const { grant, waiting } = lockWritten(lc, command, result as never);
          if (grant) this.lockCheckers.ackedGrant(grant);
          if (!waiting) finish(node.id);
        });
      });
    });
  }

  /**
   * A live client's session heartbeats, three per TTL, to the leader as far
   * as the client knows (never logged: only the leader's deadline moves).
   * They go on to the end of the run, after the client's last operation:
   * sessions that stopped then would expire in the last seconds and leave
   * entries committed too late for every member to apply them.
   */
  private heartbeatLoop(client: ClientState, lc: LockClient): void {
    const periodUs = Math.round(((lc.session?.ttlMs ?? 1_500) * MS) / 3);
    this.scheduler.after(periodUs, Tag.client | (client.id << 16), () => {
      const session = lc.session;
      let node = client.heartbeatTarget !== null ? this.nodes.get(client.heartbeatTarget) : undefined;
      // A target that is down (its connection broke) or gone: try any node.
      if (!node || node.state !== 'up') node = this.clientRandom.pick(this.live());
      const target = node;
      if (session) {
        this.toNode(target, () => {
          if (target.role === 'leader' && target.duties?.isActive) {
            target.duties.heartbeat(target.monoMs(this.scheduler.now), session.id);
          } else {
            const leader = target.replica?.leader ?? null;
            this.toClient(() => (client.heartbeatTarget = leader));
          }
        });
      }
      this.heartbeatLoop(client, lc);
    });
  }

  /** Holds a queued Acquire open on `node`; answered at once with 'unknown' if it no longer waits (granted or gone meanwhile). */
  private holdOpen(node: SimNode, command: Extract<Command, { kind: 'Acquire' }>, answer: (a: WaitAnswer) => void): void {
    const machine = node.machine;
    const waiting =
      node.role === 'leader' &&
      machine instanceof LockMachine &&
      machine.fsm.getLock(command.name).waiters.some((w) => w.sessionId === command.sessionId && w.requestId === command.requestId);
    if (!waiting) return answer({ kind: 'unknown' });
    node.waits.set(`${command.sessionId} ${command.requestId}`, answer);
  }

  private serveLockRead(node: SimNode, op: Extract<LockOp, { kind: 'read' }>, barrier: LockReadBarrier, respond: (retarget: NodeId | null) => void): void {
    this.readThrough(node, respond, (replica) => {
      let fsm = (node.machine as LockMachine).fsm;
      if (this.options.planted === 'staleLockRead') fsm = this.mostLagging(node).fsm;
      // What the cell node's GetLock and CheckToken answer from.
      const read: LockReadAnswer =
        op.token !== null ? { kind: 'CheckToken', token: op.token, answer: fsm.checkToken(op.name, op.token) } : { kind: 'GetLock', state: fsm.getLock(op.name) };
      this.lockCheckers.readServed(node.id, barrier, replica.applied, read);
    });
  }

  /** The planted stale read: the up replica furthest behind (`node` itself if none is). */
  private mostLagging(node: SimNode): LockMachine {
    let best = node;
    for (const n of this.nodes.values()) {
      if (n.state === 'up' && n.replica && n.machine instanceof LockMachine && n.replica.applied < (best.replica?.applied ?? 0)) best = n;
    }
    return best.machine as LockMachine;
  }

  private toNode(node: SimNode, fn: () => void): void {
    const life = node.life;
    this.scheduler.after(clientLatencyUs, Tag.client | (node.num << 8), () => this.onNode(node, life, fn));
  }

  private toClient(fn: () => void): void {
    this.scheduler.after(clientLatencyUs, Tag.client, fn);
  }

  // ---- the nemesis ----

  private scheduleNemesis(): void {
    const gap = Math.round(this.options.faultEveryMs * MS * (0.25 + 1.5 * this.nemesisRandom.float()));
    this.scheduler.after(gap, Tag.nemesis, () => {
      if (this.quiet) return;
      this.reconcileMembership();
      this.nemesisStep();
      this.scheduleNemesis();
    });
  }

  private nemesisStep(): void {
    const r = this.nemesisRandom;
    const mix = this.options.faults;
    const kinds = Object.keys(mix) as (keyof FaultMix)[];
    const total = kinds.reduce((s, k) => s + mix[k], 0);
    if (total <= 0) return;
    let x = r.float() * total;
    let kind: keyof FaultMix = kinds[0] as keyof FaultMix;
    for (const k of kinds) {
      x -= mix[k];
      if (x < 0) {
        kind = k;
        break;
      }
    }
    this.note(kind);
    switch (kind) {
      case 'partition':
        return this.partitionFor(r.range(1 * SECOND, 6 * SECOND));
      case 'rollingPartition': {
        const steps = r.range(3, 8);
        for (let i = 0; i < steps; i++) {
          this.scheduler.after(i * 800 * MS, Tag.nemesis, () => {
            if (!this.quiet) this.partitionFor(r.range(400 * MS, 1_500 * MS));
          });
        }
        return;
      }
      case 'crash':
        return this.crashSome();
      case 'pause': {
        // Longer than an election timeout, so the others may elect meanwhile.
        const leader = this.leader();
        const node = leader && r.chance(this.options.pauseLeaderShare) ? leader : this.pickTarget();
        const [lo, hi] = this.options.pauseMs;
        if (node) this.pause(node, r.range(Math.round(lo * MS), Math.round(hi * MS)));
        return;
      }
      case 'drift': {
        const node = r.pick(this.live());
        node.setRate(this.scheduler.now, 0.7 + 0.6 * r.float());
        return;
      }
      case 'transfer': {
        const leader = this.leader();
        if (!leader?.replica) return;
        const voters = leader.replica.conf.voters.filter((v) => v !== leader.id);
        if (voters.length === 0) return;
        this.stats.transfers++;
        const to = r.pick(voters);
        this.guard(leader, () => leader.replica?.transferLeadership(to));
        return;
      }
      case 'membership':
        return this.options.doubleConfChange && r.chance(0.7) ? this.doubleConfChange() : this.changeMembership();
      case 'lossyNetwork': {
        const epoch = ++this.partitionEpoch;
        this.network.profile = { ...this.faulty, dropP: 0.1 + 0.4 * r.float(), duplicateP: 0.1, tailP: 0.1 };
        this.scheduler.after(r.range(1 * SECOND, 5 * SECOND), Tag.nemesis, () => {
          if (!this.quiet && this.partitionEpoch === epoch) this.network.profile = this.faulty;
        });
        return;
      }
      case 'amnesia': {
        // Provoke an election by isolating the leader; the first vote granted in it arms the power cut.
        const leader = this.leader();
        if (!leader) return;
        this.amnesiaArmed = true;
        const epoch = ++this.partitionEpoch;
        this.stats.partitions++;
        this.network.setCut(cutBetween([leader.id], this.live().map((n) => n.id)));
        this.scheduler.after(r.range(1_500 * MS, 3 * SECOND), Tag.nemesis, () => {
          this.amnesiaArmed = false;
          if (this.partitionEpoch === epoch) this.network.heal();
        });
        return;
      }
      case 'leaderInfancy': {
        this.infantLeaders = r.range(2, 5);
        // Start the chain by killing the current leader now.
        const leader = this.leader();
        if (leader) this.crash(leader, 'leader infancy', r.range(50 * MS, 1 * SECOND));
        return;
      }
      case 'figure8':
        return this.figure8();
      case 'slowDisk': {
        const node = r.pick(this.live());
        node.diskSlowFactor = r.range(10, 100);
        this.scheduler.after(r.range(1 * SECOND, 5 * SECOND), Tag.nemesis, () => {
          node.diskSlowFactor = 1;
        });
        return;
      }
    }
  }

  /** The leader half the time (the interesting target), otherwise any up node. */
  private pickTarget(): SimNode | null {
    const leader = this.leader();
    if (leader && this.nemesisRandom.chance(0.5)) return leader;
    const up = this.up();
    return up.length > 0 ? this.nemesisRandom.pick(up) : null;
  }

  private partitionFor(durationUs: number): void {
    const r = this.nemesisRandom;
    const nodes = this.live().map((n) => n.id);
    if (nodes.length < 2) return;
    const shape = r.pick(PARTITION_SHAPES);
    const partition = makePartition(shape, nodes, this.leader()?.id ?? null, r);
    this.stats.partitions++;
    this.note(`partition ${partition.shape} ${partition.describe}`);
    const epoch = ++this.partitionEpoch;
    this.network.setCut(partition.links);
    this.scheduler.after(durationUs, Tag.nemesis, () => {
      if (this.partitionEpoch === epoch) this.network.heal();
    });
  }

  private crashSome(): void {
    const r = this.nemesisRandom;
    const down = this.live().filter((n) => n.state === 'down').length;
    if (down >= this.options.crashedMax) return;
    const node = this.pickTarget();
    if (!node) return;
    if (r.chance(0.15)) {
      // An fsync error: the replica must stop itself (and never retry the fsync).
      node.disk.failNextSync();
      const life = node.life;
      // If nothing fsyncs soon (an idle follower), crash it outright.
      this.scheduler.after(2 * SECOND, Tag.nemesis, () => {
        if (node.life === life && !this.quiet) this.crash(node, 'no fsync came', r.range(200 * MS, 4 * SECOND));
      });
      return;
    }
    this.crash(node, 'power cut', r.chance(this.options.restartFastShare) ? r.range(20 * MS, 300 * MS) : r.range(300 * MS, 6 * SECOND));
  }

  /** Remove a voter, add a learner, or promote one; one change at a time. */
  private changeMembership(): void {
    const r = this.nemesisRandom;
    const leader = this.leader();
    if (!leader?.replica || this.membershipBusy) return;
    const conf = leader.replica.conf;
    const n = this.options.replicas;
    const learner = conf.learners[0];
    if (learner !== undefined && r.chance(0.8)) {
      return this.proposeChange(leader, { type: ConfChangeType.AddVoter, node: learner });
    }
    const canRemove = conf.voters.length >= n && conf.voters.length > 1;
    const canAdd = conf.voters.length <= n && this.nodes.size < nodesMax - 2;
    if (canRemove && (!canAdd || r.chance(0.5))) {
      // The leader itself a fifth of the time: it must step down once its removal commits.
      const others = conf.voters.filter((v) => v !== leader.id);
      const victim = r.chance(0.2) || others.length === 0 ? leader.id : r.pick(others);
      return this.proposeChange(leader, { type: ConfChangeType.RemoveNode, node: victim });
    }
    if (canAdd) {
      const fresh = this.addNode(toNodeId(`n${this.nodes.size + 1}`));
      this.start(fresh);
      // As the cell node's AddMember does: the member's addresses first, then the change.
      this.proposeDirectory(leader, { kind: 'SetMemberAddress', id: fresh.id, address: `sim-${fresh.id}:7001`, peerAddress: `sim-${fresh.id}:7301` });
      const type = r.chance(0.7) ? ConfChangeType.AddLearner : ConfChangeType.AddVoter;
      return this.proposeChange(leader, { type, node: fresh.id });
    }
  }

  /** A member-directory command (lock machine only); its outcome does not matter to the run, the checkers see it applied. */
  private proposeDirectory(leader: SimNode, command: Command): void {
    const replica = leader.replica;
    if (!replica || this.options.machine !== 'lock') return;
    this.note(`${leader.id} proposes ${command.kind}`);
    this.guard(leader, () => replica.propose(encodeCommand(command), () => {}));
  }

  private proposeChange(leader: SimNode, change: ConfChange): void {
    const replica = leader.replica;
    if (!replica) return;
    this.membershipBusy = true;
    this.stats.confChanges++;
    this.note(`conf ${change.type} ${change.node}`);
    this.guard(leader, () => replica.proposeConfChange(change, (outcome) => {
      this.membershipBusy = false;
      if (outcome.ok && change.type === ConfChangeType.RemoveNode) {
        if (!replica.stopped && replica.isLeader) this.proposeDirectory(leader, { kind: 'ForgetMember', id: change.node });
        const gone = this.nodes.get(change.node);
        // Let it hear the commit first; then its disk goes away with it.
        if (gone) this.scheduler.after(500 * MS, Tag.nemesis, () => this.decommissionIfOut(gone));
      }
    }));
  }

  /**
   * The planted-bug scenario for concurrent membership changes: add two
   * voters back to back, then cut the cell so that the leader and the new
   * voters are a majority of the new configuration and the rest a majority
   * of the old one. With one change at a time the second is refused and
   * the leader's side cannot commit alone.
   */
  private doubleConfChange(): void {
    const r = this.nemesisRandom;
    const leader = this.leader();
    if (!leader?.replica || this.membershipBusy || this.nodes.size >= nodesMax - 2) return;
    const voters = leader.replica.conf.voters;
    const n = voters.length;
    const majorityNew = Math.floor((n + 2) / 2) + 1;
    const majorityOld = Math.floor(n / 2) + 1;
    const extra = majorityNew - 3;
    if (extra < 0 || n - 1 - extra < majorityOld) return this.changeMembership();
    const a = this.addNode(toNodeId(`n${this.nodes.size + 1}`));
    const b = this.addNode(toNodeId(`n${this.nodes.size + 1}`));
    this.start(a);
    this.start(b);
    this.proposeChange(leader, { type: ConfChangeType.AddVoter, node: a.id });
    this.membershipBusy = false;
    this.proposeChange(leader, { type: ConfChangeType.AddVoter, node: b.id });
    const others = r.shuffle(voters.filter((v) => v !== leader.id));
    const side = [leader.id, a.id, b.id, ...others.slice(0, extra)];
    const rest = this.live()
      .map((x) => x.id)
      .filter((id) => !side.includes(id));
    const epoch = ++this.partitionEpoch;
    this.scheduler.after(r.range(50 * MS, 400 * MS), Tag.nemesis, () => {
      if (this.quiet || this.partitionEpoch !== epoch) return;
      this.stats.partitions++;
      this.network.setCut(cutBetween(side, rest));
      this.scheduler.after(r.range(3 * SECOND, 8 * SECOND), Tag.nemesis, () => {
        if (this.partitionEpoch === epoch) this.network.heal();
      });
    });
  }

  private decommissionIfOut(node: SimNode): void {
    const leader = this.leader();
    if (!leader?.replica || node.state === 'removed') return;
    const status = leader.replica.status();
    const inApplied = leader.replica.conf.voters.includes(node.id) || leader.replica.conf.learners.includes(node.id);
    const inLog = status.voters.includes(node.id) || status.learners.includes(node.id);
    if (!inApplied && !inLog) this.decommission(node);
  }

  /** Nodes outside the leader's membership (removed, or joiners whose add failed) are shut down for good. */
  private reconcileMembership(): void {
    const leader = this.leader();
    if (!leader?.replica) return;
    for (const node of this.nodes.values()) {
      if (node.state === 'removed' || node === leader) continue;
      const isBootstrap = this.bootstrap.includes(node.id);
      // A joiner gets a while to be added; a bootstrap node out of the membership was removed.
      if (!isBootstrap && this.scheduler.now - node.joinedAtUs < 15 * SECOND) continue;
      this.decommissionIfOut(node);
    }
  }

  // ---- the quiet tail and the end ----

  private beginQuiet(): void {
    this.quiet = true;
    this.partitionEpoch++;
    this.network.heal();
    this.network.profile = quietNetwork;
    for (const node of this.nodes.values()) {
      node.diskSlowFactor = 1;
      if (node.state === 'up' && node.pausedUntilUs > this.scheduler.now) {
        node.pausedUntilUs = this.scheduler.now;
        const life = node.life;
        this.scheduler.after(0, Tag.resume | (node.num << 8), () => this.resume(node, life));
      }
      if (node.state === 'down') {
        this.stats.restarts++;
        this.start(node);
      }
    }
    this.scheduler.after(this.options.leaderBoundSeconds * SECOND, Tag.check, () => {
      if (!this.leader()) this.checkers.fail('no-leader-after-faults', `no leader ${this.options.leaderBoundSeconds} s after the faults stopped`);
    });
  }

  private finalChecks(): void {
    const leader = this.leader();
    if (!leader?.replica) {
      this.checkers.fail('no-leader-after-faults', 'no leader at the end of the quiet tail');
      return;
    }
    this.stats.finalLeader = leader.id;
    const boundUs = this.quietUs + this.options.leaderBoundSeconds * SECOND;
    if (leader.leaderSinceUs > boundUs) {
      this.checkers.fail('no-leader-after-faults', `the final leader ${leader.id} was elected at ${leader.leaderSinceUs / SECOND} s, after the bound`);
    }
    // A tail long enough to elect a leader and then write (short runs have none).
    const tailRoomy = this.options.quietSeconds >= this.options.leaderBoundSeconds + 5;
    if (this.options.clients > 0 && tailRoomy && this.tailAcks === 0) {
      this.checkers.fail('no-progress-after-faults', 'no write was acknowledged after the faults stopped');
    }
    const conf = leader.replica.conf;
    const members = [...conf.voters, ...conf.learners];
    this.stats.finalMembers = members.length;
    const finals: { node: NodeId; log: RaftLogStore; applied: number }[] = [];
    const want = { applied: leader.replica.applied, hash: (leader.machine as KvStateMachine | LockMachine).stateHash() };
    for (const id of members) {
      const node = this.nodes.get(id);
      if (!node || node.state !== 'up' || !node.replica || !node.store || !node.machine) {
        this.checkers.fail('no-convergence', `member ${id} is ${node?.state ?? 'unknown'} at the end`);
        continue;
      }
      finals.push({ node: node.id, log: node.store, applied: node.replica.applied });
      const hash = node.machine.stateHash();
      if (node.replica.applied !== want.applied || hash !== want.hash) {
        this.checkers.fail('no-convergence', `${id} ends at applied ${node.replica.applied} (${hash}), the leader ${leader.id} at ${want.applied} (${want.hash})`);
      }
      // Every cross-reference of the final lock table holds (sessions against locks, queue heads, counts).
      if (node.machine instanceof LockMachine) {
        const fsm = node.machine.fsm;
        this.guard(node, () => fsm.checkInvariants());
      }
    }
    this.checkers.finalAcks(finals);
    this.checkers.finalLogs(finals);
  }
}

function describeError(error: Error): string {
  const frames = (error.stack ?? '').split('\n').slice(1, 6).map((l) => l.trim());
  return `${error.name}: ${error.message} | ${frames.join(' | ')}`;
}

/** Wraps a store so the checkers see every save and its durability; the replica sees no difference. */
function observeStore(
  store: RaftLogStore,
  node: NodeId,
  checkers: Checkers,
  alive: () => boolean,
  onHardState: (hardState: HardState) => void,
): RaftLogStore {
  return {
    initialState: () => store.initialState(),
    entries: (lo, hi, maxBytes) => store.entries(lo, hi, maxBytes),
    term: (index) => store.term(index),
    firstIndex: () => store.firstIndex(),
    lastIndex: () => store.lastIndex(),
    snapshot: () => store.snapshot(),
    save(hardState: HardState | undefined, entries: readonly Entry[], done) {
      store.save(hardState, entries, (error) => {
        if (error === null && hardState !== undefined && alive()) checkers.durable(node, hardState);
        done(error);
      });
      // A store that failed earlier refuses the save (its read view stays as it was) and the node
      // crashes at once: what it would have saved is no claim of the replica's.
      if (!alive()) return;
      checkers.saved(node, hardState, entries, store);
      if (hardState !== undefined) onHardState(hardState);
    },
    saveSnapshot(snapshot, done) {
      store.saveSnapshot(snapshot, done);
    },
    close(done) {
      store.close(done);
    },
  };
}

export function runSimulation(options: SimOptions, log?: (line: string) => void): RunReport {
  return new Simulation(options, log).run();
}
