/**
 * Goal: FencerClient keeps the contract's client-side promises against a
 * server that misbehaves the ways a real cell does: it follows leader hints,
 * retries UNAVAILABLE with the same request_id (so a retried Acquire whose
 * first answer was lost yields the same grant, not a second one), resumes
 * QUEUED waits, runs one KeepAlive stream for all sessions, and hands out
 * handles whose release and withLock behave.
 * Method: an in-process fake LockService (grpc on 127.0.0.1:0) with injected
 * faults; the client on real time with short backoffs. Assertions look at
 * what the fake recorded (request ids, streams), not at timings.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FencerError } from '@fencer/base';
import { lockservice } from '@fencer/protocol';
import { FencerClient, LockLostError, LockTimeoutError, type FencerClientOptions } from '../src/index.js';
import { FakeLockService } from '../src/testing/index.js';
import { nextEvent } from './helpers.js';

let fake: FakeLockService;
const clients: FencerClient[] = [];
const fakes: FakeLockService[] = [];

function client(options: Partial<FencerClientOptions> = {}): FencerClient {
  const c = new FencerClient({
    endpoints: [fake.address],
    backoffBaseMs: 5,
    backoffMaxMs: 20,
    callTimeoutMs: 2_000,
    retryBudgetMs: 5_000,
    ...options,
  });
  clients.push(c);
  return c;
}

beforeEach(async () => {
  fake = await FakeLockService.start();
  fakes.push(fake);
});

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(fakes.splice(0).map((f) => f.stop()));
});

describe('acquire and release', () => {
  it('grants with the revision as token, releases, and the next grant has a larger token', async () => {
    const c = client();
    const a = await c.acquire('/ls/pay/inv-1');
    expect(a.name).toBe('/ls/pay/inv-1');
    expect(a.mode).toBe('exclusive');
    expect(a.token).toBe(fake.locks.get('/ls/pay/inv-1')!.holders[0]!.token);
    expect(a.signal.aborted).toBe(false);
    expect(await a.release()).toBe(true);
    expect(a.signal.aborted).toBe(true);
    expect((a.signal.reason as LockLostError).reason).toBe('released');
    expect(fake.locks.get('/ls/pay/inv-1')!.holders).toEqual([]);
    const b = await c.acquire('/ls/pay/inv-1');
    expect(b.token).toBeGreaterThan(a.token);
    expect(await a.release()).toBe(true); // idempotent: the same promise
    expect(fake.callsOf('release')).toHaveLength(1);
  });

  it('a try-lock on a held lock rejects with LockTimeoutError naming the holder', async () => {
    const holder = client({ clientId: 'holder-1' });
    const other = client({ clientId: 'other' });
    await holder.acquire('/ls/pay/inv-2');
    const err = await other.acquire('/ls/pay/inv-2', { waitMs: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockTimeoutError);
    expect((err as LockTimeoutError).holders.map((h) => h.clientId)).toEqual(['holder-1']);
    expect((err as LockTimeoutError).message).toMatch(/held \(by holder-1\)/);
  });

  it('shared holders coexist; an exclusive request waits for both', async () => {
    const c1 = client();
    const c2 = client();
    const s1 = await c1.acquire('/ls/cfg/x', { mode: 'shared' });
    const s2 = await c2.acquire('/ls/cfg/x', { mode: 'shared' });
    expect(s1.token).not.toBe(s2.token);
    const queued = nextEvent(fake, 'queued');
    // A third session: the cell refuses a session that holds the lock shared an exclusive request (INVALID_MODE).
    const ex = client().acquire('/ls/cfg/x', { waitMs: 5_000 });
    await queued;
    await s1.release();
    await s2.release();
    const h = await ex;
    expect(h.token).toBeGreaterThan(s2.token);
  });

  it('withLock releases after the function, also when it throws', async () => {
    const c = client();
    const seen: number[] = [];
    await expect(
      c.withLock('/ls/pay/w', async (h) => {
        seen.push(h.token);
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(fake.locks.get('/ls/pay/w')!.holders).toEqual([]);
    const r = await c.withLock('/ls/pay/w', { waitMs: 0 }, (h) => h.token);
    expect(r).toBeGreaterThan(seen[0]!);
    expect(fake.locks.get('/ls/pay/w')!.holders).toEqual([]);
  });

  it('release of a stale token is a no-op (false)', async () => {
    const c = client();
    const h = await c.acquire('/ls/pay/stale');
    fake.locks.get('/ls/pay/stale')!.holders = []; // someone else's doing, as after an expiry the client missed
    expect(await h.release()).toBe(false);
  });

  it('rejects bad names before calling the service', async () => {
    const c = client();
    await expect(c.acquire('payments/x')).rejects.toMatchObject({ code: 'INVALID_NAME' });
    await expect(c.acquire('/ls/pay/')).rejects.toMatchObject({ code: 'INVALID_NAME' });
    expect(fake.calls).toHaveLength(0);
  });

  it("the user's signal cancels a wait, and the cell drops the waiter", async () => {
    const holder = client();
    await holder.acquire('/ls/pay/busy');
    const c = client();
    const ac = new AbortController();
    const queued = nextEvent(fake, 'queued');
    const p = c.acquire('/ls/pay/busy', { waitMs: 10_000, signal: ac.signal });
    await queued;
    const canceled = nextEvent(fake, 'canceled');
    ac.abort(new Error('not needed any more'));
    await expect(p).rejects.toThrow('not needed any more');
    // The server sees the cancellation and removes the waiter.
    await canceled;
    expect(fake.locks.get('/ls/pay/busy')!.waiters).toEqual([]);
  });
});

describe('retries', () => {
  it('follows a leader hint from a follower to the leader', async () => {
    const follower = await FakeLockService.start();
    fakes.push(follower);
    follower.notLeaderHint = fake.address;
    const c = new FencerClient({ endpoints: [follower.address], backoffBaseMs: 5, backoffMaxMs: 20 });
    clients.push(c);
    const h = await c.acquire('/ls/pay/hint');
    expect(h.token).toBeGreaterThan(0);
    expect(follower.callsOf('openSession')).toHaveLength(1);
    expect(fake.callsOf('openSession')).toHaveLength(1);
    expect(c.endpoints.preferred).toBe(fake.address);
    expect(c.endpoints.all).toEqual([follower.address, fake.address]);
    // Later calls go straight to the leader.
    await h.release();
    expect(follower.callsOf('release')).toHaveLength(0);
  });

  it('an Acquire whose answer was lost is retried with the same request_id and yields the same grant', async () => {
    const c = client();
    await c.session('pay');
    fake.injectFault({ method: 'acquire', code: 'OUTCOME_UNKNOWN', afterApply: true });
    fake.injectFault({ method: 'acquire', code: 'NO_LEADER' });
    const h = await c.acquire('/ls/pay/idem');
    const attempts = fake.callsOf('acquire') as lockservice.AcquireRequest[];
    expect(attempts).toHaveLength(3);
    expect(new Set(attempts.map((a) => a.requestId)).size).toBe(1);
    // One grant only: the retry was answered from the dedupe record.
    expect(fake.locks.get('/ls/pay/idem')!.holders).toHaveLength(1);
    expect(h.token).toBe(fake.locks.get('/ls/pay/idem')!.holders[0]!.token);
  });

  it('each acquire gets its own request_id', async () => {
    const c = client();
    const a = await c.acquire('/ls/pay/r1');
    await a.release();
    await c.acquire('/ls/pay/r1');
    const ids = (fake.callsOf('acquire') as lockservice.AcquireRequest[]).map((r) => r.requestId);
    expect(ids).toHaveLength(2);
    expect(ids[0]).not.toBe(ids[1]);
  });

  it('rotates to the next endpoint when one is down', async () => {
    const down = await FakeLockService.start();
    const deadAddress = down.address;
    await down.stop();
    const c = new FencerClient({ endpoints: [deadAddress, fake.address], backoffBaseMs: 5, backoffMaxMs: 20 });
    clients.push(c);
    const h = await c.acquire('/ls/pay/rot');
    expect(h.token).toBeGreaterThan(0);
    expect(c.endpoints.preferred).toBe(fake.address);
  });

  it('does not retry what cannot succeed (SESSION_NOT_FOUND, INVALID_NAME)', async () => {
    const c = client();
    await c.session('pay');
    fake.injectFault({ method: 'acquire', code: 'INVALID_NAME' });
    await expect(c.acquire('/ls/pay/x')).rejects.toMatchObject({ code: 'INVALID_NAME' });
    expect(fake.callsOf('acquire')).toHaveLength(1);
  });

  it('gives up after the retry budget with the last error', async () => {
    const c = client({ retryBudgetMs: 100 });
    for (let i = 0; i < 1000; i++) fake.injectFault({ method: 'openSession', code: 'NO_LEADER' });
    const err = await c.acquire('/ls/pay/x').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FencerError);
    expect((err as FencerError).code).toBe('NO_LEADER');
    expect(fake.callsOf('openSession').length).toBeGreaterThan(1);
  });

  it('resumes a QUEUED wait with the same request_id until granted', async () => {
    await fake.stop();
    fake = await FakeLockService.start({ acquireHoldMs: 20 });
    fakes.push(fake);
    const holder = client();
    const h1 = await holder.acquire('/ls/pay/q');
    const c = client();
    const waiting = c.acquire('/ls/pay/q', { waitMs: 10_000 });
    // Let the waiter be answered QUEUED at least twice, then free the lock.
    let queuedAnswers = 0;
    await nextEvent(fake, 'call', (call) => {
      const r = call as { method: string; request: lockservice.AcquireRequest };
      if (r.method === 'acquire' && r.request.sessionId !== h1.session.id) queuedAnswers++;
      return queuedAnswers >= 3;
    });
    await h1.release();
    const h2 = await waiting;
    const resumed = (fake.callsOf('acquire') as lockservice.AcquireRequest[]).filter((r) => r.sessionId !== h1.session.id);
    expect(resumed.length).toBeGreaterThanOrEqual(3);
    expect(new Set(resumed.map((r) => r.requestId)).size).toBe(1);
    // The remaining wait shrinks with each resume.
    expect(resumed[resumed.length - 1]!.waitMs).toBeLessThan(resumed[0]!.waitMs);
    expect(h2.token).toBeGreaterThan(h1.token);
  });

  it('a QUEUED wait that runs out ends in LockTimeoutError', async () => {
    await fake.stop();
    fake = await FakeLockService.start({ acquireHoldMs: 10 });
    fakes.push(fake);
    await client().acquire('/ls/pay/q2');
    await expect(client().acquire('/ls/pay/q2', { waitMs: 100 })).rejects.toBeInstanceOf(LockTimeoutError);
    expect(fake.locks.get('/ls/pay/q2')!.waiters).toEqual([]);
  });
});

describe('sessions', () => {
  it('one session per namespace, one KeepAlive stream for all of them', async () => {
    const c = client({ ttlMs: 600 });
    await c.acquire('/ls/a/1');
    await c.acquire('/ls/a/2');
    await c.acquire('/ls/b/1');
    expect(fake.callsOf('openSession')).toHaveLength(2);
    // Heartbeats flow for both sessions on the one stream.
    const beats = new Set<string>();
    await nextEvent(fake, 'heartbeat', (id) => {
      beats.add(id as string);
      return beats.size === 2;
    });
    expect(fake.callsOf('keepAlive')).toHaveLength(1);
    expect(fake.keepAliveStreams).toBe(1);
  });

  it('an expired session (the cell says so) aborts its handles and a new acquire opens a new session', async () => {
    const c = client({ ttlMs: 600 });
    const h = await c.acquire('/ls/a/exp');
    const expired = nextEvent(c, 'expired');
    fake.expireSession(h.session.id);
    await expired;
    expect(h.signal.aborted).toBe(true);
    expect((h.signal.reason as LockLostError).reason).toBe('expired');
    expect(h.held).toBe(false);
    expect(await h.release()).toBe(false);
    const h2 = await c.acquire('/ls/a/exp');
    expect(h2.session.id).not.toBe(h.session.id);
    expect(fake.callsOf('openSession')).toHaveLength(2);
  });

  it('close() closes the sessions: the cell releases their locks', async () => {
    const c = client();
    const h = await c.acquire('/ls/a/c');
    await c.close();
    expect(fake.callsOf('closeSession')).toHaveLength(1);
    expect(fake.locks.get('/ls/a/c')!.holders).toEqual([]);
    expect((h.signal.reason as LockLostError).reason).toBe('closed');
    await expect(c.acquire('/ls/a/c')).rejects.toMatchObject({ code: 'CANCELLED' });
  });
});

describe('reads', () => {
  it('getLock, listLocks and checkToken', async () => {
    const c = client({ clientId: 'reader' });
    const h = await c.acquire('/ls/r/one');
    await c.acquire('/ls/r/two', { mode: 'shared' });
    const got = await c.getLock('/ls/r/one');
    expect(got.lock).toMatchObject({ name: '/ls/r/one', mode: 'exclusive', delayed: false });
    expect(got.lock.holders).toEqual([{ sessionId: h.session.id, token: h.token, mode: 'exclusive', clientId: 'reader' }]);
    expect(got.revision).toBe(fake.revision);
    const free = await c.getLock('/ls/r/none');
    expect(free.lock).toMatchObject({ mode: 'free', holders: [], waiters: [] });
    const names: string[] = [];
    for await (const l of c.listAllLocks('/ls/r/', 1)) names.push(l.name);
    expect(names).toEqual(['/ls/r/one', '/ls/r/two']);
    expect(await c.checkToken('/ls/r/one', h.token)).toMatchObject({ current: true, latestToken: h.token });
    expect(await c.checkToken('/ls/r/one', h.token - 1)).toMatchObject({ current: false, latestToken: h.token });
  });
});
