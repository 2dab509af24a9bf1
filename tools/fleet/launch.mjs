// The local fleet launcher behind `npm start`: runs cells of cell-node
// replicas, a control plane (one instance; `--control-planes 3` for a meta
// group of three), cell routers and session proxies on 127.0.0.1 (default: 2
// cells x 5 replicas, 1 control plane, 1 router, 2 proxies), waits until
// every cell and the meta group have a leader and every router and proxy
// listens, writes fleet.json, prints the endpoints, and stays in the
// foreground until Ctrl-C (or SIGTERM, SIGHUP), then removes fleet.json and
// stops every process it started.
//
// fleet.json exists only while the whole fleet serves: a stale one is
// removed first, and the new one is written (atomically) once every process
// answers, so a script that waits for it starts when it can work. The
// control plane reads its cells from its own file,
// <data-dir>/control-plane/cells.json.
//
// With a control plane, cells run `--managed` (they claim only what the
// control plane assigns), routers and proxies follow its routing table, and
// routers with auto-tenants create a new namespace's tenant through
// `POST /v1/tenants` (the control plane picks the least-loaded cell). Its
// state lives under <data-dir>/control-plane, so tenants survive a restart.
// Auth is off unless `--auth`; the admin token is kept in
// <data-dir>/admin-token (mode 0600), where the CLI looks for it. Cell
// snapshots the control plane uploads go to <data-dir>/snapshots (file://).
//
// `--secure` (implies `--auth`): mutual TLS on every link and TLS to clients
// (decision 0016). A development CA (tools/scripts/dev-ca.mjs) in
// <data-dir>/tls issues each process its certificate; the CLI and the
// examples present <data-dir>/tls/fleet-operator.crt and trust ca.crt
// (FENCER_TLS_* and NODE_EXTRA_CA_CERTS, printed at start). A plaintext
// client is refused everywhere.
//
// `--control-planes 0`: routing without a control plane, through
// <data-dir>/routing.json; auto-tenants place a new namespace on the cell
// with the fewest namespaces and rewrite the file. A restart keeps the
// routes of cells that still exist, so a namespace stays on the cell that
// holds its data.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import { Command, InvalidArgumentError } from 'commander';
import {
  cellNodeBuilt,
  controlPlaneBuilt,
  frontendsBuilt,
  planControlPlanes,
  planFleet,
  planProxies,
  planRouters,
  routingFor,
  spawnPlanned,
  spawnReplica,
  stopAll,
  waitForControlPlane,
  waitForFile,
  waitForLeader,
  waitForPort,
  writeCellsFile,
  writeFleetJson,
  writeRoutingFile,
  useFleetTls,
} from './fleet.mjs';

const int =
  (what, min = 1, max = Infinity) =>
  (v) => {
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < min || n > max) throw new InvalidArgumentError(`${what} must be an integer from ${min} to ${max}`);
    return n;
  };

const program = new Command('fencer-fleet')
  .description('Run a local Fencer fleet on 127.0.0.1.')
  .option('--cells <n>', 'cells', int('--cells', 1, 9), 2)
  .option('--replicas <n>', 'replicas per cell', int('--replicas', 1, 9), 5)
  .option('--routers <n>', 'cell routers (the lock service clients call)', int('--routers', 1, 40), 1)
  .option('--proxies <n>', 'session proxies (where clients send KeepAlive); 0 for none', int('--proxies', 0, 40), 2)
  .option(
    '--control-planes <n>',
    'control-plane instances (a meta group; 3 tolerates the loss of one); 0 for a routing file instead',
    int('--control-planes', 0, 9),
    1,
  )
  .option('--auth', 'control plane requires bearer tokens (the admin token is in <data-dir>/admin-token)', false)
  .option('--secure', 'mutual TLS on every link, TLS to clients, auth on (certificates in <data-dir>/tls)', false)
  .option(
    '--port-base <p>',
    'first port; replica i of cell c listens on base + 10(c-1) + i, router i on base + 400 + i, proxy i on base + 500 + i, control plane i on base + 600 + i',
    int('--port-base', 1024, 64_000),
    7000,
  )
  .option('--data-dir <dir>', 'where replicas keep their data and fleet.json is written', './.fencer')
  .option('--no-auto-tenants', 'answer NOT_FOUND NAMESPACE_NOT_FOUND for a namespace no route names, instead of creating it')
  .option('--logs', 'write process logs to <data-dir>/logs instead of discarding them', true)
  .allowExcessArguments(false);
program.parse(process.argv.slice(2), { from: 'user' });
const opts = program.opts();
if (opts.secure) opts.auth = true;

if (!cellNodeBuilt() || !frontendsBuilt() || (opts.controlPlanes > 0 && !controlPlaneBuilt())) {
  console.error(
    'fencer: apps/cell-node, apps/cell-router, apps/session-proxy or apps/control-plane is not built; run `npm start` (it builds first).',
  );
  process.exit(2);
}
if (opts.auth && opts.controlPlanes === 0) {
  console.error(
    `fencer: ${opts.secure ? '--secure (which implies --auth)' : '--auth'} is the control plane's; it needs --control-planes 1 or more.`,
  );
  process.exit(2);
}

/** The admin token's file, made (mode 0600, never overwritten) in the control plane's own format when it is not there yet. */
function ensureAdminToken(file) {
  mkdirSync(path.dirname(file), { recursive: true });
  try {
    writeFileSync(file, `fencer_admin_${randomBytes(32).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (e) {
    if (e.code !== 'EEXIST') throw e;
  }
}

const startedAt = performance.now();
const dataDir = path.resolve(opts.dataDir);
const logDir = opts.logs ? path.join(dataDir, 'logs') : undefined;
const withControlPlane = opts.controlPlanes > 0;
const tlsDir = path.join(dataDir, 'tls');
// Certificates are issued as each process is planned, so TLS is turned on before any plan.
if (opts.secure) useFleetTls(tlsDir);
const adminTokenFile = path.join(dataDir, 'admin-token');
// With auth the cells check tenant tokens (docs/decisions/0016-tenant-credentials-and-mtls.md) and let the admin token
// reach every namespace: the token is made here, before any process starts (the control plane reads an existing file).
if (opts.auth) ensureAdminToken(adminTokenFile);
const plan = planFleet({
  replicas: opts.replicas,
  cells: opts.cells,
  portBase: opts.portBase,
  dataDir,
  extraArgs: [...(withControlPlane ? ['--managed'] : []), ...(opts.auth ? ['--auth', '--admin-token-file', adminTokenFile] : [])],
});
const fleetFile = path.join(dataDir, 'fleet.json');
const cellsFile = path.join(dataDir, 'control-plane', 'cells.json');
const controlPlanes = withControlPlane
  ? planControlPlanes({
      count: opts.controlPlanes,
      portBase: opts.portBase,
      dataDir,
      cellsFile,
      adminTokenFile,
      auth: opts.auth,
      // One snapshot folder for the whole meta group, so whichever instance leads uploads to and retires from the same place.
      extraArgs: ['--snapshot-store', pathToFileURL(path.join(dataDir, 'snapshots')).href],
    })
  : [];

// Keep the routes of a previous run whose cells still exist: their data is still there.
const routingFile = withControlPlane ? undefined : path.join(dataDir, 'routing.json');
const routing = routingFor(plan);
if (routingFile && existsSync(routingFile)) {
  try {
    const before = JSON.parse(readFileSync(routingFile, 'utf8'));
    const cellIds = new Set(plan.map((c) => c.id));
    routing.version = (Number.isSafeInteger(before.version) ? before.version : 0) + 1;
    routing.routes = (before.routes ?? []).filter((r) => cellIds.has(r.cell));
  } catch (e) {
    console.error(`fencer: ${routingFile} is unreadable (${e.message}); starting with no routes`);
  }
}
if (routingFile) writeRoutingFile(routingFile, routing);

const front = {
  portBase: opts.portBase,
  autoTenants: opts.autoTenants,
  ...(withControlPlane ? { controlPlaneUrls: controlPlanes.map((c) => c.url) } : { routingFile }),
};
const routers = planRouters({ ...front, count: opts.routers });
const proxies = planProxies({ ...front, count: opts.proxies });
const described = () => writeFleetJson(dataDir, plan, { routers, proxies, ...(routingFile ? { routingFile } : {}), controlPlanes });
const children = [];
let stopping = false;

// Waits grow with the fleet: 40 replicas starting at once on two loaded cores take a while to elect.
const LEADER_WAIT_MS = 60_000 + 30_000 * opts.cells;
const CONTROL_PLANE_WAIT_MS = 60_000 + 5_000 * opts.cells;
const FRONT_END_WAIT_MS = 60_000 + 10_000 * (opts.routers + opts.proxies);

async function shutdown(code) {
  if (stopping) return;
  stopping = true;
  console.log('\nstopping the fleet…');
  // First fleet.json, so nothing finds a fleet that is going away; then the processes.
  rmSync(fleetFile, { force: true });
  await stopAll(children);
  console.log('stopped.');
  process.exit(code);
}
process.on('SIGINT', () => shutdown(0));
process.on('SIGTERM', () => shutdown(0));
process.on('SIGHUP', () => shutdown(0));

function start(p, spawnIt) {
  // A signal that arrived while the fleet was coming up: stopAll has its list already, so start nothing more.
  if (stopping) return;
  const child = spawnIt(p, { logDir });
  child.on('exit', (code, signal) => {
    if (!stopping) console.error(`${p.id} (pid ${child.pid}) exited: ${signal ?? `code ${code}`}; logs in ${logDir ?? '(discarded)'}`);
  });
  children.push(child);
}

// A fleet.json left by a run that did not stop cleanly describes processes that are gone.
rmSync(fleetFile, { force: true });
for (const cell of plan) for (const replica of cell.replicas) start(replica, spawnReplica);

try {
  const leaders = await Promise.all(plan.map((c) => waitForLeader(c.replicas, LEADER_WAIT_MS)));
  let token;
  if (withControlPlane) {
    writeCellsFile(cellsFile, plan);
    // The first instance creates the admin token file; the others must read that one.
    start(controlPlanes[0], spawnPlanned);
    if (opts.auth) token = await waitForFile(adminTokenFile, CONTROL_PLANE_WAIT_MS);
    for (const c of controlPlanes.slice(1)) start(c, spawnPlanned);
    await Promise.all(controlPlanes.map((c) => waitForControlPlane(c.url, CONTROL_PLANE_WAIT_MS, token)));
    // Routers create auto-tenants and follow the routing table with the front-end token (not the admin token):
    // the control plane writes it beside the admin token, and it reaches routing, fleet status and tenant creation only.
    if (token) {
      const frontEndToken = await waitForFile(path.join(dataDir, 'front-end-token'), 30_000);
      for (const p of [...routers, ...proxies]) Object.assign(p.env, { FENCER_CONTROL_PLANE_TOKEN: frontEndToken, FENCER_AUTH: '1' });
    }
  }
  for (const p of [...routers, ...proxies]) start(p, spawnPlanned);
  // A router or proxy listens only after its routing source has its first table (front-end.ts), so listening is serving.
  await Promise.all([...routers, ...proxies].map((p) => waitForPort(p.grpc, FRONT_END_WAIT_MS)));
  if (stopping) await new Promise(() => {}); // shutdown() is stopping the fleet and exits the process
  const file = described();
  const upMs = Math.round(performance.now() - startedAt);
  const cpText = withControlPlane ? `, ${opts.controlPlanes} control-plane instance(s)` : '';
  console.log(
    `Fencer is up in ${(upMs / 1000).toFixed(1)} s: ${opts.cells} cell(s) x ${opts.replicas} replicas, ${opts.routers} router(s), ${opts.proxies} proxies${cpText}.\n`,
  );
  console.log('process      lock service      admin                   metrics');
  for (const c of controlPlanes) console.log(`${c.id.padEnd(12)} ${''.padEnd(17)} ${c.url.padEnd(23)} ${c.metrics}`);
  for (const p of [...routers, ...proxies]) console.log(`${p.id.padEnd(12)} ${p.grpc.padEnd(17)} ${''.padEnd(23)} ${p.metrics}`);
  plan.forEach((cell, i) => {
    for (const r of cell.replicas)
      console.log(
        `${r.id.padEnd(12)} ${r.grpc.padEnd(17)} ${r.admin.padEnd(23)} ${r.metrics}${leaders[i].leaderId === r.id ? '   (leader)' : ''}`,
      );
  });
  console.log(
    `\nclients call the router(s) (${routers.map((r) => r.grpc).join(', ')}); KeepAlive goes to the proxies${proxies.length ? ` (${proxies.map((p) => p.grpc).join(', ')})` : ''}.`,
  );
  if (withControlPlane) {
    console.log(
      `control plane: ${controlPlanes.map((c) => c.url).join(', ')} (tenants, routing, fleet status; auth ${opts.auth ? `on, admin token in ${adminTokenFile}` : 'off'})`,
    );
    console.log(
      `routing: followed from the control plane${opts.autoTenants ? ' (auto-tenants: a new namespace becomes a tenant on the least-loaded cell)' : ''}`,
    );
  } else {
    console.log(`routing: ${routingFile}${opts.autoTenants ? ' (auto-tenants: a new namespace goes to the cell with the fewest)' : ''}`);
  }
  console.log(`fleet description: ${file}`);
  if (opts.secure) {
    console.log(`\nsecure: mutual TLS on every link, TLS to clients; plaintext is refused. Certificates in ${tlsDir}. Clients need:`);
    console.log(`  export NODE_EXTRA_CA_CERTS=${path.join(tlsDir, 'ca.crt')} FENCER_TLS_CA=${path.join(tlsDir, 'ca.crt')}`);
    console.log(
      `  export FENCER_TLS_CERT=${path.join(tlsDir, 'fleet-operator.crt')} FENCER_TLS_KEY=${path.join(tlsDir, 'fleet-operator.key')}   # operators: cells' admin ports`,
    );
  }
  console.log('\nTry it (in another terminal):');
  console.log(`  node tools/try/try-lock.mjs                     # open a session, take /ls/demo/hello, show its token`);
  console.log(`  node tools/try/try-lock.mjs /ls/demo/job-1 5000 # hold a lock for 5 s`);
  if (withControlPlane) {
    console.log(`  npx fencer tenants list                         # tenants and their cells (demo is there now)`);
    console.log(`  npx fencer fleet status                         # every cell, its replicas and namespaces`);
  }
  console.log('\nCtrl-C stops the fleet.');
} catch (err) {
  console.error(`fencer: the fleet did not come up: ${err.message}; logs in ${logDir ?? '(discarded)'}`);
  await shutdown(1);
}
