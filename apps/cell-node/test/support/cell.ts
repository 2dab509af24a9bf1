/**
 * Test support: a real cell of cell-node processes on 127.0.0.1, and a small
 * client that follows leader hints and retries UNAVAILABLE with the same
 * request (what the client library does, kept minimal so these tests check
 * the server alone).
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Metadata, credentials, type ServiceError } from '@grpc/grpc-js';
import { FencerError } from '@fencer/base';
import { adminpb, fromServiceError, isRetryable, lockservice } from '@fencer/protocol';
import { adminClient, planFleet, spawnReplica, status, stopAll, waitForLeader, type ReplicaPlan } from '../../../../tools/fleet/fleet.mjs';

export interface Cell {
  replicas: ReplicaPlan[];
  children: Map<string, ChildProcess>;
  dataDir: string;
  client: TestClient;
  leader(): Promise<adminpb.StatusResponse>;
  statusOf(id: string): Promise<adminpb.StatusResponse | undefined>;
  kill(id: string, signal?: NodeJS.Signals): Promise<void>;
  restart(id: string): void;
  signal(id: string, signal: NodeJS.Signals): void;
  stop(): Promise<void>;
}

let portCursor = 0;
/** Port bases spread by worker pid so parallel test files do not collide. */
function portBase(): number {
  portCursor += 1;
  return 20_000 + ((process.pid * 7 + portCursor * 40) % 400) * 100;
}

export async function startCell(opts: { replicas?: number; extraArgs?: string[] } = {}): Promise<Cell> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'fencer-cell-'));
  const [plan] = planFleet({ replicas: opts.replicas ?? 5, portBase: portBase(), dataDir, extraArgs: opts.extraArgs, env: { FENCER_LOG_LEVEL: process.env.FENCER_LOG_LEVEL ?? 'warn' } });
  const replicas = plan!.replicas;
  const children = new Map<string, ChildProcess>();
  const logDir = path.join(dataDir, 'logs');
  const spawn = (r: ReplicaPlan): void => {
    children.set(r.id, spawnReplica(r, { logDir }));
  };
  replicas.forEach(spawn);
  const admins = new Map(replicas.map((r) => [r.id, adminClient(r.admin)]));
  const client = new TestClient(replicas.map((r) => r.grpc));
  const cell: Cell = {
    replicas,
    children,
    dataDir,
    client,
    leader: () => waitForLeader(replicas.filter((r) => children.get(r.id)?.exitCode === null && children.get(r.id)?.signalCode === null), 15_000),
    statusOf: (id) => status(admins.get(id)!, 1000),
    async kill(id, signal = 'SIGKILL') {
      const child = children.get(id)!;
      if (child.exitCode !== null || child.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill(signal);
      });
    },
    restart(id) {
      spawn(replicas.find((r) => r.id === id)!);
    },
    signal(id, signal) {
      children.get(id)!.kill(signal);
    },
    async stop() {
      client.close();
      for (const a of admins.values()) a.close();
      for (const c of children.values()) if (c.signalCode === null && c.exitCode === null) c.kill('SIGCONT');
      await stopAll([...children.values()], 3000);
      if (!process.env.FENCER_KEEP_TEST_DATA) rmSync(dataDir, { recursive: true, force: true });
      else console.log(`test data kept in ${dataDir}`);
    },
  };
  await cell.leader();
  return cell;
}

type Unary<Req, Res> = (req: Req, md: Metadata, opts: { deadline: number }, cb: (err: ServiceError | null, res: Res) => void) => unknown;

/** A minimal retrying client: follows leader-hint, retries retryable codes with the same request. */
export class TestClient {
  private readonly clients = new Map<string, InstanceType<typeof lockservice.LockServiceClient>>();
  private target: string;
  retries = 0;

  constructor(readonly endpoints: string[]) {
    this.target = endpoints[0]!;
  }

  raw(address: string): InstanceType<typeof lockservice.LockServiceClient> {
    let c = this.clients.get(address);
    if (!c) {
      c = new lockservice.LockServiceClient(address, credentials.createInsecure());
      this.clients.set(address, c);
    }
    return c;
  }

  /** One attempt against one address; the error is the FencerError the contract describes. */
  once<Req, Res>(address: string, method: keyof lockservice.LockServiceClient, req: Req, timeoutMs = 10_000): Promise<Res> {
    const c = this.raw(address) as unknown as Record<string, Unary<Req, Res>>;
    return new Promise((resolve, reject) =>
      c[method as string]!.call(c, req, new Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) => (err ? reject(fromServiceError(err)) : resolve(res))),
    );
  }

  async call<Req, Res>(method: keyof lockservice.LockServiceClient, req: Req, opts: { timeoutMs?: number; budgetMs?: number } = {}): Promise<Res> {
    const until = Date.now() + (opts.budgetMs ?? 20_000);
    let attempt = 0;
    for (;;) {
      try {
        return await this.once<Req, Res>(this.target, method, req, opts.timeoutMs ?? 10_000);
      } catch (e) {
        const fe = e as FencerError;
        if (!(fe instanceof FencerError) || !isRetryable(fe.code) || Date.now() > until) throw e;
        this.retries++;
        attempt++;
        this.target = fe.leaderHint && this.endpoints.includes(fe.leaderHint) ? fe.leaderHint : this.endpoints[attempt % this.endpoints.length]!;
        await new Promise((r) => setTimeout(r, Math.min(200, 20 * attempt)));
      }
    }
  }

  openSession(namespace: string, ttlMs = 5000, clientId = 'test'): Promise<lockservice.OpenSessionResponse> {
    return this.call('openSession', { clientId, ttlMs, namespace });
  }

  acquire(req: Partial<lockservice.AcquireRequest> & { sessionId: string; name: string }, opts?: { timeoutMs?: number; budgetMs?: number }): Promise<lockservice.AcquireResponse> {
    return this.call('acquire', { mode: 1, waitMs: 0, requestId: `r-${Math.random()}`, lockDelayMs: 0, ...req }, opts);
  }

  /** Heartbeats sessions every intervalMs on one KeepAlive stream to the current target, reconnecting as needed. */
  keepAlive(sessionIds: string[], intervalMs: number): { stop(): void; acks: () => number; expired: () => string[] } {
    let acks = 0;
    const expired: string[] = [];
    let stream: ReturnType<InstanceType<typeof lockservice.LockServiceClient>['keepAlive']> | undefined;
    const open = (): void => {
      const s = this.raw(this.target).keepAlive();
      s.on('data', (r: lockservice.KeepAliveResponse) => {
        acks++;
        if (r.expired) expired.push(r.sessionId);
      });
      s.on('error', (e: ServiceError) => {
        const fe = fromServiceError(e);
        if (fe.leaderHint && this.endpoints.includes(fe.leaderHint)) this.target = fe.leaderHint;
        else this.target = this.endpoints[(this.endpoints.indexOf(this.target) + 1) % this.endpoints.length]!;
        if (stream === s) stream = undefined;
      });
      stream = s;
    };
    const timer = setInterval(() => {
      if (!stream) open();
      for (const id of sessionIds) stream!.write({ sessionId: id });
    }, intervalMs);
    return {
      stop() {
        clearInterval(timer);
        stream?.end();
      },
      acks: () => acks,
      expired: () => expired,
    };
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
  }
}

/** Polls `check` until it returns a value (not undefined), or fails after timeoutMs. */
export async function eventually<T>(check: () => Promise<T | undefined> | T | undefined, timeoutMs: number, what: string): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export { adminClient };
