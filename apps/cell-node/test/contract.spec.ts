/**
 * Goal: every call of the contract behaves as lockservice.proto and
 * ARCHITECTURE "Promises" say, against a real five-replica cell.
 * Method: five cell-node processes on 127.0.0.1; calls go to a follower
 * first (so forwarding is exercised) through a small retrying test client.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { Metadata, credentials, type ServiceError } from '@grpc/grpc-js';
import { FencerError } from '@fencer/base';
import { fromServiceError, internalpb, lockservice } from '@fencer/protocol';
import { type Cell, eventually, startCell } from './support/cell.js';

const { AcquireStatus: S, LockMode: M, WatchEventType: W } = lockservice;
let cell: Cell;
let ns = 0;
/** A fresh namespace per test keeps tests independent inside one cell. */
const freshNs = (): string => `t${++ns}-${process.pid}`;

beforeAll(async () => {
  cell = await startCell({ extraArgs: ['--watch-history-max', '200', '--watch-progress-ms', '1000'] });
});
afterAll(async () => {
  await cell?.stop();
});

async function session(namespace: string, ttlMs = 5000): Promise<string> {
  return (await cell.client.openSession(namespace, ttlMs)).sessionId;
}

describe('OpenSession', () => {
  it('returns a session id that embeds its namespace, and clamps the TTL to the server bounds', async () => {
    const n = freshNs();
    const a = await cell.client.openSession(n, 5000);
    expect(a.sessionId.startsWith(`${n}:`)).toBe(true);
    expect(a.ttlMs).toBe(5000);
    expect((await cell.client.openSession(n, 0)).ttlMs).toBe(12_000);
    expect((await cell.client.openSession(n, 10)).ttlMs).toBe(2_000);
    expect((await cell.client.openSession(n, 2 ** 63)).ttlMs).toBe(3_600_000);
    const ids = new Set(await Promise.all([1, 2, 3].map(() => session(n))));
    expect(ids.size).toBe(3);
  });
});

describe('Acquire, Release, CheckToken, GetLock', () => {
  it('grants a try-lock with a token, refuses a busy try-lock without queueing, and fences by token', async () => {
    const n = freshNs();
    const name = `/ls/${n}/invoice/42`;
    const [a, b] = [await session(n), await session(n)];
    const g = await cell.client.acquire({ sessionId: a, name });
    expect(g.status).toBe(S.ACQUIRE_STATUS_GRANTED);
    expect(g.token).toBeGreaterThan(0);
    expect(g.revision).toBe(g.token);
    expect(g.holders).toEqual([{ sessionId: a, token: g.token, mode: M.LOCK_MODE_EXCLUSIVE, clientId: 'test' }]);

    const busy = await cell.client.acquire({ sessionId: b, name });
    expect(busy.status).toBe(S.ACQUIRE_STATUS_TIMED_OUT);
    const lock = await cell.client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name });
    expect(lock.lock!.waiters).toEqual([]);
    expect(lock.revision).toBeGreaterThanOrEqual(busy.revision);

    const check = await cell.client.call<lockservice.CheckTokenRequest, lockservice.CheckTokenResponse>('checkToken', { name, token: g.token });
    expect(check).toMatchObject({ current: true, latestToken: g.token });

    // A stale token releases nothing.
    expect((await cell.client.call<lockservice.ReleaseRequest, lockservice.ReleaseResponse>('release', { sessionId: a, name, token: g.token - 1 })).ok).toBe(false);
    expect((await cell.client.call<lockservice.ReleaseRequest, lockservice.ReleaseResponse>('release', { sessionId: b, name, token: g.token })).ok).toBe(false);
    expect((await cell.client.call<lockservice.ReleaseRequest, lockservice.ReleaseResponse>('release', { sessionId: a, name, token: g.token })).ok).toBe(true);
    const after = await cell.client.call<lockservice.CheckTokenRequest, lockservice.CheckTokenResponse>('checkToken', { name, token: g.token });
    expect(after).toMatchObject({ current: false, latestToken: 0 });

    // Every later grant of the same name has a larger token.
    const g2 = await cell.client.acquire({ sessionId: b, name });
    expect(g2.status).toBe(S.ACQUIRE_STATUS_GRANTED);
    expect(g2.token).toBeGreaterThan(g.token);
  });

  it('holds a waiting Acquire open until the holder releases, FIFO, then grants with a larger token', async () => {
    const n = freshNs();
    const name = `/ls/${n}/job`;
    const [a, b, c] = [await session(n), await session(n), await session(n)];
    const g = await cell.client.acquire({ sessionId: a, name });
    const waitB = cell.client.acquire({ sessionId: b, name, waitMs: 10_000, requestId: 'b1' });
    await eventually(async () => ((await cell.client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!.waiters.length === 1 ? true : undefined), 5000, 'b queued');
    const waitC = cell.client.acquire({ sessionId: c, name, waitMs: 10_000, requestId: 'c1' });
    const queued = await eventually(async () => {
      const l = (await cell.client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!;
      return l.waiters.length === 2 ? l : undefined;
    }, 5000, 'c queued');
    expect(queued.waiters.map((w) => w.sessionId)).toEqual([b, c]);
    await cell.client.call('release', { sessionId: a, name, token: g.token });
    const gb = await waitB;
    expect(gb.status).toBe(S.ACQUIRE_STATUS_GRANTED);
    expect(gb.token).toBeGreaterThan(g.token);
    await cell.client.call('release', { sessionId: b, name, token: gb.token });
    const gc = await waitC;
    expect(gc.status).toBe(S.ACQUIRE_STATUS_GRANTED);
    expect(gc.token).toBeGreaterThan(gb.token);
  });

  it('grants consecutive shared waiters together and never lets a shared request overtake a queued exclusive one', async () => {
    const n = freshNs();
    const name = `/ls/${n}/config`;
    const [w, r1, r2, x, r3] = [await session(n), await session(n), await session(n), await session(n), await session(n)];
    const gw = await cell.client.acquire({ sessionId: w, name });
    const p1 = cell.client.acquire({ sessionId: r1, name, mode: M.LOCK_MODE_SHARED, waitMs: 10_000 });
    const p2 = cell.client.acquire({ sessionId: r2, name, mode: M.LOCK_MODE_SHARED, waitMs: 10_000 });
    await eventually(async () => ((await cell.client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!.waiters.length === 2 ? true : undefined), 5000, 'readers queued');
    const px = cell.client.acquire({ sessionId: x, name, waitMs: 10_000 });
    await eventually(async () => ((await cell.client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!.waiters.length === 3 ? true : undefined), 5000, 'writer queued');
    const p3 = cell.client.acquire({ sessionId: r3, name, mode: M.LOCK_MODE_SHARED, waitMs: 10_000 });
    await eventually(async () => ((await cell.client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!.waiters.length === 4 ? true : undefined), 5000, 'late reader queued');
    await cell.client.call('release', { sessionId: w, name, token: gw.token });
    const [g1, g2] = await Promise.all([p1, p2]);
    expect(g1.status).toBe(S.ACQUIRE_STATUS_GRANTED);
    expect(g2.status).toBe(S.ACQUIRE_STATUS_GRANTED);
    expect(g1.token).toBe(g2.token); // granted together, by one entry
    const now = (await cell.client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!;
    expect(now.mode).toBe(M.LOCK_MODE_SHARED);
    expect(now.waiters.map((v) => v.sessionId)).toEqual([x, r3]);
    await cell.client.call('release', { sessionId: r1, name, token: g1.token });
    await cell.client.call('release', { sessionId: r2, name, token: g2.token });
    const gx = await px;
    expect(gx.status).toBe(S.ACQUIRE_STATUS_GRANTED);
    await cell.client.call('release', { sessionId: x, name, token: gx.token });
    expect((await p3).status).toBe(S.ACQUIRE_STATUS_GRANTED);
  });

  it('ends a wait with TIMED_OUT when wait_ms passes, removing the waiter', async () => {
    const n = freshNs();
    const name = `/ls/${n}/slow`;
    const [a, b] = [await session(n), await session(n)];
    await cell.client.acquire({ sessionId: a, name });
    const started = Date.now();
    const r = await cell.client.acquire({ sessionId: b, name, waitMs: 600 });
    expect(r.status).toBe(S.ACQUIRE_STATUS_TIMED_OUT);
    expect(Date.now() - started).toBeGreaterThanOrEqual(550);
    const l = await cell.client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name });
    expect(l.lock!.waiters).toEqual([]);
  });

  it('cancels the wait of a client that cancels its call', async () => {
    const n = freshNs();
    const name = `/ls/${n}/cancel`;
    const [a, b] = [await session(n), await session(n)];
    await cell.client.acquire({ sessionId: a, name });
    const leader = await cell.leader();
    const addr = cell.replicas.find((r) => r.id === leader.nodeId)!.grpc;
    const call = cell.client.raw(addr).acquire({ sessionId: b, name, mode: 1, waitMs: 30_000, requestId: 'cx', lockDelayMs: 0 }, () => {});
    await eventually(async () => ((await cell.client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!.waiters.length === 1 ? true : undefined), 5000, 'queued');
    call.cancel();
    await eventually(async () => ((await cell.client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!.waiters.length === 0 ? true : undefined), 5000, 'waiter removed');
  });

  it('answers a retry with the same request_id with the same outcome', async () => {
    const n = freshNs();
    const name = `/ls/${n}/idem`;
    const [a, b] = [await session(n), await session(n)];
    const req = { sessionId: a, name, requestId: randomUUID() };
    const first = await cell.client.acquire(req);
    const again = await cell.client.acquire(req);
    expect(again.status).toBe(S.ACQUIRE_STATUS_GRANTED);
    expect(again.token).toBe(first.token);
    const busyReq = { sessionId: b, name, requestId: randomUUID() };
    const busy = await cell.client.acquire(busyReq);
    await cell.client.call('release', { sessionId: a, name, token: first.token });
    // Now free, but the retry of the timed-out attempt still answers TIMED_OUT.
    expect((await cell.client.acquire(busyReq)).status).toBe(busy.status);
  });
});

describe('ListLocks', () => {
  it('lists live locks under a prefix in name order, page by page', async () => {
    const n = freshNs();
    const a = await session(n);
    const names = ['c', 'a', 'e', 'b', 'd'].map((x) => `/ls/${n}/list/${x}`);
    for (const name of names) await cell.client.acquire({ sessionId: a, name });
    const seen: string[] = [];
    let pageToken = '';
    do {
      const page = await cell.client.call<lockservice.ListLocksRequest, lockservice.ListLocksResponse>('listLocks', { prefix: `/ls/${n}/list/`, limit: 2, pageToken });
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
    const g = await cell.client.acquire({ sessionId: a, name });
    const wait = cell.client.acquire({ sessionId: b, name, waitMs: 10_000 });
    await eventually(async () => ((await cell.client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!.waiters.length === 1 ? true : undefined), 5000, 'queued');
    const closed = await cell.client.call<lockservice.CloseSessionRequest, lockservice.CloseSessionResponse>('closeSession', { sessionId: a });
    expect(closed.released).toEqual([name]);
    const gb = await wait;
    expect(gb.status).toBe(S.ACQUIRE_STATUS_GRANTED);
    expect(gb.token).toBeGreaterThan(g.token);
    await expect(cell.client.acquire({ sessionId: a, name: `/ls/${n}/x` })).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' });
  });

  it('answers heartbeats with the TTL left, and expired for an unknown session', async () => {
    const n = freshNs();
    const a = await session(n, 4000);
    const leader = await cell.leader();
    for (const r of cell.replicas) {
      const stream = cell.client.raw(r.grpc).keepAlive();
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
      void leader;
    }
  });

  it('expires a session whose heartbeats stop, releasing its locks to the next waiter, never before its TTL', async () => {
    const n = freshNs();
    const name = `/ls/${n}/expiring`;
    const b = (await cell.client.openSession(n, 10_000)).sessionId;
    const hb = cell.client.keepAlive([b], 1000);
    // The session's TTL runs from its opening at the earliest: the leader sets
    // the deadline when it applies OpenSession, after this request was sent.
    const openSentAt = Date.now();
    const a = (await cell.client.openSession(n, 2000)).sessionId;
    try {
      const g = await cell.client.acquire({ sessionId: a, name });
      const gb = await cell.client.acquire({ sessionId: b, name, waitMs: 15_000 });
      const grantedAfterOpenMs = Date.now() - openSentAt;
      expect(gb.status).toBe(S.ACQUIRE_STATUS_GRANTED);
      expect(gb.token).toBeGreaterThan(g.token);
      expect(grantedAfterOpenMs).toBeGreaterThanOrEqual(2000);
      await expect(cell.client.acquire({ sessionId: a, name: `/ls/${n}/y` })).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' });
    } finally {
      hb.stop();
    }
  });

  it('holds a lock back for its lock-delay after its holder expired, not after a release', async () => {
    const n = freshNs();
    const name = `/ls/${n}/delayed`;
    const a = (await cell.client.openSession(n, 2000)).sessionId;
    const b = (await cell.client.openSession(n, 20_000)).sessionId;
    const hb = cell.client.keepAlive([b], 1000);
    try {
      await cell.client.acquire({ sessionId: a, name, lockDelayMs: 2500 });
      const l = await eventually(async () => {
        const s = (await cell.client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!;
        return s.holders.length === 0 ? s : undefined;
      }, 10_000, 'expiry');
      expect(l.delayed).toBe(true);
      expect((await cell.client.acquire({ sessionId: b, name })).status).toBe(S.ACQUIRE_STATUS_TIMED_OUT);
      const g = await cell.client.acquire({ sessionId: b, name, waitMs: 10_000 });
      expect(g.status).toBe(S.ACQUIRE_STATUS_GRANTED);
      // A clean release sets no delay.
      await cell.client.call('release', { sessionId: b, name, token: g.token });
      const s2 = (await cell.client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name })).lock!;
      expect(s2.delayed).toBe(false);
    } finally {
      hb.stop();
    }
  });
});

describe('Watch', () => {
  function collect(address: string, req: lockservice.WatchRequest, until: (evs: lockservice.WatchEvent[]) => boolean): Promise<lockservice.WatchEvent[]> {
    const events: lockservice.WatchEvent[] = [];
    const stream = cell.client.raw(address).watch(req);
    return new Promise((resolve, reject) => {
      stream.on('data', (e: lockservice.WatchEvent) => {
        events.push(e);
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
    const g1 = await cell.client.acquire({ sessionId: a, name: `/ls/${n}/w/1` });
    // A watch is served from the replica's own apply stream: start it on the
    // leader, which has applied the grant before answering it.
    const leader = await cell.leader();
    const leaderAddr = cell.replicas.find((r) => r.id === leader.nodeId)!.grpc;
    const initial = collect(leaderAddr, { name: `/ls/${n}/w/`, prefix: true, sinceRevision: 0 }, (evs) => evs.some((e) => e.type === W.WATCH_EVENT_TYPE_RELEASED));
    await new Promise((r) => setTimeout(r, 300));
    await cell.client.acquire({ sessionId: a, name: `/ls/${n}/w/2` });
    await cell.client.call('release', { sessionId: a, name: `/ls/${n}/w/1`, token: g1.token });
    const evs = await initial;
    expect(evs[0]!.type).toBe(W.WATCH_EVENT_TYPE_SNAPSHOT);
    expect(evs[0]!.lock!.holders[0]!.token).toBe(g1.token);
    expect(evs[1]!.type).toBe(W.WATCH_EVENT_TYPE_PROGRESS);
    const live = evs.filter((e) => e.type === W.WATCH_EVENT_TYPE_ACQUIRED || e.type === W.WATCH_EVENT_TYPE_RELEASED);
    expect(live.map((e) => e.name)).toEqual([`/ls/${n}/w/2`, `/ls/${n}/w/1`]);
    expect(live[0]!.revision).toBeLessThan(live[1]!.revision);

    // Resume after the first live event on a follower: exactly the rest.
    const follower = cell.replicas.find((r) => r.id !== leader.nodeId)!.grpc;
    const resumed = await collect(follower, { name: `/ls/${n}/w/`, prefix: true, sinceRevision: live[0]!.revision }, (e) => e.some((x) => x.type === W.WATCH_EVENT_TYPE_RELEASED));
    expect(resumed.filter((e) => e.type !== W.WATCH_EVENT_TYPE_PROGRESS).map((e) => e.revision)).toEqual([live[1]!.revision]);
  });

  it('answers OUT_OF_RANGE COMPACTED for a revision older than the retained history', async () => {
    const n = freshNs();
    const a = await session(n, 120_000);
    const first = await cell.client.acquire({ sessionId: a, name: `/ls/${n}/c/0` });
    for (let i = 1; i <= 210; i++) await cell.client.acquire({ sessionId: a, name: `/ls/${n}/c/${i}` });
    const err = await collect(cell.replicas[0]!.grpc, { name: `/ls/${n}/c/`, prefix: true, sinceRevision: first.revision - 1 }, () => false).then(
      () => undefined,
      (e: FencerError) => e,
    );
    expect(err?.code).toBe('COMPACTED');
  }, 60_000);
});

describe('HeartbeatBatch (internal)', () => {
  it('is answered by the leader per session; a follower points to the leader', async () => {
    const n = freshNs();
    const a = await session(n, 3000);
    const leader = await cell.leader();
    const leaderAddr = cell.replicas.find((r) => r.id === leader.nodeId)!.grpc;
    const followerAddr = cell.replicas.find((r) => r.id !== leader.nodeId)!.grpc;
    const call = (addr: string): Promise<internalpb.HeartbeatBatchResponse> => {
      const c = new internalpb.CellInternalClient(addr, credentials.createInsecure());
      return new Promise((resolve, reject) =>
        c.heartbeatBatch({ sessionIds: [a, `${n}:gone`], proxyId: 'test' }, new Metadata(), (e, r) => {
          c.close();
          if (e) reject(fromServiceError(e));
          else resolve(r);
        }),
      );
    };
    const res = await call(leaderAddr);
    expect(res.sessions).toEqual([
      { sessionId: a, ttlMsRemaining: 3000, expired: false },
      { sessionId: `${n}:gone`, ttlMsRemaining: 0, expired: true },
    ]);
    await expect(call(followerAddr)).rejects.toMatchObject({ code: 'NOT_LEADER', leaderHint: leaderAddr });
  });
});

describe('metrics', () => {
  it('exposes the cell metrics in Prometheus format on every replica', async () => {
    const leader = await cell.leader();
    const r = cell.replicas.find((x) => x.id === leader.nodeId)!;
    const n = freshNs();
    const a = await session(n);
    await cell.client.acquire({ sessionId: a, name: `/ls/${n}/m` });
    await cell.client.call('getLock', { name: `/ls/${n}/m` });
    // Gauges of table sizes refresh about once a second.
    const body = await eventually(async () => {
      const text = await (await fetch(r.metrics)).text();
      return /^fencer_locks [1-9]/m.test(text) ? text : undefined;
    }, 5000, 'table gauges');
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
    const leader = await cell.leader();
    const onLoop = async (ids: (id: string) => boolean): Promise<number> => {
      let sum = 0;
      for (const r of cell.replicas.filter((x) => ids(x.id))) {
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
    for (let i = 0; i < 5; i++) await cell.client.acquire({ sessionId: a, name: `/ls/${n}/sync-${i}` });
    expect(await onLoop((id) => !isLeader(id))).toBeGreaterThan(followersBefore);
    expect(await onLoop(isLeader)).toBeGreaterThan(leaderBefore);
  });
});
