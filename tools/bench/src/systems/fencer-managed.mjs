// Fencer as a whole managed fleet, clients through its front ends: C cells
// of R replicas running --managed, a control plane (its meta group of one
// instance, polling each cell's Status at its production pace), routers and
// session proxies following the control plane's routing table, and tenants
// created through POST /v1/tenants. Lock calls go to the routers (spread
// over them by client), KeepAlive streams to the proxies, as the SDK's
// clients do. Every server process counts: the CPU figures of a run are of
// cells, routers, proxies and the control plane together.
import { startTestFleet } from '@fencer/fleet/testing';
import { FencerClientSystem, NAMESPACE } from './fencer-client.mjs';
import { appVersion, thisBuild } from './builds.mjs';
import { alive } from '../processes.mjs';

/** The proxies' HeartbeatBatch interval: the bench's choice, passed to every proxy. */
export const MANAGED_PROXY_INTERVAL_MS = 250;
/** The control plane polls each cell's Status this often: its default, not the test fleets' 200 ms. */
const CELL_POLL_MS = 1000;
const LEADER_WAIT_MS = 90_000;
const LEADER_WAIT_MS_PER_CELL = 30_000;

/** The tenants of a fleet: `bench` and the heartbeat tenants, then t01..tNN, placed round robin over the cells. */
export function tenantPlan(cells, lockTenants) {
  const cellOf = (i) => `cell-${(i % cells) + 1}`;
  const lock = Array.from({ length: lockTenants }, (_, i) => `t${String(i + 1).padStart(2, '0')}`);
  const heartbeat = Array.from({ length: cells }, (_, i) => `hb-${i + 1}`);
  const routes = { [NAMESPACE]: 'cell-1' };
  lock.forEach((ns, i) => (routes[ns] = cellOf(i)));
  heartbeat.forEach((ns, i) => (routes[ns] = cellOf(i)));
  return { routes, lock, heartbeat };
}

/** The component a process belongs to, by its id in the fleet: replica, router, proxy, control plane. */
export function componentOf(id) {
  if (/^router-/.test(id)) return 'routers';
  if (/^proxy-/.test(id)) return 'proxies';
  if (/^cp-/.test(id)) return 'control plane';
  return 'cell replicas';
}

export class FencerManagedFleet extends FencerClientSystem {
  /** @param {{ cells?: number, replicas?: number, routers?: number, proxies?: number, lockTenants?: number, key?: string, label?: string }} opts */
  constructor(opts = {}) {
    super();
    this.opts = opts;
    this.build = thisBuild();
    this.cellsN = opts.cells ?? 1;
    this.replicasN = opts.replicas ?? 3;
    this.routersN = opts.routers ?? 1;
    this.proxiesN = opts.proxies ?? 1;
    this.proxyIntervalMs = MANAGED_PROXY_INTERVAL_MS;
    this.tenants = tenantPlan(this.cellsN, opts.lockTenants ?? 0);
    this.key = opts.key ?? 'fencer';
    this.label = opts.label ?? `Fencer-${this.replicasN}`;
  }

  get version() {
    const v = (app) => `${app} ${appVersion(this.build, app)}`;
    return `${['cell-node', 'cell-router', 'session-proxy', 'control-plane'].map(v).join(', ')} from this tree, Node ${process.version}`;
  }

  get settings() {
    return `${this.cellsN} cell${this.cellsN > 1 ? 's' : ''} of ${this.replicasN} replicas (--managed, the cell's defaults), one control-plane instance (polling each cell every ${CELL_POLL_MS} ms), ${this.routersN} router${this.routersN > 1 ? 's' : ''} and ${this.proxiesN} session prox${this.proxiesN > 1 ? 'ies' : 'y'} (HeartbeatBatch every ${this.proxyIntervalMs} ms) following its routing table; lock calls to the routers, KeepAlive streams to the proxies; CPU counts every one of these processes`;
  }

  async start() {
    this.fleet = await startTestFleet({
      cells: this.cellsN,
      replicas: this.replicasN,
      routers: this.routersN,
      proxies: this.proxiesN,
      controlPlanes: 1,
      routes: this.tenants.routes,
      heartbeatIntervalMs: this.proxyIntervalMs,
      controlPlaneArgs: ['--cell-poll-ms', String(CELL_POLL_MS)],
      // As the launcher: a cell's replicas start one after another, so the wait grows with the cells.
      leaderWaitMs: LEADER_WAIT_MS + LEADER_WAIT_MS_PER_CELL * this.cellsN,
    });
    this.plan = this.fleet.plan;
    this.proxies = this.fleet.proxies;
    this.children = this.fleet.children;
    this.endpoints = this.fleet.routerEndpoints;
    this.target = this.endpoints[0];
    await this.waitRouted();
  }

  /** Waits until the routers route every tenant (the routing table reaches them by long poll). */
  async waitRouted() {
    for (const ns of Object.keys(this.tenants.routes)) {
      const req = { clientId: 'bench-probe', ttlMs: 10_000, namespace: ns };
      const { res } = await this.call('openSession', req, { budgetMs: LEADER_WAIT_MS });
      await this.call('closeSession', { sessionId: res.sessionId }).catch(() => {});
    }
  }

  /** A session in tenant `ns` (default: the bench tenant). */
  async openSessionIn(ns, ttlS) {
    const { res } = await this.call('openSession', { clientId: 'bench', ttlMs: ttlS * 1000, namespace: ns });
    return this.sessionOf(res.sessionId);
  }

  pids() {
    return [...this.children.values()].filter(alive).map((c) => c.pid);
  }

  /** pid → component (cell replicas, routers, proxies, control plane), for CPU and RSS by component. */
  components() {
    return new Map([...this.children].map(([id, c]) => [c.pid, componentOf(id)]));
  }

  watchEndpoints() {
    return this.endpoints;
  }

  keepAliveTargets() {
    return this.proxies.map((p) => p.grpc);
  }

  leaderOf(cellId) {
    return this.fleet.leaderOf(cellId, LEADER_WAIT_MS);
  }

  async leader() {
    const st = await this.leaderOf('cell-1');
    this.leaderKnown = { id: st.leaderId, pid: this.children.get(st.leaderId)?.pid };
    return this.leaderKnown;
  }

  leaderPid() {
    return this.leaderKnown?.pid;
  }

  /** The pids of every cell's leader now. */
  async leaderPids() {
    const leaders = await Promise.all(this.plan.map((c) => this.leaderOf(c.id)));
    return leaders.map((l) => this.children.get(l.leaderId)?.pid).filter((p) => p !== undefined);
  }

  async stop() {
    this.closeChannels();
    await this.fleet?.stop();
  }
}
