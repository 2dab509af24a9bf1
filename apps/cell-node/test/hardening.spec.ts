/**
 * Goal: three holes stay closed on a running cell: the Raft
 * peer service is not reachable on the client port; a queued Acquire with a
 * wait longer than Node's largest timer (30 days) is held, at the leader
 * and through a follower, until the holder releases; and a Watch from now
 * opened on a follower right after a grant starts with that grant.
 * Method: three cell-node processes on 127.0.0.1 (tools/fleet/test-cell);
 * raw gRPC clients aimed at chosen replicas. "Held" is shown by ordering:
 * the waiter is visible in the lock's queue and a later read round trip
 * completes while its call is still unanswered; the call's first answer is
 * then GRANTED, after the release.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServiceError, credentials, status } from '@grpc/grpc-js';
import { FencerError } from '@fencer/base';
import { fromServiceError, lockservice, raftpb } from '@fencer/protocol';
import { type Cell, eventually, startCell } from './support/cell.js';

const { AcquireStatus: S, LockMode: M, WatchEventType: W } = lockservice;
const thirtyDaysMs = 30 * 24 * 3600 * 1000;
let cell: Cell;
let ns = 0;
const freshNs = (): string => `h${++ns}-${process.pid}`;

beforeAll(async () => {
  cell = await startCell({ replicas: 3 });
});
afterAll(async () => {
  await cell?.stop();
});

async function roles(): Promise<{ leader: string; follower: string }> {
  const st = await cell.leader();
  const leader = cell.replicas.find((r) => r.id === st.nodeId)!.grpc;
  const follower = cell.replicas.find((r) => r.id !== st.nodeId)!.grpc;
  return { leader, follower };
}

describe('peer traffic only on the peer listener', () => {
  it('every lock-service port answers UNIMPLEMENTED for the Raft peer service', async () => {
    for (const address of cell.endpoints) {
      const client = new raftpb.RaftTransportClient(address, credentials.createInsecure());
      const code = await new Promise<number>((resolve) => {
        const stream = client.send();
        stream.on('error', (e: ServiceError) => resolve(e.code));
        stream.on('data', () => {});
        stream.on('end', () => resolve(status.OK));
        stream.write({ senderAddress: '', cellId: 'cell-1', messages: [] });
      });
      client.close();
      expect(code, address).toBe(status.UNIMPLEMENTED);
    }
    // The cell still serves.
    await cell.client.openSession(freshNs());
  });
});

describe('a wait longer than any Node timer', () => {
  it.each(['leader', 'follower'] as const)(
    'a queued Acquire with wait_ms of 30 days sent to the %s is held until the holder releases',
    async (via) => {
      const n = freshNs();
      const name = `/ls/${n}/long`;
      const a = (await cell.client.openSession(n, 30_000)).sessionId;
      const b = (await cell.client.openSession(n, 30_000)).sessionId;
      const held = await cell.client.acquire({ sessionId: a, name });
      expect(held.status).toBe(S.ACQUIRE_STATUS_GRANTED);
      const target = (await roles())[via];
      const answers: (lockservice.AcquireResponse | FencerError)[] = [];
      const waiting = cell.client
        .once<lockservice.AcquireRequest, lockservice.AcquireResponse>(
          target,
          'acquire',
          { sessionId: b, name, mode: M.LOCK_MODE_EXCLUSIVE, waitMs: thirtyDaysMs, requestId: `long-${via}`, lockDelayMs: 0 },
          120_000,
        )
        .then(
          (r) => void answers.push(r),
          (e: FencerError) => void answers.push(e),
        );
      await eventually(
        async () => {
          const got = await cell.client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name });
          return got.lock?.waiters.some((w) => w.sessionId === b) ? true : undefined;
        },
        10_000,
        'the 30-day waiter in the queue',
      );
      // One more linearizable round trip through the same replica: still unanswered.
      await cell.client.once(target, 'checkToken', { name, token: held.token });
      expect(answers).toEqual([]);
      await cell.client.call('release', { sessionId: a, name, token: held.token });
      await waiting;
      expect(answers).toHaveLength(1);
      const first = answers[0]!;
      expect(first instanceof FencerError ? `${first.code}: ${first.message}` : first.status).toBe(S.ACQUIRE_STATUS_GRANTED);
      expect((first as lockservice.AcquireResponse).token).toBeGreaterThan(held.token);
    },
  );
});

describe('Watch from now on a follower', () => {
  it('a prefix Watch opened on a follower right after a grant starts with that grant', async () => {
    const n = freshNs();
    const a = (await cell.client.openSession(n, 30_000)).sessionId;
    const { leader, follower } = await roles();
    const granted = await cell.client.once<lockservice.AcquireRequest, lockservice.AcquireResponse>(leader, 'acquire', {
      sessionId: a,
      name: `/ls/${n}/w`,
      mode: 1,
      waitMs: 0,
      requestId: 'w1',
      lockDelayMs: 0,
    });
    expect(granted.status).toBe(S.ACQUIRE_STATUS_GRANTED);
    const stream = cell.client.raw(follower).watch({ name: `/ls/${n}/`, prefix: true, sinceRevision: 0 });
    const events = await new Promise<lockservice.WatchEvent[]>((resolve, reject) => {
      const got: lockservice.WatchEvent[] = [];
      stream.on('data', (e: lockservice.WatchEvent) => {
        got.push(e);
        if (e.type === W.WATCH_EVENT_TYPE_PROGRESS) {
          stream.cancel();
          resolve(got);
        }
      });
      stream.on('error', (e: ServiceError) => (e.code === status.CANCELLED ? resolve(got) : reject(fromServiceError(e))));
    });
    const snapshots = events.filter((e) => e.type === W.WATCH_EVENT_TYPE_SNAPSHOT);
    expect(snapshots.map((e) => e.name)).toEqual([`/ls/${n}/w`]);
    expect(snapshots[0]!.lock!.holders.map((h) => h.token)).toEqual([granted.token]);
    expect(events.at(-1)!.revision).toBeGreaterThanOrEqual(granted.revision);
  });
});
