/**
 * The members of the moves simulation and what connects them: two lock cells
 * of three replicas each running the production LockCell, and the control
 * plane's meta group of three running the production MetaGroup, over
 * ModelDisks that crash with torn in-flight writes, on one scheduler. Calls
 * between them (a client's to a cell, the move driver's to a cell's leader, a
 * follower forwarding to its leader) travel a lossy network with delays and
 * end at a timeout when lost; nothing reaches a member that crashed since.
 * A paused member (SIGSTOP) runs nothing until it resumes, then everything
 * that waited; an isolated one (a partition) loses every message either way.
 */
import { type NodeId, NodeId as nodeId, SeededRandom, assert } from '@fencer/base';
import { type CellEnv, type LeaderForwarder, type LockCellConfig, LockCell, noopCellMetrics } from '@fencer/cell';
import { MetaGroup } from '@fencer/meta-fsm/group';
import type { Message } from '@fencer/raft';
import { noopLogger } from '@fencer/replica';
import { ModelDisk } from './model-store.js';
import { MoveCheckers } from './moves-checkers.js';
import { Scheduler } from './scheduler.js';
import { Tag } from './tags.js';
import { US_PER_MS } from './time.js';

export const MOVE_CELLS = ['cell-1', 'cell-2'] as const;
export type GroupName = (typeof MOVE_CELLS)[number] | 'meta';
/** Virtual ms between ticks of every member. */
export const MOVES_TICK_MS = 10;
/** An fsync takes 1..this ms. */
const FSYNC_MS_MAX = 20;
/** A message takes 1..this ms, one way. */
const DELAY_MS_MAX = 8;
/** Share of messages lost while the network is lossy. */
const LOSS = 0.03;

export interface Member {
  readonly id: NodeId;
  readonly n: number;
  readonly group: GroupName;
  readonly disk: ModelDisk;
  /** Bumped by every crash: work scheduled for an earlier life is dropped. */
  epoch: number;
  /** Paused (as by SIGSTOP) until this virtual time (µs): its timers wait, messages to it wait in its socket. */
  pausedUntilUs: number;
  /** Cut off from every other member and client until this virtual time (µs): messages either way are lost. */
  isolatedUntilUs: number;
  cell: LockCell | undefined;
  meta: MetaGroup | undefined;
}

export interface WorldHooks {
  /** Test hooks every cell replica runs with (the planted import bug). */
  readonly importWithoutRevisionRaise: boolean;
  /** A meta member applied an entry: its index and the state machine's result. */
  readonly metaApplied: (index: number, result: unknown) => void;
}

export class MovesWorld {
  readonly sched = new Scheduler();
  readonly random: SeededRandom;
  readonly members: Member[] = [];
  private readonly byId = new Map<string, Member>();
  lossy = true;
  readonly checkers: MoveCheckers;
  readonly fatal: string[] = [];

  constructor(
    seed: number,
    private readonly hooks: WorldHooks,
    lockNames: (namespace: string) => readonly string[],
  ) {
    this.random = new SeededRandom(seed);
    this.checkers = new MoveCheckers(() => this.sched.now, lockNames);
    const groups: GroupName[] = [...MOVE_CELLS, 'meta'];
    for (const group of groups) {
      for (let k = 1; k <= 3; k++) {
        const n = this.members.length;
        const id = nodeId(`${group === 'meta' ? 'm' : group === 'cell-1' ? 'a' : 'b'}${k}`);
        const disk = new ModelDisk((d, fn) => this.later(d, Tag.disk | (n << 8), fn), this.fsyncMs());
        const m: Member = { id, n, group, disk, epoch: 0, pausedUntilUs: 0, isolatedUntilUs: 0, cell: undefined, meta: undefined };
        this.members.push(m);
        this.byId.set(id, m);
      }
    }
  }

  nowMs(): number {
    return this.sched.now / US_PER_MS;
  }

  wallMs(): number {
    return 1_700_000_000_000 + this.nowMs();
  }

  later(ms: number, tag: number, run: () => void): void {
    this.sched.after(Math.round(ms * US_PER_MS), tag, run);
  }

  groupOf(group: GroupName): Member[] {
    return this.members.filter((m) => m.group === group);
  }

  isUp(m: Member): boolean {
    return m.cell !== undefined || m.meta !== undefined;
  }

  /** The member of `group` that believes it leads (the newest term's, if two do). */
  leaderOf(group: GroupName): Member | undefined {
    let best: Member | undefined;
    let bestTerm = -1;
    for (const m of this.groupOf(group)) {
      const core = m.cell?.core ?? m.meta;
      if (core === undefined || !core.isLeader) continue;
      const term = (m.cell?.core.replica ?? m.meta?.replica)?.status().term ?? 0;
      if (term > bestTerm) [best, bestTerm] = [m, term];
    }
    return best;
  }

  /** A disk completes its calls in order: a call's fsync ends no earlier than the one before it. */
  private fsyncMs(): () => number {
    let lastDoneMs = 0;
    return () => {
      const ms = Math.max(this.random.range(1, FSYNC_MS_MAX), lastDoneMs - this.nowMs());
      lastDoneMs = this.nowMs() + ms;
      return ms;
    };
  }

  isolated(m: Member | undefined): boolean {
    return m !== undefined && m.isolatedUntilUs > this.sched.now;
  }

  /**
   * Runs `run` on `to` after a network delay, unless the message is lost
   * (the lossy network, or either end isolated) or `to` crashed meanwhile; a
   * paused `to` runs it when it resumes.
   */
  deliver(to: Member, run: (m: Member) => void, from?: Member): void {
    if (this.lossy && this.random.chance(LOSS)) return;
    if (this.isolated(to) || this.isolated(from)) return;
    const epoch = to.epoch;
    this.later(this.random.range(1, DELAY_MS_MAX), Tag.message | (to.n << 8), () => this.onMember(to, epoch, () => run(to)));
  }

  /** Runs `run` in `m`'s life `epoch`: not at all if it crashed since, after its pause if paused. */
  onMember(m: Member, epoch: number, run: () => void): void {
    if (m.epoch !== epoch || !this.isUp(m)) return;
    if (m.pausedUntilUs > this.sched.now) {
      this.sched.at(m.pausedUntilUs, Tag.resume | (m.n << 8), () => this.onMember(m, epoch, run));
      return;
    }
    run();
  }

  /** Crashed, paused or isolated now. */
  faulty(m: Member): boolean {
    return !this.isUp(m) || m.pausedUntilUs > this.sched.now || this.isolated(m);
  }

  pause(m: Member, ms: number): void {
    m.pausedUntilUs = Math.max(m.pausedUntilUs, this.sched.now + Math.round(ms * US_PER_MS));
  }

  isolate(m: Member, ms: number): void {
    m.isolatedUntilUs = Math.max(m.isolatedUntilUs, this.sched.now + Math.round(ms * US_PER_MS));
  }

  /**
   * A call to `to`: `serve` runs there, its answer travels back; `done` gets
   * it, or undefined after `timeoutMs` (lost on the way, or `to` crashed).
   */
  call<T>(to: Member, serve: (m: Member, answer: (v: T) => void) => void, timeoutMs: number, done: (v: T | undefined) => void): void {
    let finished = false;
    const finish = (v: T | undefined): void => {
      if (finished) return;
      finished = true;
      done(v);
    };
    this.later(timeoutMs, Tag.client, () => finish(undefined));
    this.deliver(to, (m) => serve(m, (v) => this.deliverBack(m, () => finish(v))));
  }

  /** An answer from `from` back to its caller: lost like any message. */
  private deliverBack(from: Member, run: () => void): void {
    if ((this.lossy && this.random.chance(LOSS)) || this.isolated(from)) return;
    this.later(this.random.range(1, DELAY_MS_MAX), Tag.message, run);
  }

  start(m: Member): void {
    // Two instances on one disk would corrupt it behind the replica's back: a harness bug, not a finding.
    assert(!this.isUp(m), `${m.id} started while running`);
    const epoch = ++m.epoch;
    m.disk.open((err, store) => {
      if (err || !store || epoch !== m.epoch) return;
      const env = this.envFor(m, epoch);
      if (m.group === 'meta') {
        m.meta = new MetaGroup(
          { id: m.id, peers: this.peersOf('meta'), raft: { electionTicks: 10, heartbeatTicks: 1 }, snapshotEveryEntries: 64 },
          store,
          env,
        );
        return;
      }
      const cellName = m.group;
      m.cell = new LockCell(this.cellConfig(m), store, env, this.forwarder(m), {
        importWithoutRevisionRaise: this.hooks.importWithoutRevisionRaise,
        applied: (entry, command, applied, fsm) => {
          if (m.epoch === epoch) this.checkers.applied(cellName, entry.index, command, applied, (name) => fsm.getLock(name));
        },
      });
    });
  }

  crash(m: Member): void {
    m.cell?.core.replica.stop();
    m.meta?.replica.stop();
    m.cell = undefined;
    m.meta = undefined;
    m.epoch++;
    m.disk.crash(this.random);
  }

  tick(): void {
    for (const m of this.members) {
      if (m.pausedUntilUs > this.sched.now) continue;
      m.cell?.tick();
      m.meta?.tick();
    }
  }

  private peersOf(group: GroupName): Map<NodeId, string> {
    return new Map(this.groupOf(group).map((m) => [m.id, `sim-${m.id}:7001`]));
  }

  private cellConfig(m: Member): LockCellConfig {
    return {
      id: m.id,
      peers: this.peersOf(m.group),
      join: false,
      replica: {
        raft: { electionTicks: 10, heartbeatTicks: 1, preVote: true, maxEntriesPerMsg: 64, maxBytesPerMsg: 256 * 1024 },
        snapshotEveryEntries: 200,
        readTimeoutTicks: 30,
      },
      readsWaitingMax: 1_000,
      defaultPeerAddress: (a) => a,
      tickMs: MOVES_TICK_MS,
      ttlDefaultMs: 5_000,
      ttlMinMs: 1_000,
      ttlMaxMs: 60_000,
      waitingCallsMax: 1_000,
      watchHistoryMax: 1_000,
      watcherBufferMax: 1_000,
      watchersMax: 16,
      watchProgressMs: 1_000,
      heartbeatRoundSpacingMs: 5,
      // Managed by the control plane: a cell owns only what it claimed or imported.
      autoClaim: false,
    };
  }

  /** A member's environment in one life: the lossy network, its timers (dropped once it crashes), fatal errors. */
  private envFor(m: Member, epoch: number): CellEnv {
    return {
      clock: { monoMs: () => this.nowMs(), wallMs: () => this.wallMs() },
      random: this.random.fork(),
      logger: noopLogger,
      metrics: noopCellMetrics,
      send: (messages: readonly Message[]) => {
        if (m.epoch !== epoch) return;
        for (const msg of messages) {
          const to = this.byId.get(msg.to);
          if (to) this.deliver(to, (t) => (t.cell?.core.replica ?? t.meta?.replica)?.receive(msg), m);
        }
      },
      // A timer of the member's process: it waits out a pause.
      after: (ms, run) => {
        let live = true;
        this.later(ms, Tag.tick | (m.n << 8), () => this.onMember(m, epoch, () => live && run()));
        return () => {
          live = false;
        };
      },
      onFatal: (e) => this.fatal.push(`${m.id}: ${e.message}`),
      observer: {
        applied: (entry, result) => {
          if (m.group === 'meta' && m.epoch === epoch) this.hooks.metaApplied(entry.index, result);
        },
      },
    };
  }

  /** Forwarding to the leader over the simulated network; a lost call is never answered (the caller times out). */
  private forwarder(from: Member): LeaderForwarder {
    return {
      forward: (leader, _address, method, request, done) => {
        const to = this.byId.get(leader);
        if (to !== undefined)
          this.deliver(
            to,
            (t) => t.cell?.call(method, request, { forwarded: true }, (o, r) => this.deliverBack(t, () => from.cell && done(o, r))),
            from,
          );
        return () => {};
      },
      heartbeats: (leader, _address, sessionIds, done) => {
        const to = this.byId.get(leader);
        if (to !== undefined)
          this.deliver(
            to,
            (t) => t.cell?.heartbeat(sessionIds, { forwarded: true }, (r) => this.deliverBack(t, () => from.cell && done(r))),
            from,
          );
        return () => {};
      },
    };
  }
}
