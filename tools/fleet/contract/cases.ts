/**
 * The contract's test cases (lockservice.proto and docs/architecture.md, "Promises"),
 * runnable against any front of the lock service: one cell's replicas (the
 * cell-node tests) or a fleet of cells behind a cell router and session
 * proxies (the router tests). Also the small retrying test client they use.
 * Runs under vitest only: it defines describe/it blocks.
 */
import { describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { Metadata, type ServiceError } from '@grpc/grpc-js';
import { FencerError } from '@fencer/base';
import { fromServiceError, internalpb, isRetryable, lockservice } from '@fencer/protocol';
import type { TestCell } from '../test-cell.mjs';
import { fleetCredentials } from '../fleet.mjs';

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
      // No grpc-js retry buffer: a stream of thousands of messages would copy it on every write.
      c = new lockservice.LockServiceClient(address, fleetCredentials(), { 'grpc.per_rpc_retry_buffer_size': 0 });
      this.clients.set(address, c);
    }
    return c;
  }

  /** One attempt against one address; the error is the FencerError the contract describes. */
  once<Req, Res>(address: string, method: keyof lockservice.LockServiceClient, req: Req, timeoutMs = 10_000): Promise<Res> {
    const c = this.raw(address) as unknown as Record<string, Unary<Req, Res>>;
    return new Promise((resolve, reject) =>
      c[method as string]!.call(c, req, new Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) =>
        err ? reject(fromServiceError(err)) : resolve(res),
      ),
    );
  }

  async call<Req, Res>(
    method: keyof lockservice.LockServiceClient,
    req: Req,
    opts: { timeoutMs?: number; budgetMs?: number } = {},
  ): Promise<Res> {
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
        this.target =
          fe.leaderHint && this.endpoints.includes(fe.leaderHint) ? fe.leaderHint : this.endpoints[attempt % this.endpoints.length]!;
        await new Promise((r) => setTimeout(r, Math.min(200, 20 * attempt)));
      }
    }
  }

  openSession(namespace: string, ttlMs = 5000, clientId = 'test'): Promise<lockservice.OpenSessionResponse> {
    return this.call('openSession', { clientId, ttlMs, namespace });
  }

  acquire(
    req: Partial<lockservice.AcquireRequest> & { sessionId: string; name: string },
    opts?: { timeoutMs?: number; budgetMs?: number },
  ): Promise<lockservice.AcquireResponse> {
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

/** The error a call failed with; fails the test if the call succeeded. */
export async function errorOf(p: Promise<unknown>): Promise<FencerError> {
  try {
    await p;
  } catch (e) {
    return e as FencerError;
  }
  throw new Error('expected the call to fail');
}

/** What the cases need from the system under test. */
export interface ContractTarget {
  readonly client: TestClient;
  /** Where a call is served by a leader: the cell's leader, or the router. */
  leaderAddress(): Promise<string>;
  /** Where a call reaches a non-leader first: a follower, or the router. */
  followerAddress(): Promise<string>;
  /** Every address that accepts KeepAlive: each replica, or the routers and proxies. */
  keepAliveAddresses(): string[];
  /** Any one address of the lock service. */
  anyAddress(): string;
  /** The cell itself, for the cell-only cases (HeartbeatBatch, metrics). */
  readonly cell?: TestCell;
  leaderMetrics?(): Promise<string>;
}

export interface ContractSuiteOptions {
  /** 'cell' adds the cases only a cell answers (its internal HeartbeatBatch and its metrics). */
  readonly kind: 'cell' | 'router';
  /** The system under test, ready once beforeAll has run. */
  readonly target: () => ContractTarget;
}

/**
 * Defines the contract's cases. A cell must run with
 * `--watch-history-max 200 --watch-progress-ms 1000` (the COMPACTED case
 * writes 210 entries).
 */
export function contractSuite(opts: ContractSuiteOptions): void {
  const { AcquireStatus: S, LockMode: M, WatchEventType: W } = lockservice;
  let ns = 0;
  /** A fresh namespace per test keeps tests independent inside one cell. */
  const freshNs = (): string => `t${++ns}-${process.pid}`;
  // Read at each use: the target exists only once the caller's beforeAll has run.
  const t = opts.target;

  async function session(namespace: string, ttlMs = 5000): Promise<string> {
    return (await t().client.openSession(namespace, ttlMs)).sessionId;
  }

  describe('OpenSession', () => {
    it('returns a session id that embeds its namespace, and clamps the TTL to the server bounds', async () => {
      const n = freshNs();
      const a = await t().client.openSession(n, 5000);
      expect(a.sessionId.startsWith(`${n}:`)).toBe(true);
      expect(a.ttlMs).toBe(5000);
      expect((await t().client.openSession(n, 0)).ttlMs).toBe(12_000);
      expect((await t().client.openSession(n, 10)).ttlMs).toBe(2_000);
      expect((await t().client.openSession(n, 2 ** 63)).ttlMs).toBe(3_600_000);
      const ids = new Set(await Promise.all([1, 2, 3].map(() => session(n))));
      expect(ids.size).toBe(3);
    });
  });

  describe('Acquire, Release, CheckToken, GetLock', () => {
    it('grants a try-lock with a token, refuses a busy try-lock without queueing, and fences by token', async () => {
      const n = freshNs();
      const name = `/ls/${n}/invoice/42`;
      const [a, b] = [await session(n), await session(n)];
      const g = await t().client.acquire({ sessionId: a, name });
      expect(g.status).toBe(S.ACQUIRE_STATUS_GRANTED);
      expect(g.token).toBeGreaterThan(0);
      expect(g.revision).toBe(g.token);
      expect(g.holders).toEqual([{ sessionId: a, token: g.token, mode: M.LOCK_MODE_EXCLUSIVE, clientId: 'test' }]);

      const busy = await t().client.acquire({ sessionId: b, name });
      expect(busy.status).toBe(S.ACQUIRE_STATUS_TIMED_OUT);
      const lock = await t().client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name });
      expect(lock.lock!.waiters).toEqual([]);
      expect(lock.revision).toBeGreaterThanOrEqual(busy.revision);

      const check = await t().client.call<lockservice.CheckTokenRequest, lockservice.CheckTokenResponse>('checkToken', {
        name,
        token: g.token,
      });
      expect(check).toMatchObject({ current: true, latestToken: g.token });

      // A stale token releases nothing.
      expect(
        (
          await t().client.call<lockservice.ReleaseRequest, lockservice.ReleaseResponse>('release', {
            sessionId: a,
            name,
            token: g.token - 1,
          })
        ).ok,
      ).toBe(false);
      expect(
        (await t().client.call<lockservice.ReleaseRequest, lockservice.ReleaseResponse>('release', { sessionId: b, name, token: g.token }))
          .ok,
      ).toBe(false);
      expect(
        (await t().client.call<lockservice.ReleaseRequest, lockservice.ReleaseResponse>('release', { sessionId: a, name, token: g.token }))
          .ok,
      ).toBe(true);
      const after = await t().client.call<lockservice.CheckTokenRequest, lockservice.CheckTokenResponse>('checkToken', {
        name,
        token: g.token,
      });
      expect(after).toMatchObject({ current: false, latestToken: 0 });

      // Every later grant of the same name has a larger token.
      const g2 = await t().client.acquire({ sessionId: b, name });
      expect(g2.status).toBe(S.ACQUIRE_STATUS_GRANTED);
      expect(g2.token).toBeGreaterThan(g.token);
    });

    it('holds a waiting Acquire open until the holder releases, FIFO, then grants with a larger token', async () => {
      const n = freshNs();
      const name = `/ls/${n}/job`;
      const [a, b, c] = [await session(n), await session(n), await session(n)];
      const g = await t().client.acquire({ sessionId: a, name });
      const waitB = t().client.acquire({ sessionId: b, name, waitMs: 10_000, requestId: 'b1' });
      await eventually(
        async () =>
          (await t().client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!.waiters.length === 1
            ? true
            : undefined,
        5000,
        'b queued',
      );
      const waitC = t().client.acquire({ sessionId: c, name, waitMs: 10_000, requestId: 'c1' });
      const queued = await eventually(
        async () => {
          const l = (await t().client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!;
          return l.waiters.length === 2 ? l : undefined;
        },
        5000,
        'c queued',
      );
      expect(queued.waiters.map((w) => w.sessionId)).toEqual([b, c]);
      await t().client.call('release', { sessionId: a, name, token: g.token });
      const gb = await waitB;
      expect(gb.status).toBe(S.ACQUIRE_STATUS_GRANTED);
      expect(gb.token).toBeGreaterThan(g.token);
      await t().client.call('release', { sessionId: b, name, token: gb.token });
      const gc = await waitC;
      expect(gc.status).toBe(S.ACQUIRE_STATUS_GRANTED);
      expect(gc.token).toBeGreaterThan(gb.token);
    });

    it('grants consecutive shared waiters together and never lets a shared request overtake a queued exclusive one', async () => {
      const n = freshNs();
      const name = `/ls/${n}/config`;
      const [w, r1, r2, x, r3] = [await session(n), await session(n), await session(n), await session(n), await session(n)];
      const gw = await t().client.acquire({ sessionId: w, name });
      const p1 = t().client.acquire({ sessionId: r1, name, mode: M.LOCK_MODE_SHARED, waitMs: 10_000 });
      const p2 = t().client.acquire({ sessionId: r2, name, mode: M.LOCK_MODE_SHARED, waitMs: 10_000 });
      await eventually(
        async () =>
          (await t().client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!.waiters.length === 2
            ? true
            : undefined,
        5000,
        'readers queued',
      );
      const px = t().client.acquire({ sessionId: x, name, waitMs: 10_000 });
      await eventually(
        async () =>
          (await t().client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!.waiters.length === 3
            ? true
            : undefined,
        5000,
        'writer queued',
      );
      const p3 = t().client.acquire({ sessionId: r3, name, mode: M.LOCK_MODE_SHARED, waitMs: 10_000 });
      await eventually(
        async () =>
          (await t().client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!.waiters.length === 4
            ? true
            : undefined,
        5000,
        'late reader queued',
      );
      await t().client.call('release', { sessionId: w, name, token: gw.token });
      const [g1, g2] = await Promise.all([p1, p2]);
      expect(g1.status).toBe(S.ACQUIRE_STATUS_GRANTED);
      expect(g2.status).toBe(S.ACQUIRE_STATUS_GRANTED);
      expect(g1.token).toBe(g2.token); // granted together, by one entry
      const now = (await t().client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!;
      expect(now.mode).toBe(M.LOCK_MODE_SHARED);
      expect(now.waiters.map((v) => v.sessionId)).toEqual([x, r3]);
      await t().client.call('release', { sessionId: r1, name, token: g1.token });
      await t().client.call('release', { sessionId: r2, name, token: g2.token });
      const gx = await px;
      expect(gx.status).toBe(S.ACQUIRE_STATUS_GRANTED);
      await t().client.call('release', { sessionId: x, name, token: gx.token });
      expect((await p3).status).toBe(S.ACQUIRE_STATUS_GRANTED);
    });

    it('ends a wait with TIMED_OUT when wait_ms passes, removing the waiter', async () => {
      const n = freshNs();
      const name = `/ls/${n}/slow`;
      const [a, b] = [await session(n), await session(n)];
      await t().client.acquire({ sessionId: a, name });
      const started = Date.now();
      const r = await t().client.acquire({ sessionId: b, name, waitMs: 600 });
      expect(r.status).toBe(S.ACQUIRE_STATUS_TIMED_OUT);
      expect(Date.now() - started).toBeGreaterThanOrEqual(550);
      const l = await t().client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name });
      expect(l.lock!.waiters).toEqual([]);
    });

    it('cancels the wait of a client that cancels its call', async () => {
      const n = freshNs();
      const name = `/ls/${n}/cancel`;
      const [a, b] = [await session(n), await session(n)];
      await t().client.acquire({ sessionId: a, name });
      const addr = await t().leaderAddress();
      const call = t()
        .client.raw(addr)
        .acquire({ sessionId: b, name, mode: 1, waitMs: 30_000, requestId: 'cx', lockDelayMs: 0 }, () => {});
      await eventually(
        async () =>
          (await t().client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!.waiters.length === 1
            ? true
            : undefined,
        5000,
        'queued',
      );
      call.cancel();
      await eventually(
        async () =>
          (await t().client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!.waiters.length === 0
            ? true
            : undefined,
        5000,
        'waiter removed',
      );
    });

    it('answers a retry with the same request_id with the same outcome', async () => {
      const n = freshNs();
      const name = `/ls/${n}/idem`;
      const [a, b] = [await session(n), await session(n)];
      const req = { sessionId: a, name, requestId: randomUUID() };
      const first = await t().client.acquire(req);
      const again = await t().client.acquire(req);
      expect(again.status).toBe(S.ACQUIRE_STATUS_GRANTED);
      expect(again.token).toBe(first.token);
      const busyReq = { sessionId: b, name, requestId: randomUUID() };
      const busy = await t().client.acquire(busyReq);
      await t().client.call('release', { sessionId: a, name, token: first.token });
      // Now free, but the retry of the timed-out attempt still answers TIMED_OUT.
      expect((await t().client.acquire(busyReq)).status).toBe(busy.status);
    });
  });

  describe('ListLocks', () => {
    it('lists live locks under a prefix in name order, page by page', async () => {
      const n = freshNs();
      const a = await session(n);
      const names = ['c', 'a', 'e', 'b', 'd'].map((x) => `/ls/${n}/list/${x}`);
      for (const name of names) await t().client.acquire({ sessionId: a, name });
      const seen: string[] = [];
      let pageToken = '';
      do {
        const page = await t().client.call<lockservice.ListLocksRequest, lockservice.ListLocksResponse>('listLocks', {
          prefix: `/ls/${n}/list/`,
          limit: 2,
          pageToken,
        });
        expect(page.locks.length).toBeLessThanOrEqual(2);
        seen.push(...page.locks.map((l) => l.name));
        pageToken = page.nextPageToken;
      } while (pageToken);
      expect(seen).toEqual([...names].sort());
    });
  });

  describe('CloseSession and KeepAlive', () => {
    it('close releases the locks and promotes waiters; the closed session is gone', async () => {
      const n = freshNs();
      const name = `/ls/${n}/closing`;
      const [a, b] = [await session(n), await session(n)];
      const g = await t().client.acquire({ sessionId: a, name });
      const wait = t().client.acquire({ sessionId: b, name, waitMs: 10_000 });
      await eventually(
        async () =>
          (await t().client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!.waiters.length === 1
            ? true
            : undefined,
        5000,
        'queued',
      );
      const closed = await t().client.call<lockservice.CloseSessionRequest, lockservice.CloseSessionResponse>('closeSession', {
        sessionId: a,
      });
      expect(closed.released).toEqual([name]);
      const gb = await wait;
      expect(gb.status).toBe(S.ACQUIRE_STATUS_GRANTED);
      expect(gb.token).toBeGreaterThan(g.token);
      await expect(t().client.acquire({ sessionId: a, name: `/ls/${n}/x` })).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' });
    });

    it('answers heartbeats with the TTL left, and expired for an unknown session', async () => {
      const n = freshNs();
      const a = await session(n, 4000);
      for (const address of t().keepAliveAddresses()) {
        const stream = t().client.raw(address).keepAlive();
        const answers: lockservice.KeepAliveResponse[] = [];
        const done = new Promise<void>((resolve, reject) => {
          stream.on('data', (x: lockservice.KeepAliveResponse) => {
            answers.push(x);
            if (answers.length === 2) {
              stream.end();
              resolve();
            }
          });
          stream.on('error', reject);
        });
        stream.write({ sessionId: a });
        stream.write({ sessionId: `${n}:doesnotexist` });
        await done;
        expect(answers.find((x) => x.sessionId === a)).toMatchObject({ ttlMsRemaining: 4000, expired: false });
        expect(answers.find((x) => x.sessionId !== a)).toMatchObject({ ttlMsRemaining: 0, expired: true });
      }
    });

    it('expires a session whose heartbeats stop, releasing its locks to the next waiter, never before its TTL', async () => {
      const n = freshNs();
      const name = `/ls/${n}/expiring`;
      const b = (await t().client.openSession(n, 10_000)).sessionId;
      const hb = t().client.keepAlive([b], 1000);
      // The session's TTL runs from its opening at the earliest: the leader sets
      // the deadline when it applies OpenSession, after this request was sent.
      const openSentAt = Date.now();
      const a = (await t().client.openSession(n, 2000)).sessionId;
      try {
        const g = await t().client.acquire({ sessionId: a, name });
        const gb = await t().client.acquire({ sessionId: b, name, waitMs: 15_000 });
        const grantedAfterOpenMs = Date.now() - openSentAt;
        expect(gb.status).toBe(S.ACQUIRE_STATUS_GRANTED);
        expect(gb.token).toBeGreaterThan(g.token);
        expect(grantedAfterOpenMs).toBeGreaterThanOrEqual(2000);
        await expect(t().client.acquire({ sessionId: a, name: `/ls/${n}/y` })).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' });
      } finally {
        hb.stop();
      }
    });

    it('holds a lock back for its lock-delay after its holder expired, not after a release', async () => {
      const n = freshNs();
      const name = `/ls/${n}/delayed`;
      const a = (await t().client.openSession(n, 2000)).sessionId;
      const b = (await t().client.openSession(n, 20_000)).sessionId;
      const hb = t().client.keepAlive([b], 1000);
      try {
        await t().client.acquire({ sessionId: a, name, lockDelayMs: 2500 });
        const l = await eventually(
          async () => {
            const s = (await t().client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!;
            return s.holders.length === 0 ? s : undefined;
          },
          10_000,
          'expiry',
        );
        expect(l.delayed).toBe(true);
        expect((await t().client.acquire({ sessionId: b, name })).status).toBe(S.ACQUIRE_STATUS_TIMED_OUT);
        const g = await t().client.acquire({ sessionId: b, name, waitMs: 10_000 });
        expect(g.status).toBe(S.ACQUIRE_STATUS_GRANTED);
        // A clean release sets no delay.
        await t().client.call('release', { sessionId: b, name, token: g.token });
        const s2 = (await t().client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!;
        expect(s2.delayed).toBe(false);
      } finally {
        hb.stop();
      }
    });
  });

  describe('Watch', () => {
    function collect(
      address: string,
      req: lockservice.WatchRequest,
      until: (evs: lockservice.WatchEvent[]) => boolean,
      onLive?: () => void,
    ): Promise<lockservice.WatchEvent[]> {
      const events: lockservice.WatchEvent[] = [];
      const stream = t().client.raw(address).watch(req);
      return new Promise((resolve, reject) => {
        stream.on('data', (e: lockservice.WatchEvent) => {
          events.push(e);
          // The first PROGRESS ends the snapshot: from here the watch delivers every change as it applies.
          if (e.type === W.WATCH_EVENT_TYPE_PROGRESS) onLive?.();
          if (until(events)) {
            stream.cancel();
            resolve(events);
          }
        });
        stream.on('error', (e: ServiceError) => (e.code === 1 ? resolve(events) : reject(fromServiceError(e))));
      });
    }

    it('starts with SNAPSHOT and PROGRESS, then delivers events in revision order; a resume skips nothing and repeats nothing', async () => {
      const n = freshNs();
      const a = await session(n);
      const g1 = await t().client.acquire({ sessionId: a, name: `/ls/${n}/w/1` });
      // A watch is served from the replica's own apply stream: start it on the
      // leader, which has applied the grant before answering it.
      const leaderAddr = await t().leaderAddress();
      let onLive!: () => void;
      const watching = new Promise<void>((resolve) => (onLive = resolve));
      const initial = collect(
        leaderAddr,
        { name: `/ls/${n}/w/`, prefix: true, sinceRevision: 0 },
        (evs) => evs.some((e) => e.type === W.WATCH_EVENT_TYPE_RELEASED),
        onLive,
      );
      // Changes made once the watch is live (its first PROGRESS), not before; a watch that fails first fails here.
      await Promise.race([watching, initial]);
      await t().client.acquire({ sessionId: a, name: `/ls/${n}/w/2` });
      await t().client.call('release', { sessionId: a, name: `/ls/${n}/w/1`, token: g1.token });
      const evs = await initial;
      expect(evs[0]!.type).toBe(W.WATCH_EVENT_TYPE_SNAPSHOT);
      expect(evs[0]!.lock!.holders[0]!.token).toBe(g1.token);
      expect(evs[1]!.type).toBe(W.WATCH_EVENT_TYPE_PROGRESS);
      const live = evs.filter((e) => e.type === W.WATCH_EVENT_TYPE_ACQUIRED || e.type === W.WATCH_EVENT_TYPE_RELEASED);
      expect(live.map((e) => e.name)).toEqual([`/ls/${n}/w/2`, `/ls/${n}/w/1`]);
      expect(live[0]!.revision).toBeLessThan(live[1]!.revision);

      // Resume after the first live event on a follower: exactly the rest.
      const follower = await t().followerAddress();
      const resumed = await collect(follower, { name: `/ls/${n}/w/`, prefix: true, sinceRevision: live[0]!.revision }, (e) =>
        e.some((x) => x.type === W.WATCH_EVENT_TYPE_RELEASED),
      );
      expect(resumed.filter((e) => e.type !== W.WATCH_EVENT_TYPE_PROGRESS).map((e) => e.revision)).toEqual([live[1]!.revision]);
    });

    it('answers OUT_OF_RANGE COMPACTED for a revision older than the retained history', async () => {
      const n = freshNs();
      const a = await session(n, 120_000);
      const first = await t().client.acquire({ sessionId: a, name: `/ls/${n}/c/0` });
      for (let i = 1; i <= 210; i++) await t().client.acquire({ sessionId: a, name: `/ls/${n}/c/${i}` });
      const err = await collect(
        t().anyAddress(),
        { name: `/ls/${n}/c/`, prefix: true, sinceRevision: first.revision - 1 },
        () => false,
      ).then(
        () => undefined,
        (e: FencerError) => e,
      );
      expect(err?.code).toBe('COMPACTED');
    }, 60_000);
  });

  if (opts.kind === 'cell')
    describe('HeartbeatBatch (internal)', () => {
      it('is answered by the leader per session; a follower points to the leader', async () => {
        const n = freshNs();
        const a = await session(n, 3000);
        const leaderAddr = await t().leaderAddress();
        const followerAddr = await t().followerAddress();
        const call = (addr: string): Promise<internalpb.HeartbeatBatchResponse> => {
          const c = new internalpb.CellInternalClient(addr, fleetCredentials());
          return new Promise((resolve, reject) =>
            c.heartbeatBatch({ sessionIds: [a, `${n}:gone`], proxyId: 'test', tokens: [], tokenIndex: [] }, new Metadata(), (e, r) => {
              c.close();
              if (e) reject(fromServiceError(e));
              else resolve(r);
            }),
          );
        };
        const res = await call(leaderAddr);
        expect(res.sessions).toEqual([
          { sessionId: a, ttlMsRemaining: 3000, expired: false, forbidden: false },
          { sessionId: `${n}:gone`, ttlMsRemaining: 0, expired: true, forbidden: false },
        ]);
        await expect(call(followerAddr)).rejects.toMatchObject({ code: 'NOT_LEADER', leaderHint: leaderAddr });
      });
    });

  if (opts.kind === 'cell')
    describe('metrics', () => {
      it('exposes the cell metrics in Prometheus format on every replica', async () => {
        const r = { metrics: await t().leaderMetrics!() };
        const n = freshNs();
        const a = await session(n);
        await t().client.acquire({ sessionId: a, name: `/ls/${n}/m` });
        await t().client.call('getLock', { name: `/ls/${n}/m` });
        // Gauges of table sizes refresh about once a second.
        const body = await eventually(
          async () => {
            const text = await (await fetch(r.metrics)).text();
            return /^fencer_locks [1-9]/m.test(text) ? text : undefined;
          },
          5000,
          'table gauges',
        );
        for (const metric of [
          'fencer_is_leader 1',
          'fencer_leader_changes_total',
          'fencer_proposals_total{outcome="applied"}',
          'fencer_proposal_commit_seconds_bucket',
          'fencer_read_index_seconds_count',
          'fencer_wal_fsync_seconds_bucket{le="0.0001",kind="file"}',
          'fencer_wal_batch_saves',
          'fencer_sessions',
          'fencer_waiters',
          'fencer_watchers',
          'fencer_keepalives_total',
          'fencer_peer_send_queue_depth',
          'fencer_rpcs_total{method="acquire",code="OK"}',
          'fencer_wal_fdatasyncs{thread="pool"}',
        ]) {
          expect(body, metric).toContain(metric);
        }
      });

      it('an idle cell syncs its WAL on the event loop: followers, and the leader serving one call at a time (--wal-sync-on-loop when-idle)', async () => {
        const leader = await t().cell!.leader();
        const onLoop = async (ids: (id: string) => boolean): Promise<number> => {
          let sum = 0;
          for (const r of t().cell!.replicas.filter((x) => ids(x.id))) {
            const m = /^fencer_wal_fdatasyncs\{thread="loop"\} (\d+)/m.exec(await (await fetch(r.metrics)).text());
            sum += Number(m?.[1] ?? 0);
          }
          return sum;
        };
        const isLeader = (id: string): boolean => id === leader.nodeId;
        const [followersBefore, leaderBefore] = [await onLoop((id) => !isLeader(id)), await onLoop(isLeader)];
        const n = freshNs();
        const a = await session(n);
        // One write at a time: each reaches replicas that have been idle since the last.
        for (let i = 0; i < 5; i++) await t().client.acquire({ sessionId: a, name: `/ls/${n}/sync-${i}` });
        expect(await onLoop((id) => !isLeader(id))).toBeGreaterThan(followersBefore);
        expect(await onLoop(isLeader)).toBeGreaterThan(leaderBefore);
      });
    });
}
