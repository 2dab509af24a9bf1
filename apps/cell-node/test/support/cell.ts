/**
 * Test support: a real cell of cell-node processes on 127.0.0.1, and a small
 * client that follows leader hints and retries UNAVAILABLE with the same
 * request (what the client library does, kept minimal so these tests check
 * the server alone).
 */
import { Metadata, credentials, type ServiceError } from '@grpc/grpc-js';
import { FencerError } from '@fencer/base';
import { fromServiceError, isRetryable, lockservice } from '@fencer/protocol';
import { adminClient } from '@fencer/fleet';
import { startTestCell, type TestCell } from '@fencer/fleet/testing';

export interface Cell extends TestCell {
  client: TestClient;
}

/** A real cell (tools/fleet/test-cell.mjs) plus a retrying test client over its replicas. */
export async function startCell(opts: { replicas?: number; extraArgs?: string[] } = {}): Promise<Cell> {
  const cell = await startTestCell(opts);
  const client = new TestClient(cell.endpoints);
  const stop = cell.stop;
  return Object.assign(cell, {
    client,
    stop: async () => {
      client.close();
      await stop();
    },
  });
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
