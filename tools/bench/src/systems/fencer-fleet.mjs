// Fencer as a local fleet, clients through its front ends: C cells of R
// replicas, routers and session proxies following one routing file, all
// from this build or another (--baseline), on 127.0.0.1 with fsync on.
// Lock calls go to the routers, KeepAlive streams to the proxies (which
// batch them to the cells' leaders), as the SDK's clients do.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  fleetCredentials,
  planFleet,
  planProxies,
  planRouters,
  routingFor,
  spawnPlanned,
  spawnReplica,
  useFleetTls,
  waitForLeader,
  waitForPort,
  writeRoutingFile,
} from '@fencer/fleet';
import { freeFleetPortBase, releasePorts } from '@fencer/fleet/testing';
import { FencerClientSystem, NAMESPACE } from './fencer-client.mjs';
import { appVersion, requireBuilt, thisBuild, useBuild } from './builds.mjs';
import { waitCaughtUp } from './fencer-cell.mjs';
import { alive, killLeaderOf, stopChildren } from '../processes.mjs';

/**
 * The interval at which the bench's proxies send HeartbeatBatch calls: the
 * bench's choice, passed to every proxy, so the batch bound it reports does
 * not depend on an app's default.
 */
export const PROXY_HEARTBEAT_INTERVAL_MS = 250;
/** Namespaces of the heartbeat load, one per cell of a two-cell fleet. */
export const HEARTBEAT_NAMESPACES = ['hb-a', 'hb-b'];
const LEADER_WAIT_MS = 90_000;
const FRONT_END_WAIT_MS = 60_000;
const STOP_GRACE_MS = 8_000;

export class FencerFleet extends FencerClientSystem {
  /** @param {{ build?: object, key?: string, label?: string, cells?: number, replicas?: number, routers?: number, proxies?: number, proxyIntervalMs?: number, keepData?: boolean, proxyCpuProfDir?: string, routerArgs?: string[][], replicaArgs?: string[], tls?: boolean }} opts */
  constructor(opts = {}) {
    super();
    this.opts = opts;
    this.build = opts.build ?? thisBuild();
    this.cellsN = opts.cells ?? 2;
    this.replicasN = opts.replicas ?? 5;
    this.routersN = opts.routers ?? 1;
    this.proxiesN = opts.proxies ?? 2;
    this.proxyIntervalMs = opts.proxyIntervalMs ?? PROXY_HEARTBEAT_INTERVAL_MS;
    this.key = opts.key ?? 'fencer-fleet';
    this.label = opts.label ?? `Fencer fleet, ${this.routersN} router${this.routersN > 1 ? 's' : ''}`;
    this.children = new Map();
  }

  get version() {
    return `cell-node ${appVersion(this.build, 'cell-node')}, cell-router ${appVersion(this.build, 'cell-router')}, session-proxy ${appVersion(this.build, 'session-proxy')} from ${this.build.key === 'this' ? 'this tree' : this.build.root}, Node ${process.version}`;
  }

  get settings() {
    return `${this.cellsN} cell${this.cellsN > 1 ? 's' : ''} of ${this.replicasN} replicas (the cell's defaults), ${this.routersN} router(s) and ${this.proxiesN} session prox${this.proxiesN === 1 ? 'y' : 'ies'} (HeartbeatBatch every ${this.proxyIntervalMs} ms) following one routing file; lock calls to the routers, KeepAlive streams to the proxies, watchers spread over the routers`;
  }

  /** namespace → cell: the lock load on cell-1, the heartbeat namespaces one per cell. */
  routes() {
    const cellOf = (i) => `cell-${Math.min(i + 1, this.cellsN)}`;
    return { [NAMESPACE]: 'cell-1', ...Object.fromEntries(HEARTBEAT_NAMESPACES.map((ns, i) => [ns, cellOf(i)])) };
  }

  async start() {
    requireBuilt(this.build, ['cell-node', 'cell-router', 'session-proxy']);
    this.portBase = await freeFleetPortBase(this.cellsN, this.replicasN, this.routersN, this.proxiesN);
    this.dataDir = mkdtempSync(path.join(tmpdir(), 'fencer-bench-fleet-'));
    // --secure's links (tls): @fencer/fleet's TLS mode is this process's while this fleet is planned and started,
    // then plaintext again, so another fleet of the same run may be plaintext; this fleet's clients keep TLS.
    if (this.opts.tls) useFleetTls(path.join(this.dataDir, 'tls'));
    try {
      await this.spawnAll();
      if (this.opts.tls) this.channelCredentials = fleetCredentials();
    } finally {
      if (this.opts.tls) useFleetTls(undefined);
    }
  }

  async spawnAll() {
    const env = { FENCER_LOG_LEVEL: process.env.FENCER_LOG_LEVEL ?? 'warn' };
    this.plan = planFleet({ cells: this.cellsN, replicas: this.replicasN, portBase: this.portBase, dataDir: this.dataDir, env });
    for (const c of this.plan) c.replicas.forEach((r) => useBuild(r, this.build, 'cell-node'));
    for (const r of this.plan.flatMap((c) => c.replicas)) r.argv.push(...(this.opts.replicaArgs ?? []));
    const routingFile = writeRoutingFile(path.join(this.dataDir, 'routing.json'), routingFor(this.plan, this.routes()));
    const front = { portBase: this.portBase, routingFile, env, heartbeatIntervalMs: this.proxyIntervalMs };
    this.routers = planRouters({ ...front, count: this.routersN }).map((p) => useBuild(p, this.build, 'cell-router'));
    this.routers.forEach((p, i) => p.argv.push(...(this.opts.routerArgs?.[i] ?? [])));
    this.proxies = planProxies({ ...front, count: this.proxiesN }).map((p) => useBuild(p, this.build, 'session-proxy'));
    // --cpu-prof: the proxies write V8 profiles when they stop (SIGTERM ends them cleanly).
    const profDir = this.opts.proxyCpuProfDir;
    if (profDir)
      for (const p of this.proxies)
        p.argv.splice(1, 0, '--cpu-prof', '--cpu-prof-interval', '250', '--cpu-prof-dir', path.join(profDir, p.id));
    this.replicas = this.plan[0].replicas;
    const logDir = path.join(this.dataDir, 'logs');
    for (const r of this.plan.flatMap((c) => c.replicas)) this.children.set(r.id, spawnReplica(r, { logDir }));
    await Promise.all(this.plan.map((c) => waitForLeader(c.replicas, LEADER_WAIT_MS)));
    for (const p of [...this.routers, ...this.proxies]) this.children.set(p.id, spawnPlanned(p, { logDir }));
    await Promise.all([...this.routers, ...this.proxies].map((p) => waitForPort(p.grpc, FRONT_END_WAIT_MS)));
    this.endpoints = this.routers.map((r) => r.grpc);
    this.target = this.endpoints[0];
  }

  pid(id) {
    return this.children.get(id)?.pid;
  }

  pids() {
    return [...this.children.values()].filter(alive).map((c) => c.pid);
  }

  watchEndpoints() {
    return this.endpoints;
  }

  keepAliveTargets() {
    return this.proxies.map((p) => p.grpc);
  }

  /** Status of one cell's leader (waits for one among its live replicas). */
  leaderOf(cellId) {
    const cell = this.plan.find((c) => c.id === cellId);
    return waitForLeader(
      cell.replicas.filter((r) => alive(this.children.get(r.id))),
      LEADER_WAIT_MS,
    );
  }

  /** cell-1's leader: the cell the lock load runs on. */
  async leader() {
    const st = await this.leaderOf('cell-1');
    this.leaderKnown = { id: st.leaderId, pid: this.pid(st.leaderId) };
    return this.leaderKnown;
  }

  leaderPid() {
    return this.leaderKnown?.pid;
  }

  supports(key) {
    return key !== 'keepalive-batched-10000';
  }

  supportNote() {
    return 'the proxies send these batches: the keepalive row goes through them';
  }

  killLeader() {
    return killLeaderOf(this);
  }

  async restartKilled() {
    if (!this.killed) return;
    const r = this.replicas.find((x) => x.id === this.killed);
    this.children.set(r.id, spawnReplica(r, { logDir: path.join(this.dataDir, 'logs') }));
    this.killed = undefined;
    await waitCaughtUp(this, r);
  }

  async stop() {
    this.closeChannels();
    await stopChildren([...this.children.values()], STOP_GRACE_MS);
    if (this.portBase !== undefined) releaseFleetPorts(this);
    if (!this.opts.keepData && this.dataDir) rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/** Gives back the ports freeFleetPortBase reserved for this fleet (its layout, as @fencer/fleet plans it). */
function releaseFleetPorts(f) {
  const ports = [];
  for (let c = 0; c < f.cellsN; c++)
    for (let i = 1; i <= f.replicasN; i++) ports.push(...[0, 100, 200, 300].map((o) => f.portBase + 10 * c + i + o));
  for (let i = 1; i <= f.routersN; i++) ports.push(f.portBase + 400 + i, f.portBase + 450 + i);
  for (let i = 1; i <= f.proxiesN; i++) ports.push(f.portBase + 500 + i, f.portBase + 550 + i);
  releasePorts(ports);
}
