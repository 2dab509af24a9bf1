/**
 * Goal: the HeartbeatBatcher answers every heartbeat with its own session's
 * answer from the leader, whatever the order or completeness of the
 * leader's answer, follows routing-table changes for namespaces it has seen
 * already, and counts heartbeats per outcome.
 * Method: a batcher over a CellPool whose internal stubs are in-memory fake
 * leaders: each records the HeartbeatBatch it is sent and the test answers
 * it (or fails it). Time is driven by calling tick(); the timer never starts.
 */
import { describe, expect, it } from 'vitest';
import { FencerError } from '@fencer/base';
import { Metadata, type ServiceError, status } from '@grpc/grpc-js';
import type { LaneClient, LaneResult } from '@fencer/peer-transport';
import { toServiceError, type internalpb } from '@fencer/protocol';
import { pino } from 'pino';
import { CellPool, HeartbeatBatcher, RouterMetrics, StaticRoutingSource, type HeartbeatAnswer, type InternalStub } from '../src/index.js';
import type { RoutingTable } from '@fencer/contract';

type Answer = (err: ServiceError | null, res?: internalpb.HeartbeatBatchResponse) => void;
interface SentBatch {
  readonly target: string;
  readonly sessionIds: string[];
  readonly answer: Answer;
}

/** A pool whose every replica is a fake leader recording the batches it is sent (and the lane calls, the leader search's probes). */
class FakeLeaders extends CellPool {
  readonly sent: SentBatch[] = [];
  readonly probes: { target: string; method: string; done: (r: LaneResult) => void }[] = [];
  override lane(address: string): LaneClient {
    return {
      available: true,
      call: (method: string, _req: unknown, _deadline: number, done: (r: LaneResult) => void) => {
        this.probes.push({ target: address, method, done });
        return () => {};
      },
    } as unknown as LaneClient;
  }
  override internalStub(address: string): InternalStub {
    return {
      heartbeatBatch: (req: internalpb.HeartbeatBatchRequest, _md: unknown, _opts: unknown, answer: Answer) => {
        this.sent.push({ target: address, sessionIds: req.sessionIds, answer });
      },
    } as unknown as InternalStub;
  }
}

const table = (version: number, routes: Record<string, string>): RoutingTable => ({
  version,
  cells: new Map([
    ['cell-1', { id: 'cell-1', replicas: ['10.0.0.1:1'] }],
    ['cell-2', { id: 'cell-2', replicas: ['10.0.0.2:1'] }],
  ]),
  routes: new Map(Object.entries(routes).map(([namespace, cell]) => [namespace, { namespace, cell, state: 'active' as const }])),
});

function setup(routes: Record<string, string> = { a: 'cell-1', b: 'cell-2' }) {
  const source = new StaticRoutingSource(table(1, routes));
  const pool = new FakeLeaders();
  pool.update(source.table());
  source.onChange((t) => pool.update(t));
  const metrics = new RouterMetrics();
  const batcher = new HeartbeatBatcher({ pool, source, logger: pino({ level: 'silent' }), metrics, proxyId: 'p-1', intervalMs: 250 });
  const answers: (HeartbeatAnswer | FencerError)[] = [];
  const beat = (id: string): void => batcher.heartbeat(id, (a) => answers.push(a));
  const counted = async (outcome: string): Promise<number> =>
    (await metrics.heartbeats.get()).values.filter((v) => v.labels.outcome === outcome).reduce((n, v) => n + v.value, 0);
  return { source, pool, batcher, answers, beat, counted };
}

const alive = (sessionId: string, ttlMsRemaining: number): internalpb.SessionHeartbeat => ({
  sessionId,
  ttlMsRemaining,
  expired: false,
  forbidden: false,
});

describe('HeartbeatBatcher', () => {
  it('answers each heartbeat with its own session, whatever order the leader answers in', () => {
    const { pool, batcher, answers, beat } = setup();
    for (const id of ['a:1', 'a:2', 'a:3']) beat(id);
    batcher.tick();
    expect(pool.sent.map((b) => b.sessionIds)).toEqual([['a:1', 'a:2', 'a:3']]);
    pool.sent[0]!.answer(null, { sessions: [alive('a:3', 3000), alive('a:1', 1000), alive('a:2', 2000)] });
    expect(answers).toEqual(
      expect.arrayContaining([alive('a:1', 1000), alive('a:2', 2000), alive('a:3', 3000)].map((x) => expect.objectContaining(x))),
    );
    expect(answers).toHaveLength(3);
    expect(batcher.pendingSessions).toBe(0);
  });

  it('answers every waiter of a session once, and sends a session the leader left out again with the next batch', async () => {
    const { pool, batcher, answers, beat, counted } = setup();
    beat('a:1');
    beat('a:1');
    beat('a:2');
    batcher.tick();
    expect(pool.sent[0]!.sessionIds, 'one entry per session in a batch').toEqual(['a:1', 'a:2']);
    pool.sent[0]!.answer(null, { sessions: [alive('a:1', 5000)] });
    expect(answers).toEqual([alive('a:1', 5000), alive('a:1', 5000)].map((x) => expect.objectContaining(x)));
    beat('a:2'); // heartbeats again while its first heartbeat waits: both are answered by the next batch
    batcher.tick();
    expect(pool.sent[1]!.sessionIds).toEqual(['a:2']);
    pool.sent[1]!.answer(null, { sessions: [{ sessionId: 'a:2', ttlMsRemaining: 0, expired: true, forbidden: false }] });
    expect(answers.slice(2)).toEqual(
      [expect.objectContaining({ sessionId: 'a:2', expired: true })].concat([expect.objectContaining({ sessionId: 'a:2', expired: true })]),
    );
    expect(await counted('alive')).toBe(2);
    expect(await counted('expired')).toBe(2);
    expect(batcher.pendingSessions).toBe(0);
  });

  it('keeps the heartbeats of a failed batch for the next tick, merged with those that arrived meanwhile', () => {
    const { pool, batcher, answers, beat } = setup();
    beat('a:1');
    batcher.tick();
    beat('a:1');
    beat('a:2');
    batcher.tick();
    expect(pool.sent, 'no second batch while one is at the leader').toHaveLength(1);
    pool.sent[0]!.answer(toServiceError(new FencerError('NO_LEADER', 'electing')) as ServiceError);
    expect(answers).toEqual([]);
    batcher.tick();
    expect(pool.sent[1]!.sessionIds).toEqual(['a:1', 'a:2']);
    pool.sent[1]!.answer(null, { sessions: [alive('a:1', 700), alive('a:2', 800)] });
    expect(answers.map((a) => (a as HeartbeatAnswer).ttlMsRemaining)).toEqual([700, 700, 800]);
    expect(batcher.pendingSessions).toBe(0);
  });

  it('after a lost connection, asks the replicas who leads and sends the pending heartbeats there at once, not at the next tick', async () => {
    const source = new StaticRoutingSource({
      version: 1,
      cells: new Map([['cell-1', { id: 'cell-1', replicas: ['10.0.0.1:1', '10.0.0.1:2', '10.0.0.1:3'] }]]),
      routes: new Map([['a', { namespace: 'a', cell: 'cell-1', state: 'active' as const }]]),
    });
    const pool = new FakeLeaders();
    pool.update(source.table());
    const batcher = new HeartbeatBatcher({
      pool,
      source,
      logger: pino({ level: 'silent' }),
      metrics: new RouterMetrics(),
      proxyId: 'p',
      intervalMs: 250,
    });
    batcher.heartbeat('a:1', () => {});
    batcher.tick();
    expect(pool.sent[0]!.target).toBe('10.0.0.1:1');
    // grpc-js's own UNAVAILABLE, no reason of ours: the connection to the leader is gone.
    pool.sent[0]!.answer({ code: status.UNAVAILABLE, details: 'Connection dropped', metadata: new Metadata() } as ServiceError);
    expect(pool.probes.map((p) => p.target).sort()).toEqual(['10.0.0.1:1', '10.0.0.1:2', '10.0.0.1:3']);
    pool.probes.find((p) => p.target === '10.0.0.1:3')!.done({ ok: true, value: { revision: 4 } });
    await expect.poll(() => pool.sent.length, { timeout: 2_000 }).toBe(2);
    expect(pool.sent[1]).toMatchObject({ target: '10.0.0.1:3', sessionIds: ['a:1'] });
  });

  it('sends a namespace to its new cell once the routing table moves it', () => {
    const { source, pool, batcher, answers, beat } = setup();
    beat('a:1');
    beat('b:1');
    batcher.tick();
    expect(pool.sent.map((b) => [b.target, b.sessionIds])).toEqual([
      ['10.0.0.1:1', ['a:1']],
      ['10.0.0.2:1', ['b:1']],
    ]);
    for (const b of pool.sent) b.answer(null, { sessions: b.sessionIds.map((id) => alive(id, 1000)) });
    source.set(table(2, { a: 'cell-2', b: 'cell-2' }));
    beat('a:1');
    batcher.tick();
    expect(pool.sent[2]).toMatchObject({ target: '10.0.0.2:1', sessionIds: ['a:1'] });
    pool.sent[2]!.answer(null, { sessions: [alive('a:1', 900)] });
    expect(answers).toHaveLength(3);
  });

  it('answers expired at once for an id that names no namespace', async () => {
    const { pool, batcher, answers, beat, counted } = setup();
    beat('no-separator');
    batcher.tick();
    expect(pool.sent).toEqual([]);
    expect(answers).toEqual([{ sessionId: 'no-separator', ttlMsRemaining: 0, expired: true }]);
    expect(await counted('unroutable')).toBe(1);
  });
});
