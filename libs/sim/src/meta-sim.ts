/**
 * The control plane's meta group under the simulator: three members running
 * the production `MetaGroup` (@fencer/meta-fsm/group: the meta state machine
 * on @fencer/group's GroupCore) over virtual time, a lossy network that
 * delays messages, and ModelDisks that crash with torn in-flight writes,
 * one member at a time or all at once (a power cut). A client proposes to
 * whichever member leads: creates of unique tenants, quota changes, moves;
 * and reads the routing version behind a read barrier.
 *
 * Checkers:
 * - ackedWriteLost: every acknowledged create is in the healed state;
 * - routingWentBack: a routing version read behind a barrier never goes back;
 * - membersDiverge: after healing, every member applied the same index and
 *   its snapshot is byte-identical; the routing version counts the tenants
 *   (only creates change routes here, nothing is deleted); the machine's own
 *   invariants hold;
 * - fatal: no member hit a storage error.
 * The run fails liveness ("stalled") if fewer than META_ACKED_MIN creates
 * were acknowledged: a checker that saw nothing proves nothing.
 *
 * Planted bug: 'ackBeforeFsync' (the replica-level switch, through
 * `createReplica`): acknowledgements leave before the disk said yes, so a
 * power cut loses acknowledged writes, which ackedWriteLost must catch.
 */
import { NodeId, SeededRandom, assert } from '@fencer/base';
import type { Message } from '@fencer/raft';
import { createReplica } from '@fencer/replica/testing';
import { isMetaFailure, type MetaCommand } from '@fencer/meta-fsm';
import { MetaGroup, type MetaGroupEnv } from '@fencer/meta-fsm/group';
import { ModelDisk } from './model-store.js';
import { Scheduler } from './scheduler.js';
import { Tag } from './tags.js';
import { US_PER_MS } from './time.js';

export const META_CHECKERS = ['ackedWriteLost', 'routingWentBack', 'membersDiverge', 'fatal', 'stalled'] as const;
export type MetaCheckerName = (typeof META_CHECKERS)[number];
export const META_BUGS = ['ackBeforeFsync'] as const;
export type MetaBug = (typeof META_BUGS)[number];

export interface MetaSimOptions {
  readonly seed: number;
  /** Simulated ms of faults and writes, then META_HEAL_MS of quiet. */
  readonly runMs?: number;
  readonly bug?: MetaBug;
  /** Quiet time after the faults, before the end-of-run checks; default META_HEAL_MS. */
  readonly healMs?: number;
}

export interface MetaViolation {
  readonly checker: MetaCheckerName;
  readonly detail: string;
  /** Virtual time the checker fired at (the end-of-run checks: the end of healing). */
  readonly timeUs: number;
}

export interface MetaRunReport {
  readonly seed: number;
  readonly violations: readonly MetaViolation[];
  /** The hash of every event that ran (kind, node, time): equal for equal runs. */
  readonly traceHash: string;
  readonly simulatedSeconds: number;
  readonly stats: { readonly events: number } & {
    readonly acked: number;
    readonly crashes: number;
    readonly powerCuts: number;
    readonly reads: number;
    readonly applied: number;
    readonly snapshotIndex: number;
  };
}

const IDS = ['m1', 'm2', 'm3'].map((s) => NodeId(s));
export const META_RUN_MS_DEFAULT = 6_000;
export const META_HEAL_MS = 4_000;
/** A run that acknowledged fewer creates than this exercised too little to count. */
export const META_ACKED_MIN = 20;
const TICK_MS = 10;
/** An fsync takes 1-FSYNC_MS_MAX ms: slower than a message round trip at times, so acknowledging early would show. */
const FSYNC_MS_MAX = 25;
const LOSS = 0.05;

interface Member {
  readonly id: NodeId;
  readonly n: number;
  readonly disk: ModelDisk;
  group: MetaGroup | undefined;
  epoch: number;
}

export function runMetaSimulation(options: MetaSimOptions): MetaRunReport {
  return new MetaRun(options).run();
}

/** One seed's run: the members, the faults, the client and the checks, on one scheduler. */
class MetaRun {
  private readonly sched = new Scheduler();
  private readonly random: SeededRandom;
  private readonly clock = { monoMs: () => this.nowMs(), wallMs: () => 1_700_000_000_000 + this.nowMs() };
  private readonly violations: MetaViolation[] = [];
  private readonly members: Member[];
  private readonly byId: Map<string, Member>;
  private readonly peers = new Map(IDS.map((id) => [id, `http://${id}.meta`]));
  /** Phases: messages may be lost, members crash, the client writes; all three end when healing starts. */
  private lossy = true;
  private faults = true;
  private writing = true;
  private crashes = 0;
  private powerCuts = 0;
  /** Tenants whose CreateTenant was acknowledged: each must survive every crash. */
  private readonly acked = new Set<string>();
  private next = 0;
  private lastVersion = -1;
  private reads = 0;

  constructor(private readonly options: MetaSimOptions) {
    this.random = new SeededRandom(options.seed);
    this.members = IDS.map((id, n) => ({
      id,
      n,
      disk: new ModelDisk((d, fn) => this.later(d, Tag.disk | (n << 8), fn), this.fsyncMs()),
      group: undefined,
      epoch: 0,
    }));
    this.byId = new Map(this.members.map((m) => [m.id as string, m]));
  }

  run(): MetaRunReport {
    const runMs = this.options.runMs ?? META_RUN_MS_DEFAULT;
    const healMs = this.options.healMs ?? META_HEAL_MS;
    for (const m of this.members) this.start(m);
    this.later(TICK_MS, Tag.tick, () => this.tick());
    this.later(500, Tag.nemesis, () => this.chaos());
    this.later(20, Tag.client, () => this.client());
    this.sched.runUntil(runMs * US_PER_MS);
    // Heal: no more faults, losses or writes, until the members catch up. Every member that is down has its
    // restart scheduled already (at most 300 ms away); starting it again here would run two instances on one disk.
    this.faults = false;
    this.writing = false;
    this.lossy = false;
    this.sched.runUntil((runMs + healMs) * US_PER_MS);
    this.checkHealed();
    const first = this.members[0]?.group;
    return {
      seed: this.options.seed,
      violations: this.violations,
      traceHash: this.sched.trace.hex(),
      simulatedSeconds: (runMs + healMs) / 1000,
      stats: {
        events: this.sched.eventsRun,
        acked: this.acked.size,
        crashes: this.crashes,
        powerCuts: this.powerCuts,
        reads: this.reads,
        applied: first?.replica.applied ?? 0,
        snapshotIndex: first?.replica.latestSnapshotIndex ?? 0,
      },
    };
  }

  private nowMs(): number {
    return this.sched.now / US_PER_MS;
  }

  private later(ms: number, tag: number, run: () => void): void {
    this.sched.after(Math.round(ms * US_PER_MS), tag, run);
  }

  private fail(checker: MetaCheckerName, detail: string): void {
    this.violations.push({ checker, detail, timeUs: this.sched.now });
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

  private start(m: Member): void {
    // Two instances on one disk would corrupt it behind the replica's back: a harness bug, not a finding.
    assert(m.group === undefined, `${m.id} started while running`);
    const epoch = ++m.epoch;
    m.disk.open((err, store) => {
      if (err || !store || epoch !== m.epoch) return;
      const { bug } = this.options;
      m.group = new MetaGroup(
        {
          id: m.id,
          peers: this.peers,
          raft: { electionTicks: 10, heartbeatTicks: 1 },
          snapshotEveryEntries: 16,
          ...(bug ? { bugs: { [bug]: true } } : {}),
        },
        store,
        this.envFor(m, epoch),
        createReplica,
      );
    });
  }

  /** A member's environment in one epoch: the lossy network, its timers (dropped once it crashes), fatal errors. */
  private envFor(m: Member, epoch: number): MetaGroupEnv {
    return {
      clock: this.clock,
      random: this.random.fork(),
      send: (messages: readonly Message[]) => {
        for (const msg of messages) {
          if (this.lossy && this.random.chance(LOSS)) continue;
          const to = this.byId.get(msg.to);
          if (!to) continue;
          const toEpoch = to.epoch;
          this.later(this.random.range(1, 8), Tag.message | (to.n << 8), () => {
            if (to.group && to.epoch === toEpoch) to.group.receive(msg);
          });
        }
      },
      after: (ms, run) => {
        let live = true;
        this.later(ms, Tag.tick | (m.n << 8), () => live && epoch === m.epoch && run());
        return () => {
          live = false;
        };
      },
      onFatal: (e) => this.fail('fatal', `${m.id}: ${e.message}`),
    };
  }

  private crash(m: Member): void {
    m.group?.replica.stop();
    m.group = undefined;
    m.epoch++;
    m.disk.crash(this.random);
  }

  private tick(): void {
    for (const m of this.members) m.group?.tick();
    this.later(TICK_MS, Tag.tick, () => this.tick());
  }

  /** Faults: a member crashes about every 400 ms; one crash in five is a power cut of every member. */
  private chaos(): void {
    if (!this.faults) return;
    const victims = this.random.chance(0.2) ? this.members : [this.random.pick(this.members)];
    if (victims.length > 1) this.powerCuts++;
    for (const victim of victims) {
      if (!victim.group) continue;
      this.crashes++;
      this.crash(victim);
      this.later(this.random.range(50, 300), Tag.restart | (victim.n << 8), () => this.start(victim));
    }
    this.later(this.random.range(200, 600), Tag.nemesis, () => this.chaos());
  }

  /** Every 15 ms: one write to whichever member leads, and a read of the routing version behind a barrier. */
  private client(): void {
    if (!this.writing) return;
    this.later(15, Tag.client, () => this.client());
    const group = this.members.find((m) => m.group?.isLeader)?.group;
    if (!group) return;
    const command = this.nextCommand();
    group.propose({ command }, (res) => {
      if (res.ok && command.kind === 'CreateTenant' && !isMetaFailure(res.value.outcome)) this.acked.add(command.namespace);
    });
    group.readBarrier((error) => {
      if (error) return;
      this.reads++;
      const version = group.state.routingVersion;
      if (version < this.lastVersion)
        this.fail(
          'routingWentBack',
          `a read behind a barrier saw routing version ${version} after ${this.lastVersion} at ${this.nowMs()} ms`,
        );
      this.lastVersion = version;
    });
  }

  /** Creates of unique tenants mostly, quota changes and moves of acknowledged ones. */
  private nextCommand(): MetaCommand {
    const { random, clock } = this;
    const known = [...this.acked];
    const r = random.int(10);
    if (r < 7 || known.length === 0)
      return { kind: 'CreateTenant', namespace: `t${this.next++}`, cell: random.pick(['cell-1', 'cell-2']), atMs: clock.wallMs() };
    if (r < 9) return { kind: 'UpdateTenant', namespace: random.pick(known), quotas: { maxLocks: random.range(1, 100) } };
    return {
      kind: 'StartMove',
      id: `mv${this.next++}`,
      namespace: random.pick(known),
      toCell: random.pick(['cell-1', 'cell-2']),
      atMs: clock.wallMs(),
    };
  }

  /** After healing: every member up, all at one applied index and one state, no acknowledged create lost. */
  private checkHealed(): void {
    const groups = this.members.map((m) => m.group);
    const first = groups[0];
    if (this.acked.size < META_ACKED_MIN)
      this.fail('stalled', `only ${this.acked.size} creates acknowledged (fewer than ${META_ACKED_MIN})`);
    if (!groups.every((g): g is MetaGroup => g !== undefined) || !first)
      return this.fail('membersDiverge', 'a member did not restart after healing');
    const applied = groups.map((g) => g.replica.applied);
    if (new Set(applied).size !== 1) this.fail('membersDiverge', `members applied ${applied.join('/')} after healing`);
    const snapshots = groups.map((g) => bytesKey(g.state.snapshot()));
    if (new Set(snapshots).size !== 1) this.fail('membersDiverge', 'members hold different snapshot bytes after healing');
    const state = first.state;
    const lost = [...this.acked].filter((ns) => state.tenant(ns) === undefined);
    if (lost.length > 0)
      this.fail('ackedWriteLost', `${lost.length} acknowledged creates missing after healing, first ${lost.slice(0, 3).join(', ')}`);
    if (state.routingVersion !== state.tenants().length)
      this.fail('membersDiverge', `routing version ${state.routingVersion} but ${state.tenants().length} tenants`);
    try {
      state.assertInvariants();
    } catch (e) {
      this.fail('membersDiverge', `meta invariants: ${(e as Error).message}`);
    }
  }
}

/** The replay line for one seed of the meta sweep. */
export function metaReplayCommand(options: MetaSimOptions): string {
  return `node tools/sim/run.mjs --machine meta --seed ${options.seed}${options.runMs ? ` --seconds ${options.runMs / 1000}` : ''}${options.bug ? ` --bug ${options.bug}` : ''}`;
}

/** The bytes as a string, to compare snapshots by value. */
function bytesKey(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return s;
}
