/**
 * The nemesis: every few seconds (jittered) it starts a fault, and heals it
 * after a random duration. Faults live in three slots so that at most one of
 * each runs at once (a majority of the cell is then usually reachable and
 * the run makes progress between faults):
 *   process — kill -9 of the leader, a follower or a minority (restarted
 *             from fleet.json's argv); SIGSTOP/SIGCONT of the leader or of
 *             followers for 0.5–10 s; a replica restarted under faketime
 *             with its clock shifted;
 *   network — partitions (isolated leader, majority/minority, bridge, ring,
 *             one-way) and link faults (delay with jitter, drop) on the
 *             proxied peer links;
 *   client  — SIGSTOP of a client process for longer than its session TTL;
 *             faults on one client's links to the nodes.
 * Leadership transfer is instantaneous and uses no slot. Every start and
 * heal is written to the fault schedule (JSON lines) with its time.
 *
 * Faults are drawn by weight (`run`), or started at fixed times
 * (`runSchedule`: a directed scenario, see one-sided.ts). A fault whose
 * Debian tool is missing (faketime, fiu-utils) is never drawn; a scheduled
 * one is skipped, and the schedule records why.
 */
import type { ChildProcess } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { assert, type Random } from '@fencer/base';
import type { ChaosCell } from './cell.js';
import { type DiskFault, faketimeAvailable, fiuAvailable } from './cell.js';
import { FAULTS_PER_RUN_MAX, PAUSE_MS_MAX, SCHEDULED_START_PATIENCE_MS } from './limits.js';
import { type FaultContext, laggingFollower, slowLeaderIsolated, type Started } from './one-sided.js';
import { bridge, isolate, majorityMinority, oneWay, ring, type Partition } from './partitions.js';
import type { LinkProxy } from './proxy.js';
import { leaderLinkReset, timeFailover } from './leader-link.js';

export type FaultKind =
  | 'kill-leader'
  | 'kill-follower'
  | 'kill-minority'
  | 'pause-leader'
  | 'pause-followers'
  | 'clock-restart'
  | 'clock-rate'
  | 'disk-fault'
  | 'membership'
  | 'slow-leader-isolated'
  | 'lagging-follower'
  | 'partition'
  | 'link-delay'
  | 'link-drop'
  | 'transfer'
  | 'pause-client'
  | 'client-link'
  | 'leader-link-reset';

type Slot = 'process' | 'network' | 'client' | 'none';

const SLOT: Record<FaultKind, Slot> = {
  'kill-leader': 'process',
  'kill-follower': 'process',
  'kill-minority': 'process',
  'pause-leader': 'process',
  'pause-followers': 'process',
  'clock-restart': 'process',
  'clock-rate': 'process',
  'disk-fault': 'process',
  membership: 'process',
  'slow-leader-isolated': 'process',
  'lagging-follower': 'network',
  partition: 'network',
  'link-delay': 'network',
  'link-drop': 'network',
  transfer: 'none',
  'pause-client': 'client',
  'client-link': 'client',
  'leader-link-reset': 'network',
};

/** Relative weights of the full nemesis. */
export const FULL_NEMESIS: Readonly<Partial<Record<FaultKind, number>>> = {
  'kill-leader': 3,
  'kill-follower': 2,
  'kill-minority': 1,
  'pause-leader': 3,
  'pause-followers': 2,
  'clock-restart': 1,
  partition: 5,
  'link-delay': 2,
  'link-drop': 1,
  transfer: 2,
  'pause-client': 4,
  'client-link': 3,
};

/** The soak's nemesis: the full one plus clock-rate skew, disk faults under fiu, membership changes and the slow isolated leader. */
export const SOAK_NEMESIS: Readonly<Partial<Record<FaultKind, number>>> = {
  ...FULL_NEMESIS,
  'clock-rate': 2,
  'disk-fault': 2,
  membership: 2,
  'slow-leader-isolated': 1,
};

/** The Debian package each fault needs beyond the cell itself; the others need none. */
const NEEDS: Partial<Record<FaultKind, { readonly pkg: string; readonly available: () => boolean }>> = {
  'clock-restart': { pkg: 'faketime', available: faketimeAvailable },
  'clock-rate': { pkg: 'faketime', available: faketimeAvailable },
  'disk-fault': { pkg: 'fiu-utils', available: fiuAvailable },
};

export function isFaultKind(k: string): k is FaultKind {
  return Object.hasOwn(SLOT, k);
}

/** Why a fault cannot run on this machine (its Debian package is missing), or undefined when it can. */
export function missingTool(kind: FaultKind): string | undefined {
  const need = NEEDS[kind];
  if (need === undefined || need.available()) return undefined;
  return `needs Debian ${need.pkg} (apt-get install ${need.pkg}); .ci/run installs it`;
}

/** The faults of a weighting that this machine cannot run, by reason: one line per missing package. */
export function faultsLeftOut(weights: Readonly<Partial<Record<FaultKind, number>>>): string[] {
  const byReason = new Map<string, FaultKind[]>();
  for (const k of Object.keys(weights) as FaultKind[]) {
    const why = (weights[k] ?? 0) > 0 && isFaultKind(k) ? missingTool(k) : undefined;
    if (why !== undefined) byReason.set(why, [...(byReason.get(why) ?? []), k]);
  }
  return [...byReason].map(([why, kinds]) => `${kinds.join(', ')} skipped: ${why}`);
}

/** A fault started at a fixed time instead of drawn: `atMs` after the workload starts. */
export interface ScheduledFault {
  readonly atMs: number;
  readonly kind: FaultKind;
}

/** How long a membership change may look for a leader that accepts it. */
const MEMBERSHIP_CHANGE_MS = 30_000;

/** One-shot disk faults: the write path's positional writes (EIO, disk full), the log's fdatasync, a segment's or snapshot's rename. */
export const DISK_FAULTS: readonly DiskFault[] = [
  { name: 'pwrite EIO', points: ['posix/io/rw/pwrite', 'posix/io/rw/pwritev'], errno: 5 },
  { name: 'pwrite ENOSPC', points: ['posix/io/rw/pwrite', 'posix/io/rw/pwritev'], errno: 28 },
  { name: 'fdatasync EIO', points: ['posix/io/sync/fdatasync', 'posix/io/sync/fsync'], errno: 5 },
  { name: 'rename EIO', points: ['posix/io/dir/rename'], errno: 5 },
];

/** How long a replica under an armed disk fault may go on before the harness gives up on the fault firing (a rename is rare). */
const DISK_FAULT_EXIT_MS = 8_000;
/** How long a replica restarted under fiu-run gets to answer its admin Status before the fault is armed. */
const FIU_START_MS = 15_000;

export interface WorkerProcess {
  readonly id: string;
  readonly child: ChildProcess;
  /** This worker's proxy to each node, in node order. */
  readonly links: readonly LinkProxy[];
  paused: boolean;
}

export interface FaultRecord {
  /** Milliseconds since the run started. */
  readonly t: number;
  readonly phase: 'start' | 'heal' | 'skip';
  readonly kind: FaultKind | 'heal-all';
  readonly detail: string;
  readonly durationMs?: number;
}

export interface NemesisOptions {
  readonly cell: ChaosCell;
  readonly workers: readonly WorkerProcess[];
  readonly random: Random;
  readonly ttlMs: number;
  readonly weights: Readonly<Partial<Record<FaultKind, number>>>;
  /** Seconds between fault starts: uniform in this range. */
  readonly intervalMs: readonly [number, number];
  readonly scheduleFile: string;
  readonly t0Ms: number;
}

interface Active {
  readonly slot: Slot;
  readonly kind: FaultKind;
  readonly healAtMs: number;
  readonly heal: () => Promise<string>;
}

export class Nemesis {
  readonly records: FaultRecord[] = [];
  readonly started: Partial<Record<FaultKind, number>> = {};
  /** Leader disruptions a leader-link-reset saw (leader-link.ts): each a violation. */
  readonly disruptions: string[] = [];
  /** Per kill -9 of a leader: milliseconds until another replica led at a higher term (null: not within the watch). */
  readonly failoverMs: Array<number | null> = [];
  private readonly active: Active[] = [];
  private readonly random: Random;
  private readonly kinds: FaultKind[];

  constructor(private readonly o: NemesisOptions) {
    this.random = o.random;
    this.kinds = (Object.keys(o.weights) as FaultKind[]).filter((k) => (o.weights[k] ?? 0) > 0 && missingTool(k) === undefined);
    assert(o.intervalMs[0] > 0 && o.intervalMs[0] <= o.intervalMs[1], 'nemesis interval is a range');
    const unknown = Object.keys(o.weights).filter((k) => !isFaultKind(k));
    assert(unknown.length === 0, `unknown fault kinds ${unknown.join(', ')}; known: ${Object.keys(SLOT).join(', ')}`);
  }

  private now(): number {
    return Date.now();
  }

  private record(r: Omit<FaultRecord, 't'>): void {
    if (this.records.length >= FAULTS_PER_RUN_MAX) return;
    const rec: FaultRecord = { t: this.now() - this.o.t0Ms, ...r };
    this.records.push(rec);
    appendFileSync(this.o.scheduleFile, `${JSON.stringify(rec)}\n`);
  }

  /** Draws faults by weight until `untilMs` (Date.now() time), then heals everything. */
  async run(untilMs: number, shouldStop: () => boolean = () => false): Promise<void> {
    let nextMs = this.now() + this.random.range(this.o.intervalMs[0], this.o.intervalMs[1]);
    while (this.now() < untilMs && !shouldStop()) {
      await this.healDue();
      if (this.now() >= nextMs && this.kinds.length > 0) {
        const kind = this.pickKind();
        if (kind) await this.start(kind);
        nextMs = this.now() + this.random.range(this.o.intervalMs[0], this.o.intervalMs[1]);
      }
      await sleep(100);
    }
    await this.healAll();
  }

  /**
   * Starts each scheduled fault at its time (slots and weights do not
   * apply: the schedule is the author's) and heals each when its duration
   * is up; runs until `untilMs` and until every scheduled fault has run its
   * course (a slow machine lengthens the run rather than cutting a fault
   * short: each fault bounds its own start and duration), then heals
   * everything.
   */
  async runSchedule(schedule: readonly ScheduledFault[], untilMs: number): Promise<void> {
    const due = [...schedule].sort((a, b) => a.atMs - b.atMs);
    for (const f of due) assert(isFaultKind(f.kind) && f.atMs >= 0, `scheduled fault ${JSON.stringify(f)}: a known kind at a time >= 0`);
    while (this.now() < untilMs || due.length > 0 || this.active.length > 0) {
      await this.healDue();
      const next = due[0];
      if (next !== undefined && this.now() >= this.o.t0Ms + next.atMs) {
        const why = missingTool(next.kind);
        if (why !== undefined) {
          due.shift();
          this.record({ phase: 'skip', kind: next.kind, detail: `scheduled, but ${why}` });
        } else {
          // A cell not ready for the fault yet (no leader elected on a slow machine) delays it, up to
          // SCHEDULED_START_PATIENCE_MS past its time: the author scheduled the fault, not the moment.
          const patient = this.now() < this.o.t0Ms + next.atMs + SCHEDULED_START_PATIENCE_MS;
          if ((await this.start(next.kind, patient)) || !patient) due.shift();
        }
      }
      await sleep(100);
    }
    await this.healAll();
  }

  private async healDue(): Promise<void> {
    const now = this.now();
    for (const a of [...this.active]) {
      if (a.healAtMs > now) continue;
      this.active.splice(this.active.indexOf(a), 1);
      const detail = await a.heal();
      this.record({ phase: 'heal', kind: a.kind, detail });
    }
  }

  /** Heals every active fault and makes sure every replica and worker runs. */
  async healAll(): Promise<void> {
    for (const a of this.active.splice(0)) {
      const detail = await a.heal();
      this.record({ phase: 'heal', kind: a.kind, detail });
    }
    const cell = this.o.cell;
    cell.healLinks();
    for (const w of this.o.workers) {
      for (const l of w.links) l.heal();
      if (w.paused) {
        w.child.kill('SIGCONT');
        w.paused = false;
      }
    }
    const restarted: string[] = [];
    for (const id of cell.ids) {
      if (cell.state.get(id) === 'paused') cell.resume(id);
      if (cell.state.get(id) === 'killed' || (cell.state.get(id) === 'faulted' && !cell.alive(id))) {
        cell.spawn(id);
        restarted.push(id);
      }
    }
    this.record({ phase: 'heal', kind: 'heal-all', detail: restarted.length > 0 ? `restarted ${restarted.join(',')}` : 'all healed' });
  }

  private slotFree(slot: Slot): boolean {
    return slot === 'none' || !this.active.some((a) => a.slot === slot);
  }

  private pickKind(): FaultKind | undefined {
    const free = this.kinds.filter((k) => this.slotFree(SLOT[k]));
    const total = free.reduce((s, k) => s + (this.o.weights[k] ?? 0), 0);
    if (total === 0) return undefined;
    let x = this.random.float() * total;
    for (const k of free) {
      x -= this.o.weights[k] ?? 0;
      if (x < 0) return k;
    }
    return free[free.length - 1];
  }

  /** Starts a fault now; false when it could not (recorded as a skip unless `quietSkip`: to be tried again). */
  private async start(kind: FaultKind, quietSkip = false): Promise<boolean> {
    const r = await this.begin(kind);
    if (typeof r === 'string') {
      if (!quietSkip) this.record({ phase: 'skip', kind, detail: r });
      return false;
    }
    this.started[kind] = (this.started[kind] ?? 0) + 1;
    this.record({ phase: 'start', kind, detail: r.detail, durationMs: r.durationMs });
    if (r.heal) this.active.push({ slot: SLOT[kind], kind, healAtMs: this.now() + r.durationMs, heal: r.heal });
    return true;
  }

  private upIds(): string[] {
    return this.o.cell.ids.filter((id) => this.o.cell.state.get(id) === 'up');
  }

  /**
   * A replica restarted under fiu-run, then a one-shot disk fault armed in
   * it: it must exit by itself (a storage error is never retried); it is
   * restarted without faults at the heal. One the fault never reached in
   * time is killed instead (recorded as such).
   */
  private async diskFault(): Promise<Started | string> {
    const cell = this.o.cell;
    const rnd = this.random;
    const id = rnd.pick(this.upIds());
    if (id === undefined) return 'no replica up';
    const fault = rnd.pick(DISK_FAULTS);
    await cell.kill(id);
    cell.spawn(id, { fiu: true });
    const until = this.now() + FIU_START_MS;
    while (this.now() < until && (await cell.status(id, 500)) === undefined) await sleep(200);
    const heal = async (): Promise<string> => {
      if (cell.alive(id) && cell.state.get(id) !== 'up') await cell.kill(id);
      if (!cell.alive(id)) cell.spawn(id);
      return `restarted ${id} without faults`;
    };
    if (!cell.alive(id) || cell.state.get(id) !== 'up') return { detail: `${id} under fiu-run did not come up`, durationMs: 0, heal };
    const exited = await cell.armDiskFault(id, fault, DISK_FAULT_EXIT_MS);
    if (!exited) await cell.kill(id);
    return {
      detail: `${fault.name} in ${id} (under fiu-run): ${exited ? 'it exited' : `not reached within ${DISK_FAULT_EXIT_MS} ms; killed`}`,
      durationMs: rnd.range(500, 3_000),
      heal,
    };
  }

  private faultContext(): FaultContext {
    return {
      cell: this.o.cell,
      workers: this.o.workers,
      random: this.random,
      ttlMs: this.o.ttlMs,
      pickFollower: () => this.pickFollower(),
    };
  }

  /** An up follower of a known leader, at random. */
  private async pickFollower(): Promise<string | undefined> {
    const leader = await this.o.cell.leader();
    const followers = this.upIds().filter((id) => id !== leader);
    return leader === undefined || followers.length === 0 ? undefined : this.random.pick(followers);
  }

  /**
   * A follower stopped and removed from the cell through the admin API;
   * half the time its data folder is wiped too (a replaced disk). At the
   * heal it is added back as a voter and started (with --join when wiped,
   * so it never bootstraps a cell of its own).
   */
  private async replaceMember(): Promise<Started | string> {
    const cell = this.o.cell;
    const rnd = this.random;
    const id = await this.pickFollower();
    if (id === undefined) return 'no leader or no follower up';
    const wipe = rnd.chance(0.5);
    await cell.kill(id);
    const removed = await cell.changeMembership({ method: 'removeMember', request: { id } }, MEMBERSHIP_CHANGE_MS);
    // Wiped only once it is surely out: a voter's disk must never vanish under the cell.
    if (wipe && removed.ok) cell.wipe(id);
    const r = cell.replica(id);
    const heal = async (): Promise<string> => {
      const added = await cell.changeMembership(
        { method: 'addMember', request: { id, address: r.grpc, learner: false, peerAddress: r.peer } },
        MEMBERSHIP_CHANGE_MS,
      );
      if (!cell.alive(id)) cell.spawn(id);
      return `added ${id} back: ${added.ok ? added.detail : `FAILED ${added.detail}`}`;
    };
    return {
      detail: `remove ${id}${removed.ok ? ` (${removed.detail})` : ` FAILED: ${removed.detail}`}${wipe && removed.ok ? ', data folder wiped' : ''}`,
      durationMs: rnd.range(1_000, 6_000),
      heal,
    };
  }

  /** Starts one fault: its description, how long it lasts and how to heal it; or why it was skipped. */
  private async begin(kind: FaultKind): Promise<{ detail: string; durationMs: number; heal?: () => Promise<string> } | string> {
    const cell = this.o.cell;
    const rnd = this.random;
    const restartAfter = (ids: string[]) => async (): Promise<string> => {
      for (const id of ids) if (cell.state.get(id) === 'killed' || (cell.state.get(id) === 'faulted' && !cell.alive(id))) cell.spawn(id);
      return `restarted ${ids.join(',')}`;
    };
    const resumeAfter = (ids: string[]) => async (): Promise<string> => {
      for (const id of ids) cell.resume(id);
      return `SIGCONT ${ids.join(',')}`;
    };
    switch (kind) {
      case 'kill-leader':
      case 'pause-leader': {
        const leader = await cell.leader();
        if (!leader) return 'no leader to hit';
        const durationMs = kind === 'kill-leader' ? rnd.range(500, 4_000) : rnd.range(500, 10_000);
        if (kind === 'kill-leader') {
          const termBefore = (await cell.status(leader, 500))?.term ?? 0;
          await cell.kill(leader);
          void timeFailover(cell, leader, termBefore).then((ms) => this.failoverMs.push(ms ?? null));
          return { detail: `kill -9 leader ${leader}`, durationMs, heal: restartAfter([leader]) };
        }
        cell.pause(leader);
        return { detail: `SIGSTOP leader ${leader}`, durationMs, heal: resumeAfter([leader]) };
      }
      case 'kill-follower':
      case 'pause-followers':
      case 'clock-restart': {
        const leader = await cell.leader();
        const followers = this.upIds().filter((id) => id !== leader);
        if (followers.length === 0) return 'no follower up';
        if (kind === 'kill-follower') {
          const id = rnd.pick(followers);
          await cell.kill(id);
          return { detail: `kill -9 follower ${id}`, durationMs: rnd.range(500, 6_000), heal: restartAfter([id]) };
        }
        if (kind === 'pause-followers') {
          const ids = rnd.shuffle([...followers]).slice(0, rnd.range(1, Math.min(2, followers.length)));
          for (const id of ids) cell.pause(id);
          return { detail: `SIGSTOP ${ids.join(',')}`, durationMs: rnd.range(500, 10_000), heal: resumeAfter(ids) };
        }
        const id = rnd.pick(this.upIds());
        const offset = rnd.pick(['+17m', '-45m', '+3h', '-2h', '+1d', '-1d', '+30d', '-7d']);
        const monotonic = rnd.chance(0.5);
        await cell.kill(id);
        cell.spawn(id, { clock: { faketime: offset, monotonic } });
        return { detail: `restart ${id} under faketime ${offset}${monotonic ? '' : ' (wall clock only)'}`, durationMs: 0 };
      }
      case 'clock-rate': {
        // The monotonic clock too: the node's timers, TTLs and election timeouts all run at the rate.
        const id = rnd.pick(this.upIds());
        const rate = rnd.pick(['0.5', '2']);
        await cell.kill(id);
        cell.spawn(id, { clock: { faketime: `+0 x${rate}`, monotonic: true } });
        return {
          detail: `restart ${id} under faketime at rate x${rate}`,
          durationMs: rnd.range(3_000, 15_000),
          heal: async () => {
            if (!cell.shifted.has(id) || cell.state.get(id) === 'paused') return `${id} left as it is`;
            await cell.kill(id);
            cell.spawn(id);
            return `restart ${id} at the real rate`;
          },
        };
      }
      case 'disk-fault':
        return this.diskFault();
      case 'membership':
        return this.replaceMember();
      case 'slow-leader-isolated':
        return slowLeaderIsolated(this.faultContext());
      case 'lagging-follower':
        return laggingFollower(this.faultContext());
      case 'leader-link-reset':
        return leaderLinkReset(
          cell,
          (ids) => rnd.pick(ids),
          (why) => this.disruptions.push(why),
        );
      case 'kill-minority': {
        const up = this.upIds();
        if (up.length < cell.ids.length) return 'a replica is already down';
        const ids = rnd.shuffle([...up]).slice(0, Math.floor(cell.ids.length / 2) - (cell.ids.length % 2 === 0 ? 1 : 0));
        for (const id of ids) await cell.kill(id);
        return { detail: `kill -9 minority ${ids.join(',')}`, durationMs: rnd.range(1_000, 6_000), heal: restartAfter(ids) };
      }
      case 'partition': {
        const leader = await cell.leader();
        const ids = cell.ids;
        const shapes = ['isolate', 'majority-minority', 'bridge', 'ring', 'one-way'] as const;
        const shape = rnd.pick(shapes);
        let p: Partition;
        if (shape === 'isolate') p = isolate(ids, leader ?? rnd.pick(ids));
        else if (shape === 'majority-minority') p = majorityMinority(ids, rnd, leader && rnd.chance(0.5) ? leader : undefined);
        else if (shape === 'bridge') p = bridge(ids, rnd);
        else if (shape === 'ring') p = ring(ids, rnd);
        else {
          const from = leader ?? rnd.pick(ids);
          const others = ids.filter((i) => i !== from);
          p = oneWay(from, rnd.shuffle([...others]).slice(0, rnd.range(Math.ceil(others.length / 2), others.length)));
        }
        cell.cutLinks(p.cut);
        return {
          detail: `partition ${p.shape}: ${p.description}`,
          durationMs: rnd.range(1_000, 8_000),
          heal: async () => {
            cell.healLinks();
            return `healed ${p.shape}`;
          },
        };
      }
      case 'link-delay':
      case 'link-drop': {
        const node = rnd.pick(cell.ids);
        const links = [...cell.links.entries()].filter(([k]) => k.startsWith(`${node}->`) || k.endsWith(`->${node}`)).map(([, p]) => p);
        const fault =
          kind === 'link-delay' ? { delayMs: rnd.range(20, 300), jitterMs: rnd.range(0, 200) } : { dropRate: rnd.range(1, 10) / 100 };
        for (const l of links) l.setFault(fault);
        return {
          detail: `${kind} on every link of ${node}: ${JSON.stringify(fault)}`,
          durationMs: rnd.range(2_000, 10_000),
          heal: async () => {
            for (const l of links) l.heal();
            return `healed links of ${node}`;
          },
        };
      }
      case 'transfer': {
        const leader = await cell.leader();
        if (!leader) return 'no leader to transfer from';
        const followers = this.upIds().filter((id) => id !== leader);
        if (followers.length === 0) return 'no follower up to transfer to';
        const to = rnd.pick(followers);
        const result = await cell.transferLeadership(leader, to);
        return { detail: `transfer ${leader} -> ${to}: ${result}`, durationMs: 0 };
      }
      case 'pause-client': {
        const candidates = this.o.workers.filter((w) => !w.paused && w.child.exitCode === null);
        if (candidates.length === 0) return 'no client to pause';
        const w = rnd.pick(candidates);
        const durationMs = Math.min(PAUSE_MS_MAX, this.o.ttlMs + rnd.range(500, 3_000));
        w.paused = true;
        w.child.kill('SIGSTOP');
        return {
          detail: `SIGSTOP client ${w.id} for ${durationMs} ms (TTL ${this.o.ttlMs} ms)`,
          durationMs,
          heal: async () => {
            w.paused = false;
            w.child.kill('SIGCONT');
            return `SIGCONT client ${w.id}`;
          },
        };
      }
      case 'client-link': {
        const w = rnd.pick(this.o.workers);
        const leader = await cell.leader();
        const at = leader ? cell.ids.indexOf(leader) : rnd.int(cell.ids.length);
        const what = rnd.pick(['cut-leader', 'cut-one-way', 'delay-all', 'drop-all'] as const);
        let targets: LinkProxy[];
        if (what === 'cut-leader') {
          targets = [w.links[at]!];
          targets[0]!.setFault({ cutUp: true, cutDown: true });
        } else if (what === 'cut-one-way') {
          targets = [w.links[at]!];
          targets[0]!.setFault({ cutDown: true });
        } else if (what === 'delay-all') {
          targets = [...w.links];
          const f = { delayMs: rnd.range(20, 400), jitterMs: rnd.range(0, 300) };
          for (const l of targets) l.setFault(f);
        } else {
          targets = [...w.links];
          for (const l of targets) l.setFault({ dropRate: rnd.range(1, 5) / 100 });
        }
        return {
          detail: `client ${w.id}: ${what}${what.startsWith('cut') ? ` to ${cell.ids[at]}` : ''}`,
          durationMs: rnd.range(2_000, 8_000),
          heal: async () => {
            for (const l of targets) l.heal();
            return `healed client ${w.id} links`;
          },
        };
      }
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
