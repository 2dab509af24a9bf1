// The local fleet launcher behind `npm start`: runs cells of cell-node
// replicas, cell routers and session proxies on 127.0.0.1 (default: 2 cells
// x 5 replicas, 1 router, 2 proxies), waits until every cell has a leader
// and every router and proxy listens, writes the routing file and
// fleet.json, prints the endpoints, and stays in the foreground until Ctrl-C
// (or SIGTERM), then stops every process it started.
//
// Routing without a control plane: <data-dir>/routing.json, followed by the
// routers and proxies. Routers run with auto-tenants: the first call naming
// a new namespace places it on the cell with the fewest namespaces and
// rewrites the file. A restart keeps the routes of cells that still exist,
// so a namespace stays on the cell that holds its data.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Command, InvalidArgumentError } from 'commander';
import { cellNodeBuilt, frontendsBuilt, planFleet, planProxies, planRouters, routingFor, spawnPlanned, spawnReplica, stopAll, waitForLeader, waitForPort, writeFleetJson, writeRoutingFile } from './fleet.mjs';

const int = (what, min = 1, max = Infinity) => (v) => {
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
  .option('--port-base <p>', 'first port; replica i of cell c listens on base + 10(c-1) + i, router i on base + 400 + i, proxy i on base + 500 + i', int('--port-base', 1024, 64_000), 7000)
  .option('--data-dir <dir>', 'where replicas keep their data and fleet.json is written', './.fencer')
  .option('--no-auto-tenants', 'answer NOT_FOUND NAMESPACE_NOT_FOUND for a namespace no route names, instead of creating it')
  .option('--logs', 'write process logs to <data-dir>/logs instead of discarding them', true)
  .allowExcessArguments(false);
program.parse(process.argv.slice(2), { from: 'user' });
const opts = program.opts();

if (!cellNodeBuilt() || !frontendsBuilt()) {
  console.error('fencer: apps/cell-node, apps/cell-router or apps/session-proxy is not built; run `npm start` (it builds first).');
  process.exit(2);
}

const startedAt = performance.now();
const dataDir = path.resolve(opts.dataDir);
const logDir = opts.logs ? path.join(dataDir, 'logs') : undefined;
const plan = planFleet({ replicas: opts.replicas, cells: opts.cells, portBase: opts.portBase, dataDir });

// Keep the routes of a previous run whose cells still exist: their data is still there.
const routingFile = path.join(dataDir, 'routing.json');
const routing = routingFor(plan);
if (existsSync(routingFile)) {
  try {
    const before = JSON.parse(readFileSync(routingFile, 'utf8'));
    const cellIds = new Set(plan.map((c) => c.id));
    routing.version = (Number.isSafeInteger(before.version) ? before.version : 0) + 1;
    routing.routes = (before.routes ?? []).filter((r) => cellIds.has(r.cell));
  } catch (e) {
    console.error(`fencer: ${routingFile} is unreadable (${e.message}); starting with no routes`);
  }
}
writeRoutingFile(routingFile, routing);

const front = { portBase: opts.portBase, routingFile, autoTenants: opts.autoTenants };
const routers = planRouters({ ...front, count: opts.routers });
const proxies = planProxies({ ...front, count: opts.proxies });
const children = [];
let stopping = false;

async function shutdown(code) {
  if (stopping) return;
  stopping = true;
  console.log('\nstopping the fleet…');
  await stopAll(children);
  console.log('stopped.');
  process.exit(code);
}
process.on('SIGINT', () => shutdown(0));
process.on('SIGTERM', () => shutdown(0));

function start(p, spawnIt) {
  const child = spawnIt(p, { logDir });
  child.on('exit', (code, signal) => {
    if (!stopping) console.error(`${p.id} (pid ${child.pid}) exited: ${signal ?? `code ${code}`}; logs in ${logDir ?? '(discarded)'}`);
  });
  children.push(child);
}

for (const cell of plan) for (const replica of cell.replicas) start(replica, spawnReplica);

try {
  const leaders = await Promise.all(plan.map((c) => waitForLeader(c.replicas, 60_000)));
  for (const p of [...routers, ...proxies]) start(p, spawnPlanned);
  await Promise.all([...routers, ...proxies].map((p) => waitForPort(p.grpc, 30_000)));
  const file = writeFleetJson(dataDir, plan, { routers, proxies, routingFile });
  const upMs = Math.round(performance.now() - startedAt);
  console.log(`Fencer is up in ${(upMs / 1000).toFixed(1)} s: ${opts.cells} cell(s) x ${opts.replicas} replicas, ${opts.routers} router(s), ${opts.proxies} proxies.\n`);
  console.log('process      lock service      admin             metrics');
  for (const p of [...routers, ...proxies]) console.log(`${p.id.padEnd(12)} ${p.grpc.padEnd(17)} ${''.padEnd(17)} ${p.metrics}`);
  plan.forEach((cell, i) => {
    for (const r of cell.replicas) console.log(`${r.id.padEnd(12)} ${r.grpc.padEnd(17)} ${r.admin.padEnd(17)} ${r.metrics}${leaders[i].leaderId === r.id ? '   (leader)' : ''}`);
  });
  console.log(`\nclients call the router(s) (${routers.map((r) => r.grpc).join(', ')}); KeepAlive goes to the proxies${proxies.length ? ` (${proxies.map((p) => p.grpc).join(', ')})` : ''}.`);
  console.log(`routing: ${routingFile}${opts.autoTenants ? ' (auto-tenants: a new namespace goes to the cell with the fewest)' : ''}`);
  console.log(`fleet description: ${file}`);
  console.log('\nTry it (in another terminal):');
  console.log(`  node tools/try/try-lock.mjs                     # open a session, take /ls/demo/hello, show its token`);
  console.log(`  node tools/try/try-lock.mjs /ls/demo/job-1 5000 # hold a lock for 5 s`);
  console.log('\nCtrl-C stops the fleet.');
} catch (err) {
  console.error(`fencer: the fleet did not come up: ${err.message}; logs in ${logDir ?? '(discarded)'}`);
  await shutdown(1);
}
