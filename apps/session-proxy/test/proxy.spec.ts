/**
 * Goal: the proxy's own promises, without a cell: its bounds answer
 * RESOURCE_EXHAUSTED TOO_MANY_REQUESTS, a heartbeat is never answered before
 * the leader acknowledged its batch, at most one batch per cell leader per
 * interval, and the interval shrinks to a quarter of the shortest TTL.
 * Method: an in-process proxy (buildProxy) on 127.0.0.1:0 with a static
 * routing table whose cell is a fake leader: a grpc-js server on
 * 127.0.0.1:0 that serves CellInternal.HeartbeatBatch, records each batch
 * and answers when the test lets it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { credentials, type ServiceError } from '@grpc/grpc-js';
import { FencerError } from '@fencer/base';
import { fromServiceError, lockservice } from '@fencer/protocol';
import { StaticRoutingSource } from '@fencer/routing';
import { pino } from 'pino';
import { buildProxy, type Proxy } from '../src/index.js';
import { fakeLeader } from './support/fake-leader.js';

const routing = (replicas: string[]) =>
  new StaticRoutingSource({
    version: 1,
    cells: new Map([['cell-1', { id: 'cell-1', replicas }]]),
    routes: new Map([['known', { namespace: 'known', cell: 'cell-1', state: 'active' as const }]]),
  });

let proxy: Proxy | undefined;
let leader: Awaited<ReturnType<typeof fakeLeader>> | undefined;
let clients: InstanceType<typeof lockservice.LockServiceClient>[] = [];
afterEach(async () => {
  for (const c of clients) c.close();
  clients = [];
  await proxy?.close();
  await leader?.close();
  proxy = undefined;
  leader = undefined;
});

async function start(opts: {
  intervalMs: number;
  streamPendingMax?: number;
  replicas?: string[];
}): Promise<InstanceType<typeof lockservice.LockServiceClient>> {
  proxy = buildProxy({
    source: routing(opts.replicas ?? [leader!.address]),
    logger: pino({ level: 'silent' }),
    heartbeatIntervalMs: opts.intervalMs,
    ...(opts.streamPendingMax ? { streamPendingMax: opts.streamPendingMax } : {}),
  });
  const at = await proxy.listen('127.0.0.1:0');
  const c = new lockservice.LockServiceClient(at, credentials.createInsecure());
  clients.push(c);
  return c;
}

describe('session proxy', () => {
  it('answers a heartbeat only after the leader acknowledged the batch that carried it, once per session per batch', async () => {
    leader = await fakeLeader();
    const c = await start({ intervalMs: 50 });
    const stream = c.keepAlive();
    stream.on('error', () => {}); // the proxy's close at the end of the test ends it
    const answers: lockservice.KeepAliveResponse[] = [];
    stream.on('data', (a: lockservice.KeepAliveResponse) => answers.push(a));
    stream.write({ sessionId: 'known:a' });
    stream.write({ sessionId: 'known:b' });
    stream.write({ sessionId: 'known:a' });
    // Batches reach the leader; while it has answered none, the client hears nothing.
    const seen = new Set<string>();
    while (seen.size < 2) for (const id of (await leader.next()).sessionIds) seen.add(id);
    const held = leader.batches.length;
    await new Promise((r) => setTimeout(r, 300));
    expect(answers).toEqual([]);
    expect(leader.batches.length, 'no second batch while one is at the leader').toBe(held);
    // Now the leader answers every batch, those queued behind too.
    const got = new Promise<void>((resolve) => stream.on('data', () => answers.length === 3 && resolve()));
    const answerAll = setInterval(() => leader!.batches.forEach((x) => x.answer(9000)), 5);
    await got;
    clearInterval(answerAll);
    expect(answers.map((x) => x.sessionId).sort()).toEqual(['known:a', 'known:a', 'known:b']);
    expect(answers.every((x) => x.ttlMsRemaining === 9000 && !x.expired)).toBe(true);
    stream.end();
  });

  it('sends at most one batch per leader per interval, and shrinks the interval to a quarter of the shortest TTL', async () => {
    leader = await fakeLeader();
    const c = await start({ intervalMs: 400 });
    const stream = c.keepAlive();
    stream.on('data', () => {});
    stream.on('error', () => {}); // the proxy's close at the end of the test ends it
    // Answer every batch at once with a 400 ms TTL: the interval must become 100 ms.
    const answerAll = setInterval(() => {
      for (const b of leader!.batches) b.answer(400);
    }, 5);
    const beat = setInterval(() => stream.write({ sessionId: 'known:a' }), 10);
    try {
      const want = 12;
      while (leader.batches.length < want) await leader.next();
      const at = leader.batches.map((b) => b.atMs);
      // Receipt times jitter with the event loop, so compare spans, not single gaps:
      // the last six batches (after the TTL was seen) are ~100 ms apart, never closer on average.
      const lastSpanMs = at[want - 1]! - at[want - 6]!;
      expect(lastSpanMs).toBeGreaterThanOrEqual(5 * 100 - 60);
      expect(lastSpanMs).toBeLessThan(5 * 400);
      // Over the whole run, no more batches than intervals elapsed (the first interval is 400 ms).
      expect(at[want - 1]! - at[0]!).toBeGreaterThanOrEqual((want - 1) * 100 - 60);
      expect(proxy!.batcher.intervalMs).toBe(100);
    } finally {
      clearInterval(answerAll);
      clearInterval(beat);
      stream.end();
    }
  });

  it('re-sends the pending batch to the new leader named by NOT_LEADER', async () => {
    leader = await fakeLeader();
    const follower = await fakeLeader();
    try {
      const c = await start({ intervalMs: 50, replicas: [follower.address, leader.address] });
      const stream = c.keepAlive();
      stream.on('error', () => {}); // the proxy's close at the end of the test ends it
      const answer = new Promise<lockservice.KeepAliveResponse>((resolve) => stream.on('data', resolve));
      const atFollower = follower.next();
      const atLeader = leader.next();
      stream.write({ sessionId: 'known:a' });
      (await atFollower).fail(new FencerError('NOT_LEADER', 'not me', leader.address));
      const b = await atLeader;
      expect(b.sessionIds).toEqual(['known:a']);
      b.answer(5000);
      expect(await answer).toMatchObject({ sessionId: 'known:a', ttlMsRemaining: 5000, expired: false });
      stream.end();
    } finally {
      await follower.close();
    }
  });

  it('ends a stream with more heartbeats waiting than it may carry with RESOURCE_EXHAUSTED TOO_MANY_REQUESTS', async () => {
    leader = await fakeLeader();
    const c = await start({ intervalMs: 600_000, streamPendingMax: 100 });
    const stream = c.keepAlive();
    const e = await new Promise<FencerError>((resolve) => {
      stream.on('error', (x: ServiceError) => resolve(fromServiceError(x)));
      for (let i = 0; i <= 100; i++) stream.write({ sessionId: `known:flood-${i}` });
    });
    expect(e.code).toBe('TOO_MANY_REQUESTS');
    expect(e.message).toMatch(/at most 100 heartbeats may wait on one stream/);
  });
});
