/**
 * Goal: the router's own promises that need no real cell: calls in flight
 * per cell are bounded (RESOURCE_EXHAUSTED TOO_MANY_REQUESTS beyond), the
 * caller's deadline reaches the cell and a cancelled caller cancels the
 * cell's call, NAMESPACE_MOVING is retried and NAMESPACE_NOT_HERE refreshes
 * the table first, UNAVAILABLE NOT_LEADER is followed to the hinted replica
 * of the same cell, the cell's leader-hint never reaches the client, and
 * after a lost lane connection to the leader the replicas are asked who
 * leads and the call (a held Acquire with its request_id) is resent to the
 * one that answers (decision 0021).
 * Method: an in-process router (buildRouter) on 127.0.0.1:0 with a static
 * routing table in front of the client library's fake LockService
 * (@fencer/client/testing), which holds waiting Acquires open and can play
 * a follower that answers NOT_LEADER. It speaks gRPC only, so these calls
 * take the router's gRPC path; the lane cases put the router in front of a
 * muxed port (@fencer/peer-transport listenMuxed) whose lane calls the test holds
 * and answers, as a cell node's would be.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Metadata, credentials } from '@grpc/grpc-js';
import { pino } from 'pino';
import { FencerError } from '@fencer/base';
import { FakeLockService } from '@fencer/client/testing';
import { TolerantServer, lockservice } from '@fencer/protocol';
import { type LaneMethod, type LaneOutcome, type MuxedPort, listenMuxed } from '@fencer/peer-transport';
import { TestClient, errorOf, eventually } from '@fencer/fleet/contract';
import { buildRouter, StaticRoutingSource, type Router } from '../src/index.js';
import { backoffMs } from '../src/retry-policy.js';
import { MOVING_RETRY_MS_MAX, RETRY_BACKOFF_MS_MAX, RETRY_BACKOFF_MS_MIN } from '../src/limits.js';

let router: Router | undefined;
let fake: FakeLockService | undefined;
let client: TestClient | undefined;
afterEach(async () => {
  client?.close();
  await router?.close();
  await fake?.stop();
  router = undefined;
  client = undefined;
});

async function start(replicas: string[], cellCallsInFlightMax?: number): Promise<string> {
  const source = new StaticRoutingSource({
    version: 1,
    cells: new Map([['cell-1', { id: 'cell-1', replicas }]]),
    routes: new Map([['ns', { namespace: 'ns', cell: 'cell-1', state: 'active' as const }]]),
  });
  router = buildRouter({ source, logger: pino({ level: 'silent' }), ...(cellCallsInFlightMax ? { cellCallsInFlightMax } : {}) });
  const at = await router.listen('127.0.0.1:0');
  client = new TestClient([at]);
  return at;
}

describe('cell router', () => {
  it('bounds the calls in flight per cell with RESOURCE_EXHAUSTED TOO_MANY_REQUESTS', async () => {
    fake = await FakeLockService.start();
    const at = await start([fake.address], 1);
    const [a, b] = [(await client!.openSession('ns')).sessionId, (await client!.openSession('ns')).sessionId];
    const g = await client!.acquire({ sessionId: a, name: '/ls/ns/x' });
    // b's wait holds the one slot towards the cell.
    const held = client!.once(
      at,
      'acquire',
      { sessionId: b, name: '/ls/ns/x', mode: 1, waitMs: 20_000, requestId: 'w', lockDelayMs: 0 },
      30_000,
    );
    await eventually(() => (router!.pool.cell('cell-1')!.inFlight === 1 ? true : undefined), 5_000, 'the held call');
    const e = await errorOf(client!.once(at, 'getLock', { name: '/ls/ns/x' }));
    expect(e.code).toBe('TOO_MANY_REQUESTS');
    expect(e.message).toMatch(/cell-1.*in flight/);
    expect(await router!.metrics.registry.metrics()).toMatch(/fencer_router_in_flight\{cell="cell-1"\} 1\n/);
    // The router's one slot is taken: release straight at the cell.
    const direct = new TestClient([fake.address]);
    await direct.call('release', { sessionId: a, name: '/ls/ns/x', token: g.token });
    direct.close();
    expect(((await held) as { status: number }).status).toBe(1); // GRANTED once the slot's holder let go
  });

  it("passes the caller's deadline on, and a caller that gives up cancels the cell's call", async () => {
    fake = await FakeLockService.start();
    const at = await start([fake.address]);
    const [a, b] = [(await client!.openSession('ns')).sessionId, (await client!.openSession('ns')).sessionId];
    await client!.acquire({ sessionId: a, name: '/ls/ns/y' });
    const started = Date.now();
    const e = await errorOf(
      client!.once(at, 'acquire', { sessionId: b, name: '/ls/ns/y', mode: 1, waitMs: 20_000, requestId: 'd', lockDelayMs: 0 }, 700),
    );
    expect(e.code).toBe('DEADLINE_EXCEEDED');
    expect(Date.now() - started).toBeLessThan(5_000);
    // The cell's call ended too: nothing is in flight towards it any more.
    await eventually(() => (router!.pool.cell('cell-1')!.inFlight === 0 ? true : undefined), 5_000, 'the upstream call to end');
  });

  it('retries NAMESPACE_MOVING with backoff and NAMESPACE_NOT_HERE after refreshing its table, inside the deadline', async () => {
    fake = await FakeLockService.start();
    await start([fake.address]);
    let refreshes = 0;
    const refresh = router!.source.refresh.bind(router!.source);
    router!.source.refresh = () => {
      refreshes++;
      return refresh();
    };
    fake.injectFault({ method: 'getLock', code: 'NAMESPACE_MOVING' });
    fake.injectFault({ method: 'getLock', code: 'NAMESPACE_NOT_HERE' });
    const r = await client!.call<{ name: string }, { lock: { name: string } }>('getLock', { name: '/ls/ns/moving' });
    expect(r.lock.name).toBe('/ls/ns/moving');
    expect(refreshes).toBe(1);
    expect(client!.retries, 'the router retried, not the client').toBe(0);
    const text = await router!.metrics.registry.metrics();
    expect(text).toMatch(/fencer_router_retries_total\{cell="cell-1",method="getLock",reason="NAMESPACE_MOVING"\} 1/);
    expect(text).toMatch(/fencer_router_retries_total\{cell="cell-1",method="getLock",reason="NAMESPACE_NOT_HERE"\} 1/);
  });

  it('asks the same leader again while a namespace is frozen for a move, the pauses growing no further than MOVING_RETRY_MS_MAX', async () => {
    fake = await FakeLockService.start();
    const follower = await FakeLockService.start();
    try {
      await start([fake.address, follower.address]);
      const frozenAnswers = 8;
      for (let i = 0; i < frozenAnswers; i++) fake.injectFault({ method: 'getLock', code: 'NAMESPACE_MOVING' });
      const attemptsAt: number[] = [];
      fake.on('call', ({ method }: { method: string }) => method === 'getLock' && attemptsAt.push(performance.now()));
      const r = await client!.call<{ name: string }, { lock: { name: string } }>('getLock', { name: '/ls/ns/frozen' });
      expect(r.lock.name).toBe('/ls/ns/frozen');
      // Every attempt went to the leader that answered NAMESPACE_MOVING: a follower would only forward it there.
      expect(attemptsAt).toHaveLength(frozenAnswers + 1);
      expect(follower.callsOf('getLock')).toHaveLength(0);
      // The pauses grew to MOVING_RETRY_MS_MAX at most (10 + 20 + 40 + 5 × 50 = 320 ms in all at the longest draws): less
      // than the shortest the ordinary backoff could have drawn for the same attempts (half of 10 + 20 + ... + 250 = 530 ms).
      const ordinaryFloorMs = Array.from(
        { length: frozenAnswers },
        (_, n) => Math.min(RETRY_BACKOFF_MS_MAX, RETRY_BACKOFF_MS_MIN * 2 ** n) / 2,
      ).reduce((a, b) => a + b);
      const cappedCeilingMs = Array.from({ length: frozenAnswers }, (_, n) =>
        Math.min(MOVING_RETRY_MS_MAX, RETRY_BACKOFF_MS_MIN * 2 ** n),
      ).reduce((a, b) => a + b);
      expect(cappedCeilingMs).toBeLessThan(ordinaryFloorMs);
      expect(attemptsAt.at(-1)! - attemptsAt[0]!).toBeLessThan(ordinaryFloorMs);
    } finally {
      await follower.stop();
    }
  });

  it('backs off a frozen namespace to at most MOVING_RETRY_MS_MAX, anything else up to RETRY_BACKOFF_MS_MAX', () => {
    for (let i = 0; i < 200; i++) {
      expect(backoffMs(12, 'NAMESPACE_MOVING')).toBeLessThanOrEqual(MOVING_RETRY_MS_MAX);
      expect(backoffMs(12, 'NAMESPACE_MOVING')).toBeGreaterThanOrEqual(MOVING_RETRY_MS_MAX / 2);
      expect(backoffMs(12, 'NO_LEADER')).toBeGreaterThanOrEqual(RETRY_BACKOFF_MS_MAX / 2);
    }
  });

  it('follows NOT_LEADER to the hinted replica of the cell, and keeps the hint from the client', async () => {
    fake = await FakeLockService.start();
    const follower = await FakeLockService.start();
    try {
      follower.notLeaderHint = fake.address;
      await start([follower.address, fake.address]);
      const s = await client!.openSession('ns');
      expect(s.sessionId).not.toBe('');
      expect(router!.pool.cell('cell-1')!.knownLeader).toBe(fake.address);
      expect(client!.retries, 'the router retried, not the client').toBe(0);
      // An error the cell answers reaches the client without the cell's leader-hint.
      fake.injectFault({ method: 'getLock', code: 'NAMESPACE_FORBIDDEN', leaderHint: fake.address });
      const e = await errorOf(client!.call('getLock', { name: '/ls/ns/z' }));
      expect(e.code).toBe('NAMESPACE_FORBIDDEN');
      expect(e.leaderHint).toBeUndefined();
    } finally {
      await follower.stop();
    }
  });
});

interface HeldCall {
  readonly method: LaneMethod;
  readonly request: unknown;
  readonly answer: (o: LaneOutcome) => void;
  cancelled: boolean;
}

/** A cell node's client port in miniature: its lane calls are held for the test, its gRPC serves nothing. */
async function laneNode(): Promise<{ address: string; held: HeldCall[]; close(): void }> {
  const held: HeldCall[] = [];
  const server = new TolerantServer();
  server.addService(lockservice.LockServiceService, {} as lockservice.LockServiceServer);
  const port: MuxedPort = await listenMuxed(server, '127.0.0.1:0', {
    dispatch: (method, request, answer) => {
      const h: HeldCall = { method, request, answer, cancelled: false };
      held.push(h);
      return () => (h.cancelled = true);
    },
  });
  return {
    address: port.address,
    held,
    close: () => {
      port.destroy();
      server.forceShutdown();
    },
  };
}

const upstream = async (transport: string): Promise<number> =>
  (await router!.metrics.upstreamCalls.get()).values.find((v) => v.labels.transport === transport)?.value ?? 0;

describe('cell router over the lane', () => {
  it('sends unary calls to a node by the lane, not gRPC, and passes its answers and errors on', async () => {
    const n = await laneNode();
    try {
      const at = await start([n.address]);
      const opened = client!.once(at, 'openSession', { clientId: 'c', ttlMs: 10_000, namespace: 'ns' });
      await eventually(() => n.held[0], 5_000, 'the call at the node');
      n.held[0]!.answer({ ok: true, value: { sessionId: 'ns:abc', ttlMs: 10_000 } });
      expect(await opened).toMatchObject({ sessionId: 'ns:abc' });
      const failed = errorOf(client!.call('getLock', { name: '/ls/ns/x' }));
      await eventually(() => n.held[1], 5_000, 'the second call at the node');
      n.held[1]!.answer({ ok: false, error: new FencerError('NAMESPACE_FORBIDDEN', 'not yours', n.address) });
      const e = await failed;
      expect([e.code, e.message, e.leaderHint]).toEqual(['NAMESPACE_FORBIDDEN', 'not yours', undefined]);
      expect(await upstream('lane')).toBe(2);
      expect(await upstream('grpc')).toBe(0);
    } finally {
      n.close();
    }
  });

  it("cancels the node's call at the caller's deadline and frees the cell's slot", async () => {
    const n = await laneNode();
    try {
      const at = await start([n.address]);
      const e = await errorOf(
        client!.once(at, 'acquire', { sessionId: 'ns:1', name: '/ls/ns/y', mode: 1, waitMs: 20_000, requestId: 'd', lockDelayMs: 0 }, 700),
      );
      expect(e.code).toBe('DEADLINE_EXCEEDED');
      await eventually(() => (n.held[0]?.cancelled ? true : undefined), 5_000, "the node's call to be cancelled");
      await eventually(() => (router!.pool.cell('cell-1')!.inFlight === 0 ? true : undefined), 5_000, 'the slot to be freed');
    } finally {
      n.close();
    }
  });

  it("a client that cancels its call cancels the node's call and frees the cell's slot", async () => {
    const n = await laneNode();
    const g = new lockservice.LockServiceClient(await start([n.address]), credentials.createInsecure());
    try {
      const call = g.acquire(
        { sessionId: 'ns:1', name: '/ls/ns/c', mode: 1, waitMs: 20_000, requestId: 'c', lockDelayMs: 0 },
        new Metadata(),
        { deadline: Date.now() + 30_000 },
        () => {},
      );
      await eventually(() => n.held[0], 5_000, 'the call at the node');
      expect(router!.pool.cell('cell-1')!.inFlight).toBe(1);
      call.cancel();
      await eventually(() => (n.held[0]!.cancelled ? true : undefined), 5_000, "the node's call to be cancelled");
      await eventually(() => (router!.pool.cell('cell-1')!.inFlight === 0 ? true : undefined), 5_000, 'the slot to be freed');
    } finally {
      g.close();
      n.close();
    }
  });

  it('a lost lane connection is retried on another replica inside the deadline', async () => {
    const [first, second] = [await laneNode(), await laneNode()];
    try {
      await start([first.address, second.address]);
      const pending = client!.call('getLock', { name: '/ls/ns/z' });
      await eventually(() => first.held[0], 5_000, 'the call at the first replica');
      first.close();
      // The router first asks who leads now (leader-search.ts): the second replica serves that probe.
      const probe = await eventually(() => second.held[0], 10_000, 'the leader probe at the second replica');
      expect(probe.request).toEqual({ name: '/ls/ns/fencer.leader-probe' });
      probe.answer({ ok: true, value: { lock: undefined, revision: 3 } });
      const retry = await eventually(() => second.held[1], 10_000, 'the retry at the second replica');
      expect(retry.request).toMatchObject({ name: '/ls/ns/z' });
      retry.answer({ ok: true, value: { lock: undefined, revision: 3 } });
      expect(await pending).toMatchObject({ revision: 3 });
      expect(client!.retries, 'the router retried, not the client').toBe(0);
    } finally {
      first.close();
      second.close();
    }
  });
});

describe('cell router after a lost connection to the leader (decision 0021)', () => {
  /** Answers each probe (a GetLock of the probe name) held at a node with `answer`, as it arrives. */
  function answerProbes(node: { held: HeldCall[] }, answer: (nth: number) => LaneOutcome): () => void {
    let answered = 0;
    const timer = setInterval(() => {
      for (const h of node.held) {
        if (h.method !== 'getLock' || (h as { done?: boolean }).done) continue;
        (h as { done?: boolean }).done = true;
        h.answer(answer(answered++));
      }
    }, 2);
    return () => clearInterval(timer);
  }

  it('asks the replicas who leads and resends a held Acquire, with its request_id, to the one that answers', async () => {
    const [leader, next, elected] = [await laneNode(), await laneNode(), await laneNode()];
    const stops: (() => void)[] = [];
    try {
      await start([leader.address, next.address, elected.address]);
      const acquire = { sessionId: 'ns:1', name: '/ls/ns/held', mode: 1, waitMs: 20_000, requestId: 'req-7', lockDelayMs: 0 };
      const pending = client!.call('acquire', acquire);
      await eventually(() => leader.held[0], 5_000, 'the Acquire held at the leader');
      // `next` (the next replica in turn) knows no leader at first, then names the elected one;
      // `elected` refuses until its election is over, then serves the probe.
      stops.push(
        answerProbes(next, (n) => ({ ok: false, error: new FencerError('NOT_LEADER', 'electing', n < 3 ? undefined : elected.address) })),
      );
      stops.push(
        answerProbes(elected, (n) =>
          n < 2 ? { ok: false, error: new FencerError('NO_LEADER', 'electing') } : { ok: true, value: { lock: undefined, revision: 9 } },
        ),
      );
      leader.close();
      const resent = await eventually(() => elected.held.find((h) => h.method === 'acquire'), 10_000, 'the Acquire at the elected leader');
      expect(resent.request).toMatchObject({ requestId: 'req-7', name: '/ls/ns/held' });
      // Not the next replica in turn: the search sent it where the answer pointed.
      expect(next.held.filter((h) => h.method === 'acquire')).toEqual([]);
      expect(next.held.length + elected.held.length).toBeGreaterThan(1);
      resent.answer({ ok: true, value: { status: 1, token: 12, holders: [], queuePosition: 0, revision: 12 } });
      expect(await pending).toMatchObject({ token: 12 });
      expect(router!.pool.cell('cell-1')!.knownLeader).toBe(elected.address);
    } finally {
      for (const stop of stops) stop();
      leader.close();
      next.close();
      elected.close();
    }
  });
});
