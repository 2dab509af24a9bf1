/**
 * The fleet of the moves mode: two managed cells of three cell-node
 * replicas, a meta group of three control-plane instances, a router and a
 * session proxy following its routing table, all on 127.0.0.1. Every
 * directed peer link (i→j of a cell, and i→j of the meta group) runs
 * through a fault proxy: a cell node dials its peers at `--peer-dial`, a
 * control-plane instance at its own `--peers` list (its own entry is its
 * real port, `--peer-listen` says so). Processes are killed, paused and
 * restarted by id from their plans.
 *
 * Three replicas per cell, not five: the whole fleet (six cell nodes, three
 * control planes, two front ends, the resource, the workers and the harness)
 * shares a two-core machine with other work, and the nemesis keeps at most
 * one faulty member per group at once, which three replicas tolerate.
 */
import { type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { assert, type Random } from '@fencer/base';
import type { adminpb } from '@fencer/protocol';
import {
  adminClient,
  planControlPlanes,
  planFleet,
  planProxies,
  planRouters,
  spawnPlanned,
  status as adminStatus,
  stopAll,
  waitForControlPlane,
  waitForLeader,
  waitForPort,
  writeCellsFile,
  type CellPlan,
  type ControlPlanePlan,
  type FrontendPlan,
  type ReplicaPlan,
} from '@fencer/fleet';
import { freeFleetPortBase, releasePorts } from '@fencer/fleet/testing';
import { LinkProxy } from './proxy.js';

/** Bugs a moves run can plant in every cell node (support/chaos-node.mjs names them). */
export const MOVES_BUGS = ['importWithoutRevisionRaise'] as const;
export type MovesBug = (typeof MOVES_BUGS)[number];

const CHAOS_NODE_MAIN = fileURLToPath(new URL('../support/chaos-node.mjs', import.meta.url));

export const MOVES_CELLS = 2;
export const MOVES_REPLICAS = 3;
export const MOVES_CONTROL_PLANES = 3;

export interface MovesFleetOptions {
  readonly dataDir: string;
  readonly logDir: string;
  readonly random: Random;
  readonly cellArgs: readonly string[];
  readonly controlPlaneArgs: readonly string[];
  readonly bug?: MovesBug;
}

/** One Raft group of the fleet: a cell's replicas, or the meta group. */
export interface FleetGroup {
  readonly id: string;
  readonly members: readonly string[];
}

type Admin = ReturnType<typeof adminClient>;
type Plan = ReplicaPlan | ControlPlanePlan | FrontendPlan;

/** The ports freeFleetPortBase reserved for this shape (test-cell.mjs's layout), released at stop. */
function reservedPorts(base: number): number[] {
  const ports: number[] = [];
  for (let c = 0; c < MOVES_CELLS; c++)
    for (let i = 1; i <= MOVES_REPLICAS; i++) ports.push(...[0, 100, 200, 300].map((o) => base + 10 * c + i + o));
  ports.push(base + 401, base + 451, base + 501, base + 551);
  for (let i = 1; i <= MOVES_CONTROL_PLANES; i++) ports.push(base + 600 + i, base + 650 + i, base + 700 + i);
  return ports;
}

export class MovesFleet {
  cells: CellPlan[] = [];
  controlPlanes: ControlPlanePlan[] = [];
  router!: FrontendPlan;
  proxy!: FrontendPlan;
  readonly children = new Map<string, ChildProcess>();
  /** Peer link proxies, keyed `from->to` (cell replicas and control-plane instances). */
  readonly links = new Map<string, LinkProxy>();
  readonly paused = new Set<string>();
  readonly killed = new Set<string>();
  private readonly plans = new Map<string, Plan>();
  private readonly admins = new Map<string, Admin>();
  private readonly selfExits: Array<{ id: string; code: number | null; signal: string | null }> = [];
  private portBase = 0;
  private stopping = false;

  constructor(private readonly o: MovesFleetOptions) {}

  get groups(): FleetGroup[] {
    return [
      ...this.cells.map((c) => ({ id: c.id, members: c.replicas.map((r) => r.id) })),
      { id: 'meta', members: this.controlPlanes.map((c) => c.id) },
    ];
  }

  get controlPlaneUrls(): string[] {
    return this.controlPlanes.map((c) => c.url);
  }

  async start(): Promise<void> {
    this.portBase = await freeFleetPortBase(MOVES_CELLS, MOVES_REPLICAS, 1, 1, MOVES_CONTROL_PLANES);
    const env = { FENCER_LOG_LEVEL: process.env.FENCER_LOG_LEVEL ?? 'warn' };
    const extraArgs = ['--managed', ...this.o.cellArgs];
    this.cells = planFleet({
      cells: MOVES_CELLS,
      replicas: MOVES_REPLICAS,
      portBase: this.portBase,
      dataDir: this.o.dataDir,
      extraArgs,
      env,
    });
    for (const cell of this.cells) await this.proxyCellPeers(cell.replicas);
    const cellsFile = writeCellsFile(path.join(this.o.dataDir, 'cells.json'), this.cells);
    this.controlPlanes = planControlPlanes({
      count: MOVES_CONTROL_PLANES,
      portBase: this.portBase,
      dataDir: this.o.dataDir,
      cellsFile,
      adminTokenFile: path.join(this.o.dataDir, 'admin-token'),
      env,
      extraArgs: ['--snapshot-interval-ms', '0', '--cell-poll-ms', '200', ...this.o.controlPlaneArgs],
    });
    await this.proxyMetaPeers();
    const front = { portBase: this.portBase, controlPlaneUrls: this.controlPlaneUrls, env };
    this.router = planRouters({ ...front, count: 1 })[0]!;
    this.proxy = planProxies({ ...front, count: 1 })[0]!;
    for (const p of [...this.cells.flatMap((c) => c.replicas), ...this.controlPlanes, this.router, this.proxy]) this.plans.set(p.id, p);
    for (const r of this.cells.flatMap((c) => c.replicas)) {
      this.admins.set(r.id, adminClient(r.admin));
      this.spawn(r.id);
    }
    await Promise.all(this.cells.map((c) => waitForLeader(c.replicas, 90_000)));
    for (const c of this.controlPlanes) this.spawn(c.id);
    await Promise.all(this.controlPlaneUrls.map((u) => waitForControlPlane(u, 90_000)));
    this.spawn(this.router.id);
    this.spawn(this.proxy.id);
    await Promise.all([waitForPort(this.router.grpc, 60_000), waitForPort(this.proxy.grpc, 60_000)]);
  }

  /** Each replica dials each peer at its own proxy for that directed link. */
  private async proxyCellPeers(replicas: ReplicaPlan[]): Promise<void> {
    for (const from of replicas) {
      const dial: string[] = [];
      for (const to of replicas) {
        if (to.id === from.id) continue;
        dial.push(`${to.id}=${await this.linkProxy(from.id, to.id, to.peer)}`);
      }
      from.argv.push('--peer-dial', dial.join(','));
    }
  }

  /** Each instance gets its own --peers: the others at its proxies for them, itself at its real port (also --peer-listen). */
  private async proxyMetaPeers(): Promise<void> {
    for (const from of this.controlPlanes) {
      const peers: string[] = [];
      for (const to of this.controlPlanes)
        peers.push(`${to.id}=${to.id === from.id ? to.peer : await this.linkProxy(from.id, to.id, to.peer)}`);
      const at = from.argv.indexOf('--peers');
      assert(at > 0, 'a control plane is planned with --peers');
      from.argv[at + 1] = peers.join(',');
      from.argv.push('--peer-listen', from.peer);
    }
  }

  private async linkProxy(from: string, to: string, address: string): Promise<string> {
    const [host, port] = address.split(':');
    const proxy = new LinkProxy(`${from}->${to}`, host!, Number(port), this.o.random.fork());
    await proxy.start();
    this.links.set(`${from}->${to}`, proxy);
    return proxy.address;
  }

  isCellNode(id: string): boolean {
    return this.admins.has(id);
  }

  /** Starts (or restarts) a process from its plan; cell nodes run the chaos entry point when a bug is planted. */
  spawn(id: string): void {
    const plan = this.plans.get(id);
    assert(plan !== undefined, `unknown process ${id}`);
    let started = plan;
    if (this.o.bug && this.isCellNode(id)) {
      const argv = [...plan.argv];
      argv[1] = CHAOS_NODE_MAIN;
      started = { ...plan, argv, env: { ...plan.env, FENCER_CHAOS_BUG: this.o.bug } };
    }
    const child = spawnPlanned(started, { logDir: this.o.logDir });
    child.once('exit', (code, signal) => {
      if (!this.killed.has(id) && !this.stopping) this.selfExits.push({ id, code, signal });
    });
    this.children.set(id, child);
    this.killed.delete(id);
    this.paused.delete(id);
  }

  alive(id: string): boolean {
    const c = this.children.get(id);
    return c !== undefined && c.exitCode === null && c.signalCode === null;
  }

  /** Processes that exited without the harness killing them (always a finding). */
  crashed(): ReadonlyArray<{ id: string; code: number | null; signal: string | null }> {
    return this.selfExits;
  }

  async kill(id: string): Promise<void> {
    const child = this.children.get(id);
    this.killed.add(id);
    this.paused.delete(id);
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await gone;
  }

  pause(id: string): void {
    if (!this.alive(id)) return;
    this.paused.add(id);
    this.children.get(id)!.kill('SIGSTOP');
  }

  resume(id: string): void {
    if (!this.paused.delete(id)) return;
    if (this.alive(id)) this.children.get(id)!.kill('SIGCONT');
  }

  /** Cuts every link between `victim` and the other members of its group, both ways. */
  isolate(group: FleetGroup, victim: string): void {
    for (const other of group.members) {
      if (other === victim) continue;
      this.links.get(`${victim}->${other}`)?.setFault({ cutUp: true, cutDown: true });
      this.links.get(`${other}->${victim}`)?.setFault({ cutUp: true, cutDown: true });
    }
  }

  healLinks(group?: FleetGroup): void {
    for (const [key, p] of this.links) if (!group || group.members.includes(key.split('->')[0]!)) p.heal();
  }

  async cellStatuses(cellId: string, timeoutMs = 500): Promise<adminpb.StatusResponse[]> {
    const cell = this.cells.find((c) => c.id === cellId);
    assert(cell !== undefined, `unknown cell ${cellId}`);
    const up = cell.replicas.filter((r) => this.alive(r.id) && !this.paused.has(r.id));
    const all = await Promise.all(up.map((r) => adminStatus(this.admins.get(r.id)!, timeoutMs)));
    return all.filter((s): s is adminpb.StatusResponse => s !== undefined);
  }

  /** The replica the highest-term answering member names leader, if any. */
  async leaderOf(group: FleetGroup): Promise<string | undefined> {
    if (group.id === 'meta') return this.metaLeader();
    const st = await this.cellStatuses(group.id);
    const best = st.filter((s) => s.role === 'leader').sort((a, b) => b.term - a.term)[0];
    return best?.nodeId;
  }

  /** The control-plane instance whose /v1/health says it leads (one look at each live one). */
  async metaLeader(): Promise<string | undefined> {
    for (const c of this.controlPlanes) {
      if (!this.alive(c.id) || this.paused.has(c.id)) continue;
      try {
        const res = await fetch(new URL('/v1/health', c.url), { signal: AbortSignal.timeout(1_000) });
        if (res.ok && ((await res.json()) as { role?: string }).role === 'leader') return c.id;
      } catch {
        // not answering: the next one
      }
    }
    return undefined;
  }

  /** SIGCONT and SIGTERM everything (SIGKILL after a grace), close proxies and admin clients, release the ports. */
  async stop(): Promise<void> {
    this.stopping = true;
    for (const c of this.children.values()) if (c.exitCode === null && c.signalCode === null) c.kill('SIGCONT');
    await stopAll([...this.children.values()], 5_000);
    for (const a of this.admins.values()) a.close();
    await Promise.all([...this.links.values()].map((p) => p.close()));
    if (this.portBase > 0) releasePorts(reservedPorts(this.portBase));
  }
}
