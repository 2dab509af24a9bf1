// Starts and stops a local fleet on 127.0.0.1: cells of cell-node processes,
// cell routers, session proxies and control-plane instances. Used by `npm
// start`, the multi-process tests, the benchmarks and the chaos harness.
// Ports count up from a base: replica i of cell c listens for gRPC on base +
// 10*(c-1) + i, admin on that + 100, metrics on that + 200, the TCP peer
// transport on that + 300; router i on base + 400 + i (metrics + 450), proxy
// i on base + 500 + i (metrics + 550); control-plane instance i serves HTTP
// on base + 600 + i, its meta-group peer transport on base + 650 + i and
// metrics on base + 700 + i.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync, existsSync, readFileSync, renameSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { get as httpsGet } from 'node:https';
import { connect } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { credentials } from '@grpc/grpc-js';
import { adminpb } from '@fencer/protocol';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CELL_NODE_MAIN = path.join(root, 'apps/cell-node/dist/main.js');
export const CELL_ROUTER_MAIN = path.join(root, 'apps/cell-router/dist/main.js');
export const SESSION_PROXY_MAIN = path.join(root, 'apps/session-proxy/dist/main.js');
export const CONTROL_PLANE_MAIN = path.join(root, 'apps/control-plane/dist/main.js');
const DEV_CA = path.join(root, 'tools/scripts/dev-ca.mjs');

// ------------------------------------------------------------ mutual TLS (decision 0016)

/** The folder of this fleet's CA and certificates once useFleetTls ran; undefined: plaintext. */
let tlsDir;

/**
 * Turns mutual TLS on for every fleet planned from now on in this process:
 * the development CA in `dir` (tools/scripts/dev-ca.mjs, made on first use)
 * issues each replica, router and proxy its certificate as it is planned,
 * and this process's admin and test clients present an operator's.
 */
export function useFleetTls(dir) {
  tlsDir = dir;
  issueCerts(['--operator', 'fleet-operator']);
}

/** The fleet's TLS folder, or undefined when the fleet is plaintext. */
export function fleetTlsDir() {
  return tlsDir;
}

function issueCerts(args) {
  if (tlsDir === undefined || args.length === 0) return;
  execFileSync(process.execPath, [DEV_CA, '--dir', tlsDir, ...args], { stdio: 'pipe' });
}

/** The environment that points a process at its certificate `name` (FENCER_TLS_*), or nothing without TLS. */
function tlsEnv(name) {
  if (tlsDir === undefined) return {};
  return {
    FENCER_TLS_CERT: path.join(tlsDir, `${name}.crt`),
    FENCER_TLS_KEY: path.join(tlsDir, `${name}.key`),
    FENCER_TLS_CA: path.join(tlsDir, 'ca.crt'),
  };
}

/** A control plane's --tls-* flags for its certificate `name` (its flags' environment prefix is FENCER_CP_), or none. */
function tlsArgs(name) {
  if (tlsDir === undefined) return [];
  const env = tlsEnv(name);
  return ['--tls-cert', env.FENCER_TLS_CERT, '--tls-key', env.FENCER_TLS_KEY, '--tls-ca', env.FENCER_TLS_CA];
}

/** Trust in the fleet's CA for a process's HTTPS clients (fetch to the control plane), or nothing without TLS. */
export function caEnv() {
  return tlsDir === undefined ? {} : { NODE_EXTRA_CA_CERTS: path.join(tlsDir, 'ca.crt') };
}

/** gRPC credentials of this process towards the fleet: the operator's certificate under TLS, else plaintext. */
export function fleetCredentials() {
  if (tlsDir === undefined) return credentials.createInsecure();
  const read = (f) => readFileSync(path.join(tlsDir, f));
  return credentials.createSsl(read('ca.crt'), read('fleet-operator.key'), read('fleet-operator.crt'));
}

/**
 * @param {{ replicas?: number, cells?: number, portBase?: number, dataDir: string, extraArgs?: string[], env?: Record<string,string>, stdio?: 'inherit'|'ignore'|'pipe', logDir?: string }} opts
 */
export function planFleet(opts) {
  const replicas = opts.replicas ?? 5;
  const cells = opts.cells ?? 1;
  const portBase = opts.portBase ?? 7000;
  const plan = [];
  for (let c = 1; c <= cells; c++) {
    const cellId = `cell-${c}`;
    const members = [];
    for (let i = 1; i <= replicas; i++) {
      const port = portBase + 10 * (c - 1) + i;
      members.push({
        id: `${cellId}-r${i}`,
        grpc: `127.0.0.1:${port}`,
        admin: `127.0.0.1:${port + 100}`,
        metricsListen: `127.0.0.1:${port + 200}`,
        peer: `127.0.0.1:${port + 300}`,
      });
    }
    const peers = members.map((m) => `${m.id}=${m.grpc}`).join(',');
    issueCerts(['--cell', `${cellId}=${members.map((m) => m.id).join(',')}`]);
    plan.push({
      id: cellId,
      replicas: members.map((m) => {
        const dataDir = path.resolve(opts.dataDir, cellId, m.id);
        const argv = [
          process.execPath,
          CELL_NODE_MAIN,
          '--id',
          m.id,
          '--cell-id',
          cellId,
          '--listen',
          m.grpc,
          '--admin-listen',
          m.admin,
          '--metrics-listen',
          m.metricsListen,
          '--peer-listen',
          m.peer,
          '--data-dir',
          dataDir,
          '--peers',
          peers,
          ...(opts.extraArgs ?? []),
        ];
        return {
          id: m.id,
          grpc: m.grpc,
          admin: m.admin,
          peer: m.peer,
          metrics: `http://${m.metricsListen}/metrics`,
          argv,
          env: { UV_USE_IO_URING: '0', FENCER_LOG_LEVEL: process.env.FENCER_LOG_LEVEL ?? 'info', ...(opts.env ?? {}), ...tlsEnv(m.id) },
          cwd: root,
          dataDir,
          pid: 0,
        };
      }),
    });
  }
  return plan;
}

/**
 * The routing file of a fleet: every cell with its replicas' lock-service
 * addresses, and the given routes (namespace -> cell id). Version 1.
 */
export function routingFor(plan, routes = {}) {
  return {
    version: 1,
    cells: plan.map((c) => ({ id: c.id, replicas: c.replicas.map((r) => r.grpc) })),
    routes: Object.entries(routes).map(([namespace, cell]) => ({ namespace, cell, state: 'active' })),
  };
}

export function writeRoutingFile(file, routing) {
  return writeJsonAtomically(file, routing);
}

function planFrontends(kind, opts) {
  const main = kind === 'router' ? CELL_ROUTER_MAIN : SESSION_PROXY_MAIN;
  const offset = kind === 'router' ? 400 : 500;
  const out = [];
  issueCerts(Array.from({ length: opts.count }, (_, k) => [`--${kind}`, `${kind}-${k + 1}`]).flat());
  for (let i = 1; i <= opts.count; i++) {
    const id = `${kind}-${i}`;
    const grpc = `127.0.0.1:${opts.portBase + offset + i}`;
    const metricsListen = `127.0.0.1:${opts.portBase + offset + 50 + i}`;
    // With control-plane URLs, front end i gets them all, rotated to start at
    // instance ((i-1) mod n): it follows that one (the load is spread; any
    // instance answers, followers forward writes) and the next when it dies.
    const cps = opts.controlPlaneUrls ?? [];
    const source = cps.length
      ? ['--control-plane', cps.map((_, k) => cps[(i - 1 + k) % cps.length]).join(',')]
      : ['--routing', opts.routingFile];
    const argv = [process.execPath, main, '--id', id, '--listen', grpc, '--metrics-listen', metricsListen, ...source];
    if (kind === 'router' && opts.autoTenants) argv.push('--auto-tenants');
    if (opts.heartbeatIntervalMs) argv.push('--heartbeat-interval-ms', String(opts.heartbeatIntervalMs));
    argv.push(...(opts.extraArgs ?? []));
    out.push({
      id,
      grpc,
      metrics: `http://${metricsListen}/metrics`,
      argv,
      env: { FENCER_LOG_LEVEL: process.env.FENCER_LOG_LEVEL ?? 'info', ...(opts.env ?? {}), ...tlsEnv(id), ...caEnv() },
      cwd: root,
      pid: 0,
    });
  }
  return out;
}

/** Cell routers in front of the fleet, following its routing file or its control plane. */
export function planRouters(opts) {
  return planFrontends('router', opts);
}

/** Session proxies in front of the fleet, following its routing file or its control plane. */
export function planProxies(opts) {
  return planFrontends('proxy', opts);
}

/**
 * The control plane's own cells file, `{ cells: [{ id, replicas: [{ id,
 * grpc, admin }] }] }` (what `--cells-file` reads), written atomically. The
 * launcher writes it before the control plane starts, so that fleet.json can
 * wait until every process serves.
 */
export function writeCellsFile(file, plan) {
  const cells = plan.map((c) => ({ id: c.id, replicas: c.replicas.map((r) => ({ id: r.id, grpc: r.grpc, admin: r.admin })) }));
  return writeJsonAtomically(file, { cells });
}

function writeJsonAtomically(file, value) {
  mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.tmp-${process.pid}`;
  writeFileSync(tmp, `${JSON.stringify(value, null, 2)}\n`);
  // rename(2) replaces the file in one step: a reader sees the old file, no file, or the whole new one.
  renameSync(tmp, file);
  return file;
}

/**
 * Control-plane instances forming one meta group (ids cp-1..cp-n), managing
 * the cells listed in `cellsFile` (writeCellsFile writes one; a fleet.json
 * has the same shape). The admin token file is shared: with `auth`,
 * start the first instance alone until the file exists (it creates it), so
 * the others read the same token.
 */
export function planControlPlanes(opts) {
  const members = [];
  for (let i = 1; i <= opts.count; i++) {
    members.push({
      id: `cp-${i}`,
      http: `127.0.0.1:${opts.portBase + 600 + i}`,
      peer: `127.0.0.1:${opts.portBase + 650 + i}`,
      metricsListen: `127.0.0.1:${opts.portBase + 700 + i}`,
    });
  }
  const peers = members.map((m) => `${m.id}=${m.peer}`).join(',');
  // Under TLS the HTTP API is HTTPS, and the meta group's peers take control planes' certificates only.
  const scheme = tlsDir === undefined ? 'http' : 'https';
  const urls = members.map((m) => `${m.id}=${scheme}://${m.http}`).join(',');
  issueCerts(members.flatMap((m) => ['--control-plane', m.id]));
  return members.map((m) => {
    const dataDir = path.resolve(opts.dataDir, 'control-plane', m.id);
    const argv = [
      process.execPath,
      CONTROL_PLANE_MAIN,
      '--id',
      m.id,
      '--peers',
      peers,
      '--urls',
      urls,
      '--listen',
      m.http,
      '--metrics',
      m.metricsListen,
      '--data-dir',
      dataDir,
      '--cells-file',
      opts.cellsFile,
      '--admin-token-file',
      opts.adminTokenFile,
      ...(opts.auth ? ['--auth'] : []),
      ...tlsArgs(m.id),
      ...(opts.extraArgs ?? []),
    ];
    return {
      id: m.id,
      url: `${scheme}://${m.http}`,
      http: m.http,
      peer: m.peer,
      metrics: `http://${m.metricsListen}/metrics`,
      argv,
      env: { UV_USE_IO_URING: '0', FENCER_LOG_LEVEL: process.env.FENCER_LOG_LEVEL ?? 'info', ...(opts.env ?? {}), ...caEnv() },
      cwd: root,
      dataDir,
      pid: 0,
    };
  });
}

/**
 * Resolves once the control plane at `url` answers a linearizable read
 * (GET /v1/routing: its meta group has a leader), or rejects after timeoutMs.
 */
/** The status of a GET (http or https; https trusting the fleet's CA), within 2 s. */
function httpStatus(url, token) {
  const get = url.protocol === 'https:' ? httpsGet : httpGet;
  const ca = url.protocol === 'https:' && tlsDir !== undefined ? { ca: readFileSync(path.join(tlsDir, 'ca.crt')) } : {};
  return new Promise((resolve, reject) => {
    const req = get(url, { headers: token ? { authorization: `Bearer ${token}` } : {}, timeout: 2_000, ...ca }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy(new Error('no answer within 2 s')));
    req.on('error', reject);
  });
}

export async function waitForControlPlane(url, timeoutMs = 30_000, token) {
  const until = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < until) {
    try {
      const code = await httpStatus(new URL('/v1/routing', url), token);
      if (code >= 200 && code < 300) return;
      last = `HTTP ${code}`;
    } catch (e) {
      last = e.message;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the control plane at ${url} did not answer within ${timeoutMs} ms (last: ${last})`);
}

/** Resolves with the file's trimmed contents once it exists and is not empty, or rejects after timeoutMs. */
export async function waitForFile(file, timeoutMs = 30_000) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (existsSync(file)) {
      const text = readFileSync(file, 'utf8').trim();
      if (text !== '') return text;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${file} did not appear within ${timeoutMs} ms`);
}

/** Spawns one planned process (a replica, router or proxy: argv/env/cwd); returns the child. */
export function spawnPlanned(p, { stdio = 'ignore', logDir } = {}) {
  return spawnReplica(p, { stdio, logDir });
}

/** Resolves once host:port accepts TCP connections, or rejects after timeoutMs. */
export async function waitForPort(address, timeoutMs = 20_000) {
  const at = address.lastIndexOf(':');
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const ok = await new Promise((resolve) => {
      const s = connect(Number(address.slice(at + 1)), address.slice(0, at));
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${address} did not accept connections within ${timeoutMs} ms`);
}

/** Spawns one replica from its plan entry (argv/env/cwd); returns the child. */
export function spawnReplica(replica, { stdio = 'ignore', logDir } = {}) {
  if (replica.dataDir) mkdirSync(replica.dataDir, { recursive: true });
  let out = stdio;
  if (logDir) {
    mkdirSync(logDir, { recursive: true });
    out = 'pipe';
  }
  const child = spawn(replica.argv[0], replica.argv.slice(1), {
    cwd: replica.cwd,
    env: { ...process.env, ...replica.env },
    stdio: ['ignore', out, out],
  });
  if (logDir) {
    const log = path.join(logDir, `${replica.id}.log`);
    import('node:fs').then(({ createWriteStream }) => {
      const s = createWriteStream(log, { flags: 'a' });
      child.stdout?.pipe(s);
      child.stderr?.pipe(s);
    });
  }
  replica.pid = child.pid ?? 0;
  return child;
}

export function adminClient(address) {
  return new adminpb.CellAdminClient(address, fleetCredentials());
}

/** Admin Status of one replica, or undefined when it does not answer within timeoutMs. */
export function status(client, timeoutMs = 1000) {
  return new Promise((resolve) => {
    client.status({}, { deadline: Date.now() + timeoutMs }, (err, res) => resolve(err ? undefined : res));
  });
}

/** Waits until every given replica reports the same leader with a committed index > 0. */
export async function waitForLeader(replicas, timeoutMs = 20_000) {
  const clients = replicas.map((r) => adminClient(r.admin));
  const until = Date.now() + timeoutMs;
  try {
    while (Date.now() < until) {
      const all = await Promise.all(clients.map((c) => status(c, 500)));
      const leaders = new Set(all.filter(Boolean).map((s) => s.leaderId));
      const leaderStatus = all.find((s) => s && s.role === 'leader');
      if (leaderStatus && leaders.size === 1 && all.filter(Boolean).length > replicas.length / 2 && leaderStatus.commitIndex > 0) {
        return leaderStatus;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`no leader within ${timeoutMs} ms`);
  } finally {
    for (const c of clients) c.close();
  }
}

/** Stops children: SIGTERM, then SIGKILL after graceMs. Resolves when all have exited. */
export async function stopAll(children, graceMs = 5000) {
  await Promise.all(
    children.map(
      (child) =>
        new Promise((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve(undefined);
          const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
          child.once('exit', () => {
            clearTimeout(timer);
            resolve(undefined);
          });
          child.kill('SIGTERM');
        }),
    ),
  );
}

/**
 * fleet.json: `lockService` is where clients send calls (the routers, or
 * the replicas of a fleet without routers), `routers` and `proxies` list the
 * front ends, `controlPlane.urls` the control-plane instances (absent
 * without one; the CLI reads its admin token from `admin-token` beside this
 * file), `cells[]` every replica.
 */
export function writeFleetJson(dataDir, plan, front = {}) {
  const routers = front.routers ?? [];
  const proxies = front.proxies ?? [];
  const fleet = {
    lockService: routers.length > 0 ? routers.map((r) => r.grpc) : plan.flatMap((c) => c.replicas.map((r) => r.grpc)),
    routers: routers.map((r) => ({ id: r.id, grpc: r.grpc, metrics: r.metrics, pid: r.pid })),
    proxies: proxies.map((p) => ({ id: p.id, grpc: p.grpc, metrics: p.metrics, pid: p.pid })),
    ...(front.routingFile ? { routingFile: front.routingFile } : {}),
    ...(front.controlPlanes?.length
      ? {
          controlPlane: {
            urls: front.controlPlanes.map((c) => c.url),
            instances: front.controlPlanes.map((c) => ({ id: c.id, url: c.url, metrics: c.metrics, pid: c.pid })),
          },
        }
      : {}),
    cells: plan.map((c) => ({
      id: c.id,
      replicas: c.replicas.map((r) => ({
        id: r.id,
        grpc: r.grpc,
        admin: r.admin,
        metrics: r.metrics,
        pid: r.pid,
        argv: r.argv,
        env: r.env,
        cwd: r.cwd,
        dataDir: r.dataDir,
      })),
    })),
  };
  return writeJsonAtomically(path.join(dataDir, 'fleet.json'), fleet);
}

export function cellNodeBuilt() {
  return existsSync(CELL_NODE_MAIN);
}

/** Whether the router and proxy apps are built (their dist/main.js exist). */
export function frontendsBuilt() {
  return existsSync(CELL_ROUTER_MAIN) && existsSync(SESSION_PROXY_MAIN);
}

export function controlPlaneBuilt() {
  return existsSync(CONTROL_PLANE_MAIN);
}
