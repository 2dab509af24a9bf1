/**
 * The cell under test: cell-node processes planned by the fleet launcher,
 * with every directed peer link i→j routed through a fault proxy (node i
 * dials node j's TCP peer port at the proxy's address, given by `--peer-dial`). Replicas are
 * restarted from `fleet.json`'s argv, as an operator would, optionally under
 * Debian's `faketime` with a shifted clock.
 */
import type { ChildProcess } from 'node:child_process';
import { Metadata } from '@grpc/grpc-js';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { assert, type Random } from '@fencer/base';
import type { adminpb } from '@fencer/protocol';
import { adminClient, planFleet, spawnReplica, status as adminStatus, writeFleetJson, type ReplicaPlan } from '@fencer/fleet';
import { LinkProxy, type LinkFault } from './proxy.js';
import type { Link } from './partitions.js';

export const FAKETIME_LIB = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

export function faketimeAvailable(): boolean {
  return existsSync(FAKETIME_LIB);
}

/** Debian fiu-utils' launcher; fiu-ctrl sits beside it. FIU_RUN overrides where it is looked for. */
export const FIU_RUN = process.env['FIU_RUN'] ?? '/usr/bin/fiu-run';

export function fiuAvailable(): boolean {
  return existsSync(FIU_RUN) && existsSync(path.join(path.dirname(FIU_RUN), 'fiu-ctrl'));
}

/** The planted cell bugs the chaos entry point (support/chaos-node.mjs) can switch on. */
export const CHAOS_BUGS = [
  'readWithoutBarrier',
  'heartbeatWithoutConfirmation',
  'grantBeforeCommit',
  'campaignWithoutPreVoteOnConnectionLoss',
] as const;
export type ChaosBug = (typeof CHAOS_BUGS)[number];

const CHAOS_NODE_MAIN = fileURLToPath(new URL('../support/chaos-node.mjs', import.meta.url));

/** How a replica is started: a faketime clock (offset and/or rate), whether it runs under fiu-run, and flags that override fleet.json's. */
export interface SpawnOptions {
  /** faketime's FAKETIME value: an offset ("+3h"), a rate ("+0 x2"), or both. */
  readonly clock?: { readonly faketime: string; readonly monotonic: boolean };
  readonly fiu?: boolean;
  /** cell-node flags appended to fleet.json's argv (the last value of a flag wins), e.g. a longer election timeout. */
  readonly args?: readonly string[];
}

/** Admin calls that change membership, sent to the leader. */
type MembershipCall =
  { method: 'removeMember'; request: adminpb.RemoveMemberRequest } | { method: 'addMember'; request: adminpb.AddMemberRequest };

/** A disk fault armed with fiu-ctrl: the failure point and the errno it fails with. */
export interface DiskFault {
  readonly points: readonly string[];
  readonly errno: number;
  readonly name: string;
}

/** faketime's clock rate in a FAKETIME value ("+0 x2" runs at 2), 1 when none is given. */
export function faketimeRate(faketime: string | undefined): number {
  const m = faketime === undefined ? null : /x([0-9.]+)\s*$/.exec(faketime);
  return m ? Number(m[1]) : 1;
}

export interface CellOptions {
  readonly replicas: number;
  readonly dataDir: string;
  readonly logDir: string;
  readonly extraArgs: readonly string[];
  readonly random: Random;
  /** A planted bug every replica runs with (the chaos entry point instead of cell-node's main). */
  readonly bug?: ChaosBug;
}

type Admin = ReturnType<typeof adminClient>;

/** Whether a TCP port on 127.0.0.1 is free right now. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** A port base (the fleet uses base+1..n, +100, +200) whose ports are all free now. */
async function choosePortBase(replicas: number, random: Random): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    // Above the kernel's ephemeral range (32768-60999), so a restarted replica never finds its port taken by an outgoing connection.
    const base = 61_000 + random.int(43) * 100;
    let free = true;
    for (let i = 1; i <= replicas && free; i++) for (const off of [0, 100, 200, 300]) if (!(await portFree(base + i + off))) free = false;
    if (free) return base;
  }
  throw new Error('no free port range for the cell after 50 tries');
}

/** 'faulted': a disk fault is armed, so the replica is expected to exit by itself (cleanly, non-zero). */
export type ReplicaState = 'up' | 'killed' | 'paused' | 'faulted';

export class ChaosCell {
  readonly replicas: ReplicaPlan[] = [];
  readonly ids: string[] = [];
  readonly children = new Map<string, ChildProcess>();
  readonly state = new Map<string, ReplicaState>();
  /** Peer link proxies, keyed `from->to`. */
  readonly links = new Map<string, LinkProxy>();
  fleetFile = '';
  private readonly admins = new Map<string, Admin>();
  private readonly selfExits: Array<{ id: string; code: number | null; signal: string | null }> = [];
  private stopping = false;
  /** Replicas currently running under faketime, with their FAKETIME value. */
  readonly shifted = new Map<string, string>();
  /** Replicas currently running under fiu-run, with their fiu-ctrl control file prefix. */
  readonly underFiu = new Map<string, string>();
  /** Exits of replicas whose armed disk fault made them exit: the code and the last log lines say whether it was clean. */
  readonly faultExits: Array<{ id: string; code: number | null; signal: string | null; fault: string }> = [];
  private readonly armed = new Map<string, string>();
  /** Replicas that were removed and added back with an empty data folder: they always start with --join (never bootstrap again). */
  private readonly joiners = new Set<string>();

  constructor(private readonly opts: CellOptions) {}

  async start(): Promise<void> {
    const portBase = await choosePortBase(this.opts.replicas, this.opts.random);
    const [plan] = planFleet({
      replicas: this.opts.replicas,
      portBase,
      dataDir: this.opts.dataDir,
      extraArgs: [...this.opts.extraArgs],
      env: { FENCER_LOG_LEVEL: process.env.FENCER_LOG_LEVEL ?? 'warn' },
    });
    this.replicas.push(...plan!.replicas);
    this.ids.push(...this.replicas.map((r) => r.id));
    for (const from of this.replicas) {
      const dial: string[] = [];
      for (const to of this.replicas) {
        if (to.id === from.id) continue;
        const [host, port] = to.peer.split(':');
        const proxy = new LinkProxy(`${from.id}->${to.id}`, host!, Number(port), this.opts.random.fork());
        await proxy.start();
        this.links.set(`${from.id}->${to.id}`, proxy);
        dial.push(`${to.id}=${proxy.address}`);
      }
      from.argv.push('--peer-dial', dial.join(','));
    }
    this.fleetFile = writeFleetJson(this.opts.dataDir, [{ id: plan!.id, replicas: this.replicas }]);
    for (const r of this.replicas) {
      this.admins.set(r.id, adminClient(r.admin));
      this.spawn(r.id);
    }
  }

  replica(id: string): ReplicaPlan {
    const r = this.replicas.find((x) => x.id === id);
    assert(r !== undefined, `unknown replica ${id}`);
    return r;
  }

  /** Starts a replica from fleet.json's argv and env, under faketime and/or fiu-run when asked, with the planted bug if the cell has one. */
  spawn(id: string, how: SpawnOptions = {}): void {
    const fleet = JSON.parse(readFileSync(this.fleetFile, 'utf8')) as { cells: Array<{ replicas: ReplicaPlan[] }> };
    const saved = fleet.cells[0]!.replicas.find((r) => r.id === id);
    assert(saved !== undefined, `${id} is in fleet.json`);
    const env: Record<string, string> = { ...saved.env };
    let argv = [...saved.argv, ...(how.args ?? [])];
    if (this.joiners.has(id)) argv.push('--join');
    if (this.opts.bug) {
      argv[1] = CHAOS_NODE_MAIN;
      env['FENCER_CHAOS_BUG'] = this.opts.bug;
    }
    if (how.clock) {
      env['LD_PRELOAD'] = FAKETIME_LIB;
      env['FAKETIME'] = how.clock.faketime;
      if (!how.clock.monotonic) env['FAKETIME_DONT_FAKE_MONOTONIC'] = '1';
      this.shifted.set(id, how.clock.faketime);
    } else {
      this.shifted.delete(id);
    }
    if (how.fiu) {
      assert(fiuAvailable(), `fiu-run not found at ${FIU_RUN}: install the Debian package fiu-utils`);
      const ctl = path.join(this.opts.logDir, `fiu-${id}`);
      argv = [FIU_RUN, '-x', '-f', ctl, ...argv];
      // libuv's io_uring path would bypass the preloaded fault points.
      env['UV_USE_IO_URING'] = '0';
      this.underFiu.set(id, ctl);
    } else {
      this.underFiu.delete(id);
    }
    this.armed.delete(id);
    const child = spawnReplica({ ...saved, argv, env }, { logDir: this.opts.logDir });
    // An exit the harness did not cause is a crash, even if the nemesis later "kills" and restarts that replica.
    child.once('exit', (code, signal) => {
      const fault = this.armed.get(id);
      if (fault !== undefined && this.state.get(id) === 'faulted') this.faultExits.push({ id, code, signal, fault });
      else if (this.state.get(id) !== 'killed' && !this.stopping) this.selfExits.push({ id, code, signal });
    });
    this.children.set(id, child);
    this.state.set(id, 'up');
    this.replica(id).pid = child.pid ?? 0;
  }

  /**
   * A membership change through the admin API on whichever replica leads,
   * looked for again while leadership moves (as `fencer cell add-member`
   * does), until timeoutMs. Resolves with what happened, never throws.
   */
  async changeMembership(call: MembershipCall, timeoutMs: number): Promise<{ ok: boolean; detail: string }> {
    const until = Date.now() + timeoutMs;
    let last = 'no leader';
    while (Date.now() < until) {
      const leader = await this.leader();
      if (leader !== undefined) {
        const admin = this.admins.get(leader)!;
        const deadline = Math.min(until, Date.now() + 5_000);
        const r = await new Promise<{ ok: boolean; detail: string }>((resolve) => {
          const cb = (err: { details?: string } | null, res?: { index: number }) =>
            resolve(err ? { ok: false, detail: err.details ?? 'error' } : { ok: true, detail: `at index ${res?.index} by ${leader}` });
          if (call.method === 'removeMember') admin.removeMember(call.request, new Metadata(), { deadline }, cb);
          else admin.addMember(call.request, new Metadata(), { deadline }, cb);
        });
        if (r.ok) return r;
        last = r.detail;
      }
      await new Promise((r) => setTimeout(r, 300));
    }
    return { ok: false, detail: `${call.method} gave up after ${timeoutMs} ms: ${last}` };
  }

  /** Deletes a replica's data folder (it must not be running); from now on it starts with --join. */
  wipe(id: string): void {
    assert(!this.alive(id), `${id} is stopped before its data folder is wiped`);
    rmSync(this.dataDirOf(id), { recursive: true, force: true });
    this.joiners.add(id);
  }

  /** The clock rate a replica runs at now (faketime's "xR"; 1 without one). */
  rateOf(id: string): number {
    return faketimeRate(this.shifted.get(id));
  }

  /**
   * Arms a one-shot disk fault in a replica running under fiu-run; the
   * replica is then expected to exit by itself (a storage error is never
   * retried). Resolves with whether it exited within `exitWithinMs`.
   */
  async armDiskFault(id: string, fault: DiskFault, exitWithinMs: number): Promise<boolean> {
    const ctl = this.underFiu.get(id);
    const child = this.children.get(id);
    assert(ctl !== undefined && child !== undefined && this.alive(id), `${id} runs under fiu-run`);
    this.state.set(id, 'faulted');
    this.armed.set(id, fault.name);
    const exited = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), exitWithinMs);
      child.once('exit', () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    const fiuCtrl = path.join(path.dirname(FIU_RUN), 'fiu-ctrl');
    execFileSync(fiuCtrl, [
      ...fault.points.flatMap((p) => ['-c', `enable name=${p},failinfo=${fault.errno},onetime`]),
      '-f',
      ctl,
      String(child.pid),
    ]);
    return exited;
  }

  alive(id: string): boolean {
    const c = this.children.get(id);
    return c !== undefined && c.exitCode === null && c.signalCode === null;
  }

  /** Replicas whose process exited without being killed by the harness (a crash: always a finding). */
  crashed(): ReadonlyArray<{ id: string; code: number | null; signal: string | null }> {
    return this.selfExits;
  }

  /** kill -9; resolves once the process is gone. */
  async kill(id: string): Promise<void> {
    const child = this.children.get(id);
    this.state.set(id, 'killed');
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGKILL');
    });
  }

  pause(id: string): void {
    if (!this.alive(id)) return;
    this.state.set(id, 'paused');
    this.children.get(id)!.kill('SIGSTOP');
  }

  resume(id: string): void {
    if (this.state.get(id) !== 'paused') return;
    this.state.set(id, 'up');
    if (this.alive(id)) this.children.get(id)!.kill('SIGCONT');
  }

  async status(id: string, timeoutMs = 500): Promise<adminpb.StatusResponse | undefined> {
    if (this.state.get(id) !== 'up') return undefined;
    return adminStatus(this.admins.get(id)!, timeoutMs);
  }

  async statuses(timeoutMs = 500): Promise<Map<string, adminpb.StatusResponse>> {
    const all = await Promise.all(this.ids.map(async (id) => [id, await this.status(id, timeoutMs)] as const));
    return new Map(all.filter((e): e is readonly [string, adminpb.StatusResponse] => e[1] !== undefined));
  }

  /** The leader that the highest-term answering replica names, if it is up. */
  async leader(): Promise<string | undefined> {
    const st = await this.statuses();
    let best: adminpb.StatusResponse | undefined;
    for (const s of st.values()) if (s.role === 'leader' && (!best || s.term > best.term)) best = s;
    return best?.nodeId;
  }

  transferLeadership(from: string, to: string, timeoutMs = 5_000): Promise<string> {
    return new Promise((resolve) => {
      this.admins
        .get(from)!
        .transferLeadership({ to }, new Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) =>
          resolve(err ? `error: ${err.details}` : `leader now ${res.leaderId}`),
        );
    });
  }

  link(l: Link): LinkProxy {
    const p = this.links.get(`${l.from}->${l.to}`);
    assert(p !== undefined, `no link ${l.from}->${l.to}`);
    return p;
  }

  cutLinks(links: readonly Link[]): void {
    for (const l of links) this.link(l).setFault({ cutUp: true, cutDown: true });
  }

  faultLinks(links: readonly Link[], fault: LinkFault): void {
    for (const l of links) this.link(l).setFault(fault);
  }

  healLinks(): void {
    for (const p of this.links.values()) p.heal();
  }

  /** Waits until every replica is up, agrees on one leader, and has applied the leader's commit index, which stays put. */
  async converge(timeoutMs: number): Promise<{ ok: true; commitIndex: number; leader: string; term: number } | { ok: false; why: string }> {
    const until = Date.now() + timeoutMs;
    let last = -1;
    let why = 'no status yet';
    while (Date.now() < until) {
      const st = await this.statuses(1_000);
      const leaders = [...st.values()].filter((s) => s.role === 'leader');
      const leader = leaders.sort((a, b) => b.term - a.term)[0];
      if (st.size < this.ids.length) why = `${this.ids.length - st.size} replicas do not answer`;
      else if (!leader) why = 'no leader';
      else if ([...st.values()].some((s) => s.leaderId !== leader.nodeId)) why = 'replicas disagree on the leader';
      else if ([...st.values()].some((s) => s.appliedIndex !== leader.commitIndex)) why = `not all replicas applied ${leader.commitIndex}`;
      else if (leader.commitIndex !== last) {
        last = leader.commitIndex;
        why = 'commit index still moving';
      } else {
        return { ok: true, commitIndex: leader.commitIndex, leader: leader.nodeId, term: leader.term };
      }
      await new Promise((r) => setTimeout(r, 1_000));
    }
    return { ok: false, why };
  }

  /** SIGCONT and SIGTERM every replica, SIGKILL after graceMs; closes proxies and admin clients. */
  async stop(graceMs = 5_000): Promise<void> {
    this.stopping = true;
    await Promise.all(
      [...this.children.values()].map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
            child.once('exit', () => {
              clearTimeout(timer);
              resolve();
            });
            child.kill('SIGCONT');
            child.kill('SIGTERM');
          }),
      ),
    );
    for (const a of this.admins.values()) a.close();
    await Promise.all([...this.links.values()].map((p) => p.close()));
  }

  dataDirOf(id: string): string {
    return path.resolve(this.replica(id).dataDir);
  }
}
