/**
 * (A copy of libs/client/test/integration/cell.ts: tests do not import across projects.)
 * A real five-replica cell for integration tests, on 127.0.0.1 ports that are
 * free right now, through the fleet launcher's helpers (tools/fleet). Builds
 * apps/cell-node first when its dist is missing. Every process it starts is
 * stopped by stop(), also the SIGSTOPped ones.
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');

interface PlannedReplica {
  id: string;
  grpc: string;
  admin: string;
  dataDir: string;
  pid: number;
}

interface FleetModule {
  planFleet(opts: { replicas?: number; portBase?: number; dataDir: string; extraArgs?: string[]; env?: Record<string, string> }): { id: string; replicas: PlannedReplica[] }[];
  spawnReplica(replica: PlannedReplica, opts?: { stdio?: 'ignore'; logDir?: string }): ChildProcess;
  waitForLeader(replicas: PlannedReplica[], timeoutMs?: number): Promise<{ nodeId: string; leaderId: string; term: number }>;
  stopAll(children: ChildProcess[], graceMs?: number): Promise<void>;
  cellNodeBuilt(): boolean;
}

export interface Cell {
  readonly endpoints: string[];
  readonly replicas: PlannedReplica[];
  readonly dataDir: string;
  /** Id of the replica every live replica agrees is the leader (waits for one). */
  leader(timeoutMs?: number): Promise<string>;
  /** Waits for a leader among the replicas not excluded (e.g. after killing one). */
  leaderAmong(ids: readonly string[], timeoutMs?: number): Promise<string>;
  signal(id: string, sig: NodeJS.Signals): void;
  /** SIGKILLs one replica and waits until its process is gone. */
  kill(id: string): Promise<void>;
  stop(): Promise<void>;
}

async function portsFree(ports: number[]): Promise<boolean> {
  for (const port of ports) {
    const ok = await new Promise<boolean>((resolve) => {
      const srv = createServer();
      srv.once('error', () => resolve(false));
      srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
    });
    if (!ok) return false;
  }
  return true;
}

export async function startCell(options: { replicas?: number; extraArgs?: string[] } = {}): Promise<Cell> {
  const fleet = (await import(path.join(root, 'tools/fleet/fleet.mjs'))) as FleetModule;
  if (!fleet.cellNodeBuilt()) {
    execFileSync(path.join(root, 'node_modules/.bin/nx'), ['build', 'cell-node', '--output-style=static'], { cwd: root, stdio: 'pipe' });
  }
  const replicas = options.replicas ?? 5;
  // A block of ports nobody uses: replica i listens on base+i, admin +100, metrics +200.
  let portBase = 0;
  for (let attempt = 0; attempt < 40 && portBase === 0; attempt++) {
    const base = 20_000 + 10 * Math.floor(Math.random() * 1_900);
    const ports = Array.from({ length: replicas }, (_, i) => [base + i + 1, base + i + 101, base + i + 201]).flat();
    if (await portsFree(ports)) portBase = base;
  }
  if (portBase === 0) throw new Error('no free block of ports for a test cell');
  const dataDir = mkdtempSync(path.join(tmpdir(), 'fencer-cell-'));
  const plan = fleet.planFleet({ replicas, portBase, dataDir, ...(options.extraArgs ? { extraArgs: options.extraArgs } : {}), env: { FENCER_LOG_LEVEL: 'warn' } });
  const members = (plan[0] as { replicas: PlannedReplica[] }).replicas;
  const children = new Map<string, ChildProcess>();
  for (const r of members) children.set(r.id, fleet.spawnReplica(r, { logDir: path.join(dataDir, 'logs') }));
  const cell: Cell = {
    endpoints: members.map((r) => r.grpc),
    replicas: members,
    dataDir,
    leader: async (timeoutMs = 30_000) => (await fleet.waitForLeader(members, timeoutMs)).leaderId,
    leaderAmong: async (ids, timeoutMs = 30_000) => (await fleet.waitForLeader(members.filter((r) => ids.includes(r.id)), timeoutMs)).leaderId,
    signal: (id, sig) => {
      children.get(id)?.kill(sig);
    },
    kill: async (id) => {
      const child = children.get(id);
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGKILL');
      await gone;
    },
    stop: async () => {
      for (const c of children.values()) c.kill('SIGCONT');
      await fleet.stopAll([...children.values()], 3_000);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  try {
    await cell.leader();
  } catch (e) {
    await cell.stop();
    throw e;
  }
  return cell;
}
