/**
 * One deterministic run: a cell of replicas (libs/cell's production LockCell
 * over the production log store on an in-memory disk), a faulty network, a
 * nemesis that injects faults (nemesis.ts), clients that speak the cell's
 * request API (clients.ts), and the checkers. Everything random comes from
 * one seed, and everything happens in virtual time on one scheduler, so a
 * seed replays a run exactly. This file keeps the nodes' lifecycle (start,
 * crash, pause, resume, removal) and the run's beginning and end; what a
 * node runs is in cell-glue.ts.
 */
import { performance } from 'node:perf_hooks';
import { type NodeId, type Random, NodeId as toNodeId, SeededRandom, assert } from '@fencer/base';
import type { Entry, HardState, Message, SoftState } from '@fencer/raft';
import type { RaftLogStore } from '@fencer/wal';
import { programFor } from './cell-glue.js';
import { type CheckerName, type Violation, Checkers } from './checkers.js';
import { SimClients } from './clients.js';
import { LockCheckers } from './lock-checkers.js';
import { Nemesis } from './nemesis.js';
import { Network, messageCode, quietNetwork } from './network.js';
import type { SimOptions } from './options.js';
import { Scheduler } from './scheduler.js';
import { SimNode } from './sim-node.js';
import { createSimDisk, openSimStore } from './store.js';
import { Tag } from './tags.js';
import { ConnectionResets } from './connection-resets.js';
import { US_PER_MS, US_PER_SECOND } from './time.js';

/** Most nodes a run ever creates (joiners included): a guard on membership churn. */
const nodesMax = 24;

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
  /** Heartbeats acknowledged as alive (leases the early-expiry checker holds the cell to). */
  heartbeatsAcked: number;
  crashes: number;
  /** Connection resets reported to replicas: by crashed processes, and spurious ones (connection-resets.ts). */
  connectionResets: number;
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

export class Simulation {
  readonly options: SimOptions;
  readonly scheduler = new Scheduler();
  readonly checkers: Checkers;
  readonly lockCheckers: LockCheckers;
  readonly nemesisRandom: Random;
  readonly network: Network;
  readonly nemesis: Nemesis;
  private readonly clients: SimClients;
  private readonly spawnRandom: Random;
  readonly resets: ConnectionResets;
  readonly nodes = new Map<string, SimNode>();
  readonly bootstrap: NodeId[] = [];
  readonly endUs: number;
  private readonly quietUs: number;
  quiet = false;
  /** Bumped by every partition and by the quiet tail: a heal scheduled by an older one does nothing. */
  partitionEpoch = 0;
  private stopped = false;
  tailAcks = 0;
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
    heartbeatsAcked: 0,
    crashes: 0,
    connectionResets: 0,
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
    const rootRandom = new SeededRandom(options.seed);
    const netRandom = rootRandom.fork();
    this.nemesisRandom = rootRandom.fork();
    const clientRandom = rootRandom.fork();
    this.spawnRandom = rootRandom.fork();
    // Forked last, so the streams above stay what they were before resets were simulated.
    this.resets = new ConnectionResets(this, rootRandom.fork());
    this.endUs = options.seconds * US_PER_SECOND;
    this.quietUs = (options.seconds - options.quietSeconds) * US_PER_SECOND;
    this.network = new Network(
      this.scheduler,
      netRandom,
      (m) => this.deliver(m),
      (id) => this.nodes.get(id)?.num ?? 0,
    );
    this.nemesis = new Nemesis(this, this.nemesisRandom, nodesMax);
    this.network.profile = this.nemesis.faulty;
    this.clients = new SimClients(this, clientRandom);
    for (let i = 1; i <= options.replicas; i++) this.bootstrap.push(toNodeId(`n${i}`));
  }

  run(): RunReport {
    const started = performance.now();
    try {
      for (const id of this.bootstrap) this.start(this.addNode(id));
      this.clients.start();
      this.nemesis.scheduleNemesis();
      this.scheduler.at(this.quietUs, Tag.phase, () => this.beginQuiet());
      // A run stops at its first violation, unless the code under test only asserted: the node
      // crashed as a process would, and what follows may show what the assertion guarded.
      const finished = this.scheduler.runUntil(
        this.endUs,
        () => this.stopped || this.checkers.violationCount > this.checkers.assertionCount,
      );
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
    this.stats.heartbeatsAcked = this.lockCheckers.heartbeatsAcked;
    const fired = [...new Set(this.checkers.violations.map((v) => v.checker))];
    return {
      seed: this.options.seed,
      ok: this.checkers.violationCount === 0,
      violations: this.checkers.violations,
      violationCount: this.checkers.violationCount,
      fired,
      traceHash: this.scheduler.trace.hex(),
      simulatedSeconds: this.scheduler.now / US_PER_SECOND,
      realMs,
      stats: this.stats,
    };
  }

  /** Records a notable event in the trace hash, and in the log when one is attached. */
  note(text: string): void {
    this.scheduler.trace.str(text);
    if (this.log) this.log(`${(this.scheduler.now / US_PER_SECOND).toFixed(6)} ${text}`);
  }

  // ---- nodes ----

  addNode(id: NodeId): SimNode {
    assert(this.nodes.size < nodesMax, `more than ${nodesMax} nodes`);
    const random = this.spawnRandom.fork();
    const num = this.nodes.size + 1;
    // Filled in below: the disk's scheduler needs the node to route completions through its pauses.
    let node: SimNode | null = null;
    const disk = createSimDisk(
      this.options.store,
      random.fork(),
      (_op, delayMs, fn) => {
        const n = node as SimNode;
        const life = n.life;
        const latencyUs = Math.max(1, Math.round(delayMs * US_PER_MS * n.diskSlowFactor));
        // One queue per disk: operations complete in the order they were issued.
        const at = Math.max(this.scheduler.now + latencyUs, n.diskFreeAtUs);
        n.diskFreeAtUs = at;
        this.scheduler.at(at, Tag.disk | (n.num << 8), () => this.onNode(n, life, fn, true));
      },
      this.options.fsyncMs,
    );
    node = new SimNode(id, num, random, disk);
    node.localAtUs = this.scheduler.now;
    node.localMs = random.range(0, 10_000_000);
    node.joinedAtUs = this.scheduler.now;
    this.nodes.set(id, node);
    return node;
  }

  /** Opens the node's store (recovering it) and starts its cell over it. */
  start(node: SimNode): void {
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
        this.scheduler.after(this.nemesisRandom.range(200 * US_PER_MS, 2 * US_PER_SECOND), Tag.restart | (node.num << 8), () => {
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
      const observed = observeStore(
        store,
        node.id,
        this.checkers,
        () => node.life === life,
        (hs) => {
          // Diagnostic: a leader's commit index landing on an entry of an older term (Figure 8's mistake).
          if (
            node.role === 'leader' &&
            hs.commit >= store.firstIndex() &&
            hs.commit <= store.lastIndex() &&
            store.term(hs.commit) !== hs.term
          ) {
            this.stats.oldTermCommits++;
            this.note(`${node.id} commits (${hs.commit}, term ${store.term(hs.commit)}) in term ${hs.term}`);
          }
        },
      );
      node.store = store;
      node.role = 'follower';
      node.state = 'up';
      node.program = programFor(this, node, observed, life);
      this.scheduleTick(node, life);
    });
  }

  /** The replica reported a role change (its cell has already acted on it). */
  roleChanged(node: SimNode, role: SoftState['role'], term: number): void {
    const was = node.role;
    node.role = role;
    if (role !== was && this.log) this.log(`${(this.scheduler.now / US_PER_SECOND).toFixed(6)} ${node.id} ${role} term ${term}`);
    if (role !== was) this.resets.roleChanged(node, role, term);
    if (role === 'leader' && was !== 'leader') {
      node.leaderSinceUs = this.scheduler.now;
      this.nemesis.leaderElected(node);
      this.checkers.becameLeader(node.id, term, node.store as RaftLogStore);
    }
  }

  /** Every node's monotonic clock now (the early-expiry checker reads leases on the expiring leader's clock). */
  clocksAt(nowUs: number): Map<string, number> {
    const clocks = new Map<string, number>();
    for (const n of this.nodes.values()) clocks.set(n.id, n.monoMs(nowUs));
    return clocks;
  }

  /** A call between two nodes' processes over the simulated network (forwarding): lost on a cut link. */
  rpc(from: SimNode, to: SimNode, fn: () => void): void {
    if (this.network.isCut(from.id, to.id)) return;
    const life = to.life;
    this.scheduler.after(this.network.sampleDelayUs(), Tag.message | (to.num << 8), () => this.onNode(to, life, fn));
  }

  private scheduleTick(node: SimNode, life: number): void {
    const intervalUs = Math.max(1, Math.round((this.options.tickMs * US_PER_MS) / node.rate));
    this.scheduler.after(intervalUs, Tag.tick | (node.num << 8), () => {
      if (node.life !== life) return;
      // A paused process misses its timers; it ticks again after it resumes.
      if (this.scheduler.now >= node.pausedUntilUs) {
        this.guard(node, () => {
          const program = node.program;
          if (program?.kind === 'lock') program.cell.tick();
          else program?.core.tick();
          if (node.replica) this.checkers.commitObserved(node.id, node.replica.status().commit);
        });
      }
      this.scheduleTick(node, life);
    });
  }

  /** Runs `fn` in the node's process: dropped if it died since, held while it is paused. */
  onNode(node: SimNode, life: number, fn: () => void, duringStart = false): void {
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
  guard(node: SimNode, fn: () => void): void {
    try {
      fn();
    } catch (e) {
      if (!(e instanceof Error)) throw e;
      this.checkers.fail('replica-assertion', `${node.id}: ${describeError(e)}`);
      this.crash(node, 'assertion', this.nemesisRandom.range(500 * US_PER_MS, 3 * US_PER_SECOND));
    }
  }

  private deliver(m: Message): void {
    const node = this.nodes.get(m.to);
    this.scheduler.trace
      .word(messageCode(m.type))
      .num(m.term)
      .num(m.index ?? 0)
      .num(m.entries?.length ?? 0)
      .num(m.commit ?? 0);
    if (!node || node.state !== 'up') return;
    this.onNode(node, node.life, () => node.replica?.receive(m));
  }

  /** A power cut; the node restarts after `restartUs` (at the latest when the quiet tail begins). */
  crash(node: SimNode, why: string, restartUs: number): void {
    if (node.state === 'down' || node.state === 'removed') return;
    this.stats.crashes++;
    this.note(`crash ${node.id} ${why}`);
    node.endLife('down');
    node.disk.crash(node.random);
    this.resets.crashed(node);
    const life = node.life;
    // In the quiet tail (an fsync fault injected before it can still fire) a node comes back quickly.
    this.scheduler.after(this.quiet ? Math.min(restartUs, US_PER_SECOND) : restartUs, Tag.restart | (node.num << 8), () => {
      if (node.life !== life || node.state !== 'down') return;
      this.note(`restart ${node.id}`);
      this.stats.restarts++;
      this.start(node);
    });
  }

  pause(node: SimNode, durationUs: number): void {
    if (node.state !== 'up') return;
    this.stats.pauses++;
    this.note(`pause ${node.id} ${(durationUs / US_PER_SECOND).toFixed(3)} s`);
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

  decommission(node: SimNode): void {
    if (node.state === 'removed') return;
    this.note(`remove ${node.id}`);
    node.endLife('removed');
    node.member = false;
    this.checkers.forget(node.id);
  }

  // ---- views ----

  live(): SimNode[] {
    return [...this.nodes.values()].filter((n) => n.state !== 'removed');
  }

  up(): SimNode[] {
    return [...this.nodes.values()].filter((n) => n.state === 'up');
  }

  /** The up node that believes it leads the highest term. */
  leader(): SimNode | null {
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
    this.scheduler.after(this.options.leaderBoundSeconds * US_PER_SECOND, Tag.check, () => {
      if (!this.leader())
        this.checkers.fail('no-leader-after-faults', `no leader ${this.options.leaderBoundSeconds} s after the faults stopped`);
    });
  }

  private finalChecks(): void {
    const leader = this.leader();
    if (!leader?.replica) {
      this.checkers.fail('no-leader-after-faults', 'no leader at the end of the quiet tail');
      return;
    }
    this.stats.finalLeader = leader.id;
    const boundUs = this.quietUs + this.options.leaderBoundSeconds * US_PER_SECOND;
    if (leader.leaderSinceUs > boundUs) {
      this.checkers.fail(
        'no-leader-after-faults',
        `the final leader ${leader.id} was elected at ${leader.leaderSinceUs / US_PER_SECOND} s, after the bound`,
      );
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
    const want = { applied: leader.replica.applied, hash: leader.stateHash() };
    for (const id of members) {
      const node = this.nodes.get(id);
      if (!node || node.state !== 'up' || !node.replica || !node.store || !node.program) {
        this.checkers.fail('no-convergence', `member ${id} is ${node?.state ?? 'unknown'} at the end`);
        continue;
      }
      finals.push({ node: node.id, log: node.store, applied: node.replica.applied });
      const hash = node.stateHash();
      if (node.replica.applied !== want.applied || hash !== want.hash) {
        this.checkers.fail(
          'no-convergence',
          `${id} ends at applied ${node.replica.applied} (${hash}), the leader ${leader.id} at ${want.applied} (${want.hash})`,
        );
      }
      // Every cross-reference of the final lock table holds (sessions against locks, queue heads, counts).
      const cell = node.cell;
      if (cell) this.guard(node, () => cell.fsm.checkInvariants());
    }
    this.checkers.finalAcks(finals);
    this.checkers.finalLogs(finals);
  }
}

function describeError(error: Error): string {
  const frames = (error.stack ?? '')
    .split('\n')
    .slice(1, 6)
    .map((l) => l.trim());
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
