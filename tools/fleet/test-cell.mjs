// A real cell of cell-node processes for tests, on 127.0.0.1 ports that are
// free right now. Builds apps/cell-node first when its dist is missing. Every
// process it starts is stopped by stop(), also the SIGSTOPped ones. Shared by
// the cell-node, client and CLI integration tests (and usable by tools).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { adminClient, cellNodeBuilt, planFleet, spawnReplica, status, stopAll, waitForLeader } from './fleet.mjs';

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

/**
 * A block of ports nobody uses: replica i listens on base+i, admin +100,
 * metrics +200, peers +300. Below Linux's ephemeral range (32768 up), so an
 * outgoing connection cannot take a port of a replica that is restarting, or
 * of a member a test adds later inside the block.
 */
export async function freePortBase(replicas) {
  for (let attempt = 0; attempt < 40; attempt++) {
    const base = 20_000 + 10 * Math.floor(Math.random() * 1_200);
    const ports = Array.from({ length: replicas }, (_, i) => [base + i + 1, base + i + 101, base + i + 201, base + i + 301]).flat();
    if (await portsFree(ports)) return base;
  }
  throw new Error('no free block of ports for a test cell');
}

export async function startTestCell(options = {}) {
  if (!cellNodeBuilt()) {
    execFileSync(path.join(root, 'node_modules/.bin/nx'), ['build', 'cell-node', '--output-style=static'], { cwd: root, stdio: 'pipe' });
  }
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
  const children = new Map();
  const spawn = (r) => children.set(r.id, spawnReplica(r, { logDir }));
  replicas.forEach(spawn);
  const admins = new Map(replicas.map((r) => [r.id, adminClient(r.admin)]));
  const alive = (r) => {
    const c = children.get(r.id);
    return c && c.exitCode === null && c.signalCode === null;
  };
  const cell = {
    replicas,
    endpoints: replicas.map((r) => r.grpc),
    children,
    dataDir,
    leader: (timeoutMs = 15_000) => waitForLeader(replicas.filter(alive), timeoutMs),
    leaderAmong: (ids, timeoutMs = 15_000) => waitForLeader(replicas.filter((r) => ids.includes(r.id)), timeoutMs),
    statusOf: (id, timeoutMs = 1000) => status(admins.get(id), timeoutMs),
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
      spawn(replicas.find((r) => r.id === id));
    },
    async stop() {
      for (const a of admins.values()) a.close();
      for (const c of children.values()) if (c.exitCode === null && c.signalCode === null) c.kill('SIGCONT');
      await stopAll([...children.values()], 3_000);
      if (process.env.FENCER_KEEP_TEST_DATA) console.log(`test data kept in ${dataDir}`);
      else rmSync(dataDir, { recursive: true, force: true });
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
