/**
 * The control plane's meta group under the simulator: three members running
 * the production `MetaGroup` (@fencer/meta-fsm/group: the meta state machine
 * on @fencer/cell's GroupCore) over virtual time, a lossy network that
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
import { MetaGroup } from '@fencer/meta-fsm/group';
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
  const runMs = options.runMs ?? META_RUN_MS_DEFAULT;
  const healMs = options.healMs ?? META_HEAL_MS;
  const sched = new Scheduler();
  const random = new SeededRandom(options.seed);
  const nowMs = (): number => sched.now / US_PER_MS;
  const clock = { monoMs: nowMs, wallMs: () => 1_700_000_000_000 + nowMs() };
  const later = (ms: number, tag: number, run: () => void): void => sched.after(Math.round(ms * US_PER_MS), tag, run);
  const violations: MetaViolation[] = [];
  const fail = (checker: MetaCheckerName, detail: string): void => void violations.push({ checker, detail, timeUs: sched.now });

  let lossy = true;
  // A disk completes its calls in order: a call's fsync ends no earlier than the one before it.
  const fsyncMs = (): (() => number) => {
    let lastDoneMs = 0;
    return () => {
      const ms = Math.max(random.range(1, FSYNC_MS_MAX), lastDoneMs - nowMs());
      lastDoneMs = nowMs() + ms;
      return ms;
    };
  };
  const members: Member[] = IDS.map((id, n) => ({
    id,
    n,
    disk: new ModelDisk((d, fn) => later(d, Tag.disk | (n << 8), fn), fsyncMs()),
    group: undefined,
    epoch: 0,
  }));
  const byId = new Map(members.map((m) => [m.id as string, m]));
  const peers = new Map(IDS.map((id) => [id, `http://${id}.meta`]));

  const start = (m: Member): void => {
    // Two instances on one disk would corrupt it behind the replica's back: a harness bug, not a finding.
    assert(m.group === undefined, `${m.id} started while running`);
    const epoch = ++m.epoch;
    m.disk.open((err, store) => {
      if (err || !store || epoch !== m.epoch) return;
      m.group = new MetaGroup(
        {
          id: m.id,
          peers,
          raft: { electionTicks: 10, heartbeatTicks: 1 },
          snapshotEveryEntries: 16,
          ...(options.bug ? { bugs: { [options.bug]: true } } : {}),
        },
        store,
        {
          clock,
          random: random.fork(),
          send: (messages: readonly Message[]) => {
            for (const msg of messages) {
              if (lossy && random.chance(LOSS)) continue;
              const to = byId.get(msg.to);
              if (!to) continue;
              const toEpoch = to.epoch;
              later(random.range(1, 8), Tag.message | (to.n << 8), () => {
                if (to.group && to.epoch === toEpoch) to.group.receive(msg);
              });
            }
          },
          after: (ms, run) => {
            let live = true;
            later(ms, Tag.tick | (m.n << 8), () => live && epoch === m.epoch && run());
            return () => {
              live = false;
            };
          },
          onFatal: (e) => fail('fatal', `${m.id}: ${e.message}`),
        },
        createReplica,
      );
    });
  };
  const crash = (m: Member): void => {
    m.group?.replica.stop();
    m.group = undefined;
    m.epoch++;
    m.disk.crash(random);
  };
  members.forEach(start);

  const tick = (): void => {
    for (const m of members) m.group?.tick();
    later(TICK_MS, Tag.tick, tick);
  };
  later(TICK_MS, Tag.tick, tick);

  // Faults: a member crashes about every 400 ms; one crash in five is a power cut of every member.
  let faults = true;
  let crashes = 0;
  let powerCuts = 0;
  const chaos = (): void => {
    if (!faults) return;
    const victims = random.chance(0.2) ? members : [random.pick(members)];
    if (victims.length > 1) powerCuts++;
    for (const victim of victims) {
      if (!victim.group) continue;
      crashes++;
      crash(victim);
      later(random.range(50, 300), Tag.restart | (victim.n << 8), () => start(victim));
    }
    later(random.range(200, 600), Tag.nemesis, chaos);
  };
  later(500, Tag.nemesis, chaos);

  const acked = new Set<string>();
  let next = 0;
  let lastVersion = -1;
  let reads = 0;
  let writing = true;
  const client = (): void => {
    if (!writing) return;
    later(15, Tag.client, client);
    const group = members.find((m) => m.group?.isLeader)?.group;
    if (!group) return;
    const known = [...acked];
    const r = random.int(10);
    let command: MetaCommand;
    if (r < 7 || known.length === 0)
      command = { kind: 'CreateTenant', namespace: `t${next++}`, cell: random.pick(['cell-1', 'cell-2']), atMs: clock.wallMs() };
    else if (r < 9) command = { kind: 'UpdateTenant', namespace: random.pick(known), quotas: { maxLocks: random.range(1, 100) } };
    else
      command = {
        kind: 'StartMove',
        id: `mv${next++}`,
        namespace: random.pick(known),
        toCell: random.pick(['cell-1', 'cell-2']),
        atMs: clock.wallMs(),
      };
    group.propose({ command }, (res) => {
      if (res.ok && command.kind === 'CreateTenant' && !isMetaFailure(res.value.outcome)) acked.add(command.namespace);
    });
    group.readBarrier((error) => {
      if (error) return;
      reads++;
      const version = group.state.routingVersion;
      if (version < lastVersion)
        fail('routingWentBack', `a read behind a barrier saw routing version ${version} after ${lastVersion} at ${nowMs()} ms`);
      lastVersion = version;
    });
  };
  later(20, Tag.client, client);

  sched.runUntil(runMs * US_PER_MS);
  // Heal: no more faults, losses or writes, until the members catch up. Every member that is down has its
  // restart scheduled already (at most 300 ms away); starting it again here would run two instances on one disk.
  faults = false;
  writing = false;
  lossy = false;
  sched.runUntil((runMs + healMs) * US_PER_MS);

  const groups = members.map((m) => m.group);
  const first = groups[0];
  if (acked.size < META_ACKED_MIN) fail('stalled', `only ${acked.size} creates acknowledged (fewer than ${META_ACKED_MIN})`);
  if (!groups.every((g): g is MetaGroup => g !== undefined) || !first) {
    fail('membersDiverge', 'a member did not restart after healing');
  } else {
    const applied = groups.map((g) => g.replica.applied);
    if (new Set(applied).size !== 1) fail('membersDiverge', `members applied ${applied.join('/')} after healing`);
    const snapshots = groups.map((g) => bytesKey(g.state.snapshot()));
    if (new Set(snapshots).size !== 1) fail('membersDiverge', 'members hold different snapshot bytes after healing');
    const state = first.state;
    const lost = [...acked].filter((ns) => state.tenant(ns) === undefined);
    if (lost.length > 0)
      fail('ackedWriteLost', `${lost.length} acknowledged creates missing after healing, first ${lost.slice(0, 3).join(', ')}`);
    if (state.routingVersion !== state.tenants().length)
      fail('membersDiverge', `routing version ${state.routingVersion} but ${state.tenants().length} tenants`);
    try {
      state.assertInvariants();
    } catch (e) {
      fail('membersDiverge', `meta invariants: ${(e as Error).message}`);
    }
  }
  return {
    seed: options.seed,
    violations,
    traceHash: sched.trace.hex(),
    simulatedSeconds: (runMs + healMs) / 1000,
    stats: {
      events: sched.eventsRun,
      acked: acked.size,
      crashes,
      powerCuts,
      reads,
      applied: first?.replica.applied ?? 0,
      snapshotIndex: first?.replica.latestSnapshotIndex ?? 0,
    },
  };
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
