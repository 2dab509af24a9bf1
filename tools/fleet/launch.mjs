// The local fleet launcher behind `npm start`: runs one cell of five
// cell-node replicas on 127.0.0.1, waits for a leader, writes fleet.json,
// prints the endpoints, and stays in the foreground until Ctrl-C (or
// SIGTERM), then stops every process it started.
import path from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { planFleet, spawnReplica, waitForLeader, stopAll, writeFleetJson, cellNodeBuilt } from './fleet.mjs';

const int = (what) => (v) => {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError(`${what} must be a positive integer`);
  return n;
};

const program = new Command('fencer-fleet')
  .description('Run a local Fencer fleet on 127.0.0.1.')
  .option('--replicas <n>', 'replicas per cell', int('--replicas'), 5)
  .option('--cells <n>', 'cells (one for now)', int('--cells'), 1)
  .option('--port-base <p>', 'first port; replica i of cell c listens on base + 10(c-1) + i', int('--port-base'), 7000)
  .option('--data-dir <dir>', 'where replicas keep their data and fleet.json is written', './.fencer')
  .option('--logs', 'write replica logs to <data-dir>/logs instead of discarding them', true)
  .allowExcessArguments(false);
program.parse(process.argv.slice(2), { from: 'user' });
const opts = program.opts();

if (opts.cells !== 1) {
  console.error('fencer: --cells > 1 needs the cell router and control plane, which are not built yet; run one cell.');
  process.exit(2);
}
if (!cellNodeBuilt()) {
  console.error('fencer: apps/cell-node is not built; run `npm start` (it builds first).');
  process.exit(2);
}

const dataDir = path.resolve(opts.dataDir);
const plan = planFleet({ replicas: opts.replicas, cells: opts.cells, portBase: opts.portBase, dataDir });
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

for (const cell of plan) {
  for (const replica of cell.replicas) {
    const child = spawnReplica(replica, { logDir: opts.logs ? path.join(dataDir, 'logs') : undefined });
    child.on('exit', (code, signal) => {
      if (!stopping) console.error(`replica ${replica.id} (pid ${child.pid}) exited: ${signal ?? `code ${code}`}; logs in ${path.join(dataDir, 'logs')}`);
    });
    children.push(child);
  }
}

try {
  const leader = await waitForLeader(plan[0].replicas, 30_000);
  const file = writeFleetJson(dataDir, plan);
  console.log(`Fencer is up: cell ${plan[0].id}, ${opts.replicas} replicas, leader ${leader.leaderId} (term ${leader.term}).\n`);
  console.log('replica      lock service      admin             metrics');
  for (const r of plan[0].replicas) console.log(`${r.id.padEnd(12)} ${r.grpc.padEnd(17)} ${r.admin.padEnd(17)} ${r.metrics}`);
  console.log(`\nfleet description: ${file}`);
  console.log('\nTry it (in another terminal):');
  console.log(`  node tools/try/try-lock.mjs                     # open a session, take /ls/demo/hello, show its token`);
  console.log(`  node tools/try/try-lock.mjs /ls/demo/job-1 5000 # hold a lock for 5 s`);
  console.log('\nCtrl-C stops the fleet.');
} catch (err) {
  console.error(`fencer: the cell did not elect a leader: ${err.message}; logs in ${path.join(dataDir, 'logs')}`);
  await shutdown(1);
}
