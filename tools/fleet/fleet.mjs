// Starts and stops a local fleet of cell-node processes on 127.0.0.1. Used by
// `npm start`, the multi-process tests, the benchmarks and the chaos harness.
// Ports count up from a base: replica i of cell c listens for gRPC on
// base + 10*(c-1) + i, admin on that + 100, metrics on that + 200, the TCP
// peer transport on that + 300.
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { credentials } from '@grpc/grpc-js';
import { adminpb } from '@fencer/protocol';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CELL_NODE_MAIN = path.join(root, 'apps/cell-node/dist/main.js');

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
      members.push({ id: `${cellId}-r${i}`, grpc: `127.0.0.1:${port}`, admin: `127.0.0.1:${port + 100}`, metricsListen: `127.0.0.1:${port + 200}`, peer: `127.0.0.1:${port + 300}` });
    }
    const peers = members.map((m) => `${m.id}=${m.grpc}`).join(',');
    plan.push({
      id: cellId,
      replicas: members.map((m) => {
        const dataDir = path.resolve(opts.dataDir, cellId, m.id);
        const argv = [
          process.execPath,
          CELL_NODE_MAIN,
          '--id', m.id,
          '--cell-id', cellId,
          '--listen', m.grpc,
          '--admin-listen', m.admin,
          '--metrics-listen', m.metricsListen,
          '--peer-listen', m.peer,
          '--data-dir', dataDir,
          '--peers', peers,
          ...(opts.extraArgs ?? []),
        ];
        return {
          id: m.id,
          grpc: m.grpc,
          admin: m.admin,
          peer: m.peer,
          metrics: `http://${m.metricsListen}/metrics`,
          argv,
          env: { UV_USE_IO_URING: '0', FENCER_LOG_LEVEL: process.env.FENCER_LOG_LEVEL ?? 'info', ...(opts.env ?? {}) },
          cwd: root,
          dataDir,
          pid: 0,
        };
      }),
    });
  }
  return plan;
}

/** Spawns one replica from its plan entry (argv/env/cwd); returns the child. */
export function spawnReplica(replica, { stdio = 'ignore', logDir } = {}) {
  mkdirSync(replica.dataDir, { recursive: true });
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
  return new adminpb.CellAdminClient(address, credentials.createInsecure());
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

export function writeFleetJson(dataDir, plan) {
  const fleet = {
    lockService: plan.flatMap((c) => c.replicas.map((r) => r.grpc)),
    cells: plan.map((c) => ({
      id: c.id,
      replicas: c.replicas.map((r) => ({ id: r.id, grpc: r.grpc, admin: r.admin, metrics: r.metrics, pid: r.pid, argv: r.argv, env: r.env, cwd: r.cwd, dataDir: r.dataDir })),
    })),
  };
  mkdirSync(dataDir, { recursive: true });
  const file = path.join(dataDir, 'fleet.json');
  writeFileSync(file, `${JSON.stringify(fleet, null, 2)}\n`);
  return file;
}

export function cellNodeBuilt() {
  return existsSync(CELL_NODE_MAIN);
}
