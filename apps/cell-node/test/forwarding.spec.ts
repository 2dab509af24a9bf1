/**
 * Goal: a follower forwards the unary calls it gets to its leader by the
 * leader's lane (not a second gRPC call), and its client sees the leader's
 * answers and errors as if it had called the leader; a leader that speaks
 * no lane is reached by gRPC instead.
 * Method: a real three-replica cell on 127.0.0.1; every unary method of the
 * contract sent to one follower with `once` (one attempt, no retry, so a
 * follower that could not forward would show), the follower's
 * fencer_forwarded_calls_total{transport} read before and after. Then a
 * LaneForwarder pointed at an in-process grpc-js server that speaks no lane,
 * and at one that speaks both (listenMuxed) whose lane holds its calls.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { FencerError, type Result } from '@fencer/base';
import { TolerantServer, lockservice } from '@fencer/protocol';
import { type LaneOutcome, listenMuxed } from '@fencer/peer-transport';
import { GrpcForwarder, LaneForwarder, type ForwardTransport } from '../src/forwarder.js';
import { type Cell, startCell } from './support/cell.js';

let cell: Cell;
beforeAll(async () => {
  cell = await startCell({ replicas: 3 });
});
afterAll(async () => {
  await cell?.stop();
});

async function forwarded(metricsUrl: string): Promise<Record<string, number>> {
  const text = await (await fetch(metricsUrl)).text();
  const out: Record<string, number> = { lane: 0, grpc: 0 };
  for (const m of text.matchAll(/^fencer_forwarded_calls_total\{transport="(\w+)"\} (\d+)/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

describe('a follower forwarding to its leader', () => {
  it('sends every unary call by the leader’s lane, and its client gets the leader’s answers and errors', async () => {
    // A session first (through the retrying client), so the cell has a settled leader.
    await cell.client.openSession('fwd', 30_000);
    const leader = await cell.leader();
    const follower = cell.replicas.find((r) => r.id !== leader.nodeId)!;
    const before = await forwarded(follower.metrics);
    const once = <Res>(method: keyof lockservice.LockServiceClient, req: unknown): Promise<Res> =>
      cell.client.once<unknown, Res>(follower.grpc, method, req);

    const { sessionId } = await once<lockservice.OpenSessionResponse>('openSession', { clientId: 'fwd', ttlMs: 30_000, namespace: 'fwd' });
    const name = '/ls/fwd/a';
    const g = await once<lockservice.AcquireResponse>('acquire', {
      sessionId,
      name,
      mode: 1,
      waitMs: 0,
      requestId: 'fwd-1',
      lockDelayMs: 0,
    });
    expect(g.status).toBe(lockservice.AcquireStatus.ACQUIRE_STATUS_GRANTED);
    const lock = await once<lockservice.GetLockResponse>('getLock', { name });
    expect(lock.lock?.holders.map((h) => h.sessionId)).toEqual([sessionId]);
    const check = await once<lockservice.CheckTokenResponse>('checkToken', { name, token: g.token });
    expect(check).toMatchObject({ current: true, latestToken: g.token });
    const list = await once<lockservice.ListLocksResponse>('listLocks', { prefix: '/ls/fwd/', limit: 10, pageToken: '' });
    expect(list.locks.map((l) => l.name)).toEqual([name]);
    expect((await once<lockservice.ReleaseResponse>('release', { sessionId, name, token: g.token })).ok).toBe(true);
    // The leader's refusal comes back whole: code and reason.
    const refused = await once('acquire', {
      sessionId: 'fwd:0000000000000000000000000000dead',
      name,
      mode: 1,
      waitMs: 0,
      requestId: 'fwd-2',
      lockDelayMs: 0,
    }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(FencerError);
    expect((refused as FencerError).code).toBe('SESSION_NOT_FOUND');
    await once('closeSession', { sessionId });

    const after = await forwarded(follower.metrics);
    expect(after.lane! - before.lane!).toBe(8);
    expect(after.grpc).toBe(before.grpc);
  });
});

describe('LaneForwarder', () => {
  it('reaches a leader that speaks no lane by gRPC', async () => {
    const server = new Server();
    const seen: string[] = [];
    server.addService(lockservice.LockServiceService, {
      getLock: (call: { request: lockservice.GetLockRequest }, cb: (e: null, r: lockservice.GetLockResponse) => void) => {
        seen.push(call.request.name);
        cb(null, { lock: undefined, revision: 42 });
      },
    } as unknown as lockservice.LockServiceServer);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    const transports: ForwardTransport[] = [];
    const forwarder = new LaneForwarder(new GrpcForwarder('f1'), (t) => transports.push(t));
    try {
      const answer = await new Promise<Result<lockservice.GetLockResponse, FencerError>>((resolve) =>
        forwarder.forward('leader', `127.0.0.1:${port}`, 'getLock', { name: '/ls/x/y' }, (r) => resolve(r as never)),
      );
      expect(answer).toMatchObject({ ok: true, value: { revision: 42 } });
      expect(seen).toEqual(['/ls/x/y']);
      expect(transports).toEqual(['grpc']);
    } finally {
      forwarder.close();
      server.forceShutdown();
    }
  });
});

describe('LaneForwarder over a leader with a lane', () => {
  it('sends by gRPC what would overfill the lane, and frees a lane slot on each answer and each cancel', async () => {
    const server = new TolerantServer();
    server.addService(lockservice.LockServiceService, {
      getLock: (_call: unknown, cb: (e: null, r: lockservice.GetLockResponse) => void) => cb(null, { lock: undefined, revision: 1 }),
    } as unknown as lockservice.LockServiceServer);
    const held: ((o: LaneOutcome) => void)[] = [];
    const port = await listenMuxed(server, '127.0.0.1:0', {
      dispatch: (_method, _request, answer) => {
        held.push(answer);
        return () => {};
      },
    });
    const transports: ForwardTransport[] = [];
    const forwarder = new LaneForwarder(new GrpcForwarder('f1'), (t) => transports.push(t), 1);
    const get = (): { answer: Promise<Result<lockservice.GetLockResponse, FencerError>>; cancel: () => void } => {
      let cancel = (): void => {};
      const answer = new Promise<Result<lockservice.GetLockResponse, FencerError>>((resolve) => {
        cancel = forwarder.forward('leader', port.address, 'getLock', { name: '/ls/x/y' }, (r) => resolve(r as never));
      });
      return { answer, cancel };
    };
    const until = async (check: () => boolean): Promise<void> => {
      while (!check()) await new Promise((r) => setTimeout(r, 5));
    };
    try {
      const first = get();
      await until(() => held.length === 1);
      // The lane holds one call: the next goes by gRPC, and is answered there.
      expect(await get().answer).toMatchObject({ ok: true, value: { revision: 1 } });
      expect(transports).toEqual(['grpc']);
      held[0]!({ ok: true, value: { lock: undefined, revision: 7 } });
      expect(await first.answer).toMatchObject({ ok: true, value: { revision: 7 } });
      expect(transports).toEqual(['grpc', 'lane']);

      // The answer freed the slot; a cancel frees it too.
      const third = get();
      await until(() => held.length === 2);
      third.cancel();
      const fourth = get();
      await until(() => held.length === 3);
      held[2]!({ ok: true, value: { lock: undefined, revision: 9 } });
      expect(await fourth.answer).toMatchObject({ ok: true, value: { revision: 9 } });
      expect(transports).toEqual(['grpc', 'lane', 'lane']);
    } finally {
      forwarder.close();
      port.destroy();
      await port.close();
      server.forceShutdown();
    }
  });
});
