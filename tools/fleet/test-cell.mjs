// A real cell of cell-node processes for tests, on 127.0.0.1 ports that are
// free right now. Builds apps/cell-node first when its dist is missing. Every
// process it starts is stopped by stop(), also the SIGSTOPped ones. Shared by
// the cell-node, client and CLI integration tests (and usable by tools).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  adminClient,
  cellNodeBuilt,
  controlPlaneBuilt,
  frontendsBuilt,
  planControlPlanes,
  planFleet,
  planProxies,
  planRouters,
  routingFor,
  spawnReplica,
  status,
  stopAll,
  waitForControlPlane,
  waitForLeader,
  waitForPort,
  writeRoutingFile,
  useFleetTls,
} from './fleet.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

async function portsFree(ports) {
  for (const port of ports) {
    const ok = await new Promise((resolve) => {
      const srv = createServer();
      srv.once('error', () => resolve(false));
      srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
    });
    if (!ok) return false;
  }
  return true;
}

/*
 * Port reservations between test processes. A port free when probed can be
 * taken a second later by another test's fleet probing at the same moment
 * (several projects' tests run at once): a replica then fails to bind and the
 * test sees a process that is not there. So each port of a chosen block is
 * also reserved by a file in one directory, created exclusively and naming
 * the owner (pid and a token per reservation). A file whose pid is gone is
 * stale and reclaimed; stop() releases its fleet's files.
 */
const RESERVATIONS = path.join(tmpdir(), 'fencer-test-ports');
const reservationOwner = `${process.pid} ${Math.random().toString(36).slice(2)}`;

function pidAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

/** Reserves every port, or none: true when all are now this process's. */
function reservePorts(ports) {
  mkdirSync(RESERVATIONS, { recursive: true });
  const taken = [];
  const release = () => taken.forEach((p) => rmSync(path.join(RESERVATIONS, String(p)), { force: true }));
  for (const port of ports) {
    const file = path.join(RESERVATIONS, String(port));
    for (let tries = 0; ; tries++) {
      try {
        writeFileSync(file, reservationOwner, { flag: 'wx' });
        taken.push(port);
        break;
      } catch (e) {
        if (e.code !== 'EEXIST' || tries > 0) {
          release();
          return false;
        }
        let owner = '';
        try {
          owner = readFileSync(file, 'utf8');
        } catch {
          // released meanwhile: try again
        }
        const pid = Number(owner.split(' ')[0]);
        if (owner !== '' && Number.isInteger(pid) && pidAlive(pid)) {
          release();
          return false;
        }
        rmSync(file, { force: true });
      }
    }
  }
  return true;
}

/** Releases this process's reservations of `ports` (others' files are left alone). */
export function releasePorts(ports) {
  for (const port of ports) {
    const file = path.join(RESERVATIONS, String(port));
    try {
      if (readFileSync(file, 'utf8') === reservationOwner) rmSync(file, { force: true });
    } catch {
      // not reserved
    }
  }
}

/** Reserved for this process and free to bind now; on false nothing stays reserved. */
async function claimPorts(ports) {
  if (!reservePorts(ports)) return false;
  if (await portsFree(ports)) return true;
  releasePorts(ports);
  return false;
}

/**
 * A block of ports nobody uses: replica i listens on base+i, admin +100,
 * metrics +200, peers +300. Below Linux's ephemeral range (32768 up), so an
 * outgoing connection cannot take a port of a replica that is restarting, or
 * of a member a test adds later inside the block.
 */
export async function freePortBase(replicas) {
  for (let attempt = 0; attempt < 40; attempt++) {
    const base = 20_000 + 10 * Math.floor(Math.random() * 1_200);
    if (await claimPorts(cellPorts(base, replicas))) return base;
  }
  throw new Error('no free block of ports for a test cell');
}

/**
 * The ports of a test cell's block, reserved and released together: its
 * replicas' and those a test adds later inside the block (the rest of the
 * decade), at each offset a member uses (+100 admin, +200 metrics, +300 peer,
 * +350 a moved peer port).
 */
function cellPorts(base, replicas) {
  const ports = [];
  for (let i = 1; i <= Math.max(9, replicas); i++) for (const o of [0, 100, 200, 300, 350]) ports.push(base + i + o);
  return ports;
}

function ensureBuilt(projects) {
  execFileSync(
    path.join(root, 'node_modules/.bin/nx'),
    ['run-many', '-t', 'build', `--projects=${projects.join(',')}`, '--output-style=static'],
    { cwd: root, stdio: 'pipe' },
  );
}

/**
 * The processes of a test cell or fleet: spawned from their plans, signalled
 * and restarted by id, and all stopped (SIGCONT first, for stopped ones) with
 * their temporary directory removed.
 */
function processGroup(plans, { dataDir, logDir, admins }) {
  const children = new Map();
  const spawn = (p) => children.set(p.id, spawnReplica(p, { logDir }));
  return {
    children,
    spawn,
    alive(id) {
      const c = children.get(id);
      return c !== undefined && c.exitCode === null && c.signalCode === null;
    },
    signal(id, sig) {
      children.get(id)?.kill(sig);
    },
    async kill(id, sig = 'SIGKILL') {
      const child = children.get(id);
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      const gone = new Promise((resolve) => child.once('exit', () => resolve()));
      child.kill(sig);
      await gone;
    },
    restart(id) {
      spawn(plans.find((p) => p.id === id));
    },
    async stop() {
      for (const a of admins.values()) a.close();
      for (const c of children.values()) if (c.exitCode === null && c.signalCode === null) c.kill('SIGCONT');
      await stopAll([...children.values()], 3_000);
      if (process.env.FENCER_KEEP_TEST_DATA) console.log(`test data kept in ${dataDir}`);
      else rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export async function startTestCell(options = {}) {
  if (!cellNodeBuilt()) ensureBuilt(['cell-node']);
  const replicaCount = options.replicas ?? 5;
  const portBase = await freePortBase(replicaCount);
  const dataDir = mkdtempSync(path.join(tmpdir(), 'fencer-cell-'));
  const [plan] = planFleet({
    replicas: replicaCount,
    portBase,
    dataDir,
    extraArgs: options.extraArgs ?? [],
    env: { FENCER_LOG_LEVEL: process.env.FENCER_LOG_LEVEL ?? 'warn' },
  });
  const replicas = plan.replicas;
  const logDir = path.join(dataDir, 'logs');
  const admins = new Map(replicas.map((r) => [r.id, adminClient(r.admin)]));
  const group = processGroup(replicas, { dataDir, logDir, admins });
  replicas.forEach(group.spawn);
  const alive = (r) => group.alive(r.id);
  const cell = {
    replicas,
    endpoints: replicas.map((r) => r.grpc),
    children: group.children,
    dataDir,
    leader: (timeoutMs = 15_000) => waitForLeader(replicas.filter(alive), timeoutMs),
    leaderAmong: (ids, timeoutMs = 15_000) =>
      waitForLeader(
        replicas.filter((r) => ids.includes(r.id)),
        timeoutMs,
      ),
    statusOf: (id, timeoutMs = 1000) => status(admins.get(id), timeoutMs),
    signal: group.signal,
    kill: group.kill,
    restart: group.restart,
    stop: async () => {
      await group.stop();
      releasePorts(cellPorts(portBase, replicaCount));
    },
  };
  try {
    await cell.leader(30_000);
  } catch (e) {
    await cell.stop();
    throw e;
  }
  return cell;
}

/**
 * A block of ports for `cells` cells plus routers (+400..), proxies (+500..)
 * and control-plane instances (+600.., +650.., +700..), all free now: a
 * `--port-base` for tools/fleet/launch.mjs, too.
 */
export async function freeFleetPortBase(cells, replicas, routers, proxies, controlPlanes = 0) {
  for (let attempt = 0; attempt < 40; attempt++) {
    const base = 20_000 + 1_000 * Math.floor(Math.random() * 12);
    if (await claimPorts(fleetPorts(base, cells, replicas, routers, proxies, controlPlanes))) return base;
  }
  throw new Error('no free block of ports for a test fleet');
}

function fleetPorts(base, cells, replicas, routers, proxies, controlPlanes = 0) {
  const ports = [];
  for (let c = 0; c < cells; c++) for (let i = 1; i <= replicas; i++) ports.push(...[0, 100, 200, 300].map((o) => base + 10 * c + i + o));
  for (let i = 1; i <= routers; i++) ports.push(base + 400 + i, base + 450 + i);
  for (let i = 1; i <= proxies; i++) ports.push(base + 500 + i, base + 550 + i);
  for (let i = 1; i <= controlPlanes; i++) ports.push(base + 600 + i, base + 650 + i, base + 700 + i);
  return ports;
}

/**
 * A throwaway fleet for tests: `cells` cells of `replicas` cell-node
 * processes, and `routers` cell routers and `proxies` session proxies as
 * processes in front of them. Without control-plane instances the front
 * ends follow a routing file routing `routes` (namespace -> cell id); with
 * `controlPlanes` (1 or 3) the cells run `--managed`, a meta group of that
 * many control-plane processes manages them (its move worker and ownership
 * reconciler drive the cells), the front ends follow its routing table, and
 * `routes` become tenants created through `POST /v1/tenants`. Everything
 * lives under one temporary directory and stop() ends every process it
 * started (SIGCONT first, for stopped ones).
 */
export async function startTestFleet(options = {}) {
  const cellCount = options.cells ?? 2;
  const replicaCount = options.replicas ?? 3;
  const routerCount = options.routers ?? 1;
  const proxyCount = options.proxies ?? 2;
  const cpCount = options.controlPlanes ?? 0;
  if (!cellNodeBuilt() || !frontendsBuilt() || (cpCount > 0 && !controlPlaneBuilt()))
    ensureBuilt(['cell-node', 'cell-router', 'session-proxy', ...(cpCount > 0 ? ['control-plane'] : [])]);
  const portBase = await freeFleetPortBase(cellCount, replicaCount, routerCount, proxyCount, cpCount);
  const dataDir = mkdtempSync(path.join(tmpdir(), 'fencer-fleet-'));
  const logDir = path.join(dataDir, 'logs');
  const env = { FENCER_LOG_LEVEL: process.env.FENCER_LOG_LEVEL ?? 'warn' };
  // Mutual TLS (decision 0016): this process's admin and test clients present the fleet operator's certificate.
  useFleetTls(options.tls ? path.join(dataDir, 'tls') : undefined);
  const extraArgs = [...(cpCount > 0 ? ['--managed'] : []), ...(options.extraArgs ?? [])];
  const plan = planFleet({ cells: cellCount, replicas: replicaCount, portBase, dataDir, extraArgs, env });
  const controlPlanes =
    cpCount > 0 ? planTestControlPlanes(plan, { count: cpCount, portBase, dataDir, env, extraArgs: options.controlPlaneArgs }) : [];
  const controlPlaneUrls = controlPlanes.map((c) => c.url);
  const routingFile =
    cpCount > 0 ? undefined : writeRoutingFile(path.join(dataDir, 'routing.json'), routingFor(plan, options.routes ?? {}));
  const front = {
    portBase,
    ...(cpCount > 0 ? { controlPlaneUrls } : { routingFile }),
    env,
    autoTenants: options.autoTenants ?? false,
    heartbeatIntervalMs: options.heartbeatIntervalMs,
  };
  const routers = planRouters({ ...front, count: routerCount, extraArgs: options.routerArgs ?? [] });
  const proxies = planProxies({ ...front, count: proxyCount, extraArgs: options.proxyArgs ?? [] });
  const all = [...plan.flatMap((c) => c.replicas), ...controlPlanes, ...routers, ...proxies];
  const admins = new Map(plan.flatMap((c) => c.replicas).map((r) => [r.id, adminClient(r.admin)]));
  const group = processGroup(all, { dataDir, logDir, admins });
  const fleet = {
    plan,
    routers,
    proxies,
    controlPlanes,
    controlPlaneUrls,
    routingFile,
    dataDir,
    children: group.children,
    routerEndpoints: routers.map((r) => r.grpc),
    proxyEndpoints: proxies.map((p) => p.grpc),
    leaderOf: (cellId, timeoutMs = 15_000) =>
      waitForLeader(
        plan.find((c) => c.id === cellId).replicas.filter((r) => group.alive(r.id)),
        timeoutMs,
      ),
    metaLeader: (timeoutMs = 30_000) =>
      metaLeader(
        controlPlanes.filter((c) => group.alive(c.id)),
        timeoutMs,
      ),
    statusOf: (id, timeoutMs = 1000) => status(admins.get(id), timeoutMs),
    alive: group.alive,
    signal: group.signal,
    kill: group.kill,
    restart: group.restart,
    stop: async () => {
      await group.stop();
      releasePorts(fleetPorts(portBase, cellCount, replicaCount, routerCount, proxyCount, cpCount));
    },
  };
  try {
    plan.flatMap((c) => c.replicas).forEach(group.spawn);
    await Promise.all(plan.map((c) => waitForLeader(c.replicas, options.leaderWaitMs ?? 90_000)));
    if (cpCount > 0) {
      controlPlanes.forEach(group.spawn);
      await Promise.all(controlPlaneUrls.map((u) => waitForControlPlane(u, 90_000)));
      for (const [namespace, cell] of Object.entries(options.routes ?? {})) await createTenant(controlPlaneUrls[0], namespace, cell);
    }
    [...routers, ...proxies].forEach(group.spawn);
    await Promise.all([...routers, ...proxies].map((p) => waitForPort(p.grpc, 60_000)));
  } catch (e) {
    await fleet.stop();
    throw e;
  }
  return fleet;
}

/**
 * A test fleet's meta group: its cells file (the shape --cells-file reads),
 * snapshots only on request, and the cells polled every 200 ms (a test waits
 * on what the control plane sees of them).
 */
function planTestControlPlanes(plan, { count, portBase, dataDir, env, extraArgs }) {
  const cellsFile = path.join(dataDir, 'cells.json');
  const cells = plan.map((c) => ({ id: c.id, replicas: c.replicas.map((r) => ({ id: r.id, grpc: r.grpc, admin: r.admin })) }));
  writeFileSync(cellsFile, `${JSON.stringify({ cells }, null, 2)}\n`);
  return planControlPlanes({
    count,
    portBase,
    dataDir,
    cellsFile,
    adminTokenFile: path.join(dataDir, 'admin-token'),
    env,
    extraArgs: ['--snapshot-interval-ms', '0', '--cell-poll-ms', '200', ...(extraArgs ?? [])],
  });
}

/**
 * POST /v1/tenants, retried while the meta group or the cell is not ready
 * (503). A 409 after a 503 is the first try's record: fine when it names the
 * same cell (the ownership reconciler claims it if the claim failed). Any
 * other refusal throws.
 */
async function createTenant(url, namespace, cell, timeoutMs = 60_000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const res = await fetch(new URL('/v1/tenants', url), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ namespace, cell }),
      signal: AbortSignal.timeout(10_000),
    }).catch((e) => ({ status: 0, text: async () => e.message }));
    if (res.status === 201) return;
    const body = await res.text();
    if (res.status === 409) {
      const got = await fetch(new URL(`/v1/tenants/${namespace}`, url)).then((r) => r.json());
      if (got.cell === cell) return;
    }
    if ((res.status !== 503 && res.status !== 0) || Date.now() > until)
      throw new Error(`creating tenant ${namespace} on ${cell}: HTTP ${res.status} ${body}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The control-plane instance whose /v1/health says it leads the meta group (polls until one does). */
async function metaLeader(instances, timeoutMs) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    for (const c of instances) {
      try {
        const res = await fetch(new URL('/v1/health', c.url), { signal: AbortSignal.timeout(1_000) });
        if (res.ok && (await res.json()).role === 'leader') return c;
      } catch {
        // not answering: try the next
      }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no meta leader among ${instances.map((c) => c.id).join(', ')} within ${timeoutMs} ms`);
}

export { TenantLoad } from './tenant-load.mjs';
