/**
 * Goal: the promises hold across the failures a cell meets: kill -9 of the
 * leader while a session holds a lock, a leader paused past the election
 * timeout, a follower that must catch up by snapshot, and a leader stopped
 * with SIGTERM under load.
 * Method: real cell-node processes on 127.0.0.1, signals sent by PID.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { lockservice } from '@fencer/protocol';
import { type Cell, eventually, startCell } from './support/cell.js';

const { AcquireStatus: S } = lockservice;
let cell: Cell | undefined;

afterEach(async () => {
  await cell?.stop();
  cell = undefined;
});

async function getLock(c: Cell, name: string): Promise<lockservice.GetLockResponse> {
  return c.client.call<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', { name });
}

describe('failover', () => {
  it('kill -9 of the leader while a session holds a lock: a new leader within 3 s, the lock still held with its token, the next grant larger', async () => {
    cell = await startCell();
    const c = cell;
    const { sessionId } = await c.client.openSession('failover', 10_000);
    const hb = c.client.keepAlive([sessionId], 1000);
    try {
      const g = await c.client.acquire({ sessionId, name: '/ls/failover/a' });
      expect(g.status).toBe(S.ACQUIRE_STATUS_GRANTED);
      const old = await c.leader();
      const killedAt = Date.now();
      await c.kill(old.nodeId);
      const next = await eventually(
        async () => {
          const others = c.replicas.filter((r) => r.id !== old.nodeId);
          const st = await Promise.all(others.map((r) => c.statusOf(r.id)));
          return st.find((s) => s?.role === 'leader' && s.term > old.term);
        },
        3_000,
        'a new leader',
      );
      const electedMs = Date.now() - killedAt;
      expect(next.nodeId).not.toBe(old.nodeId);
      expect(electedMs).toBeLessThan(3_000);

      const lock = await getLock(c, '/ls/failover/a');
      expect(lock.lock!.holders).toEqual([expect.objectContaining({ sessionId, token: g.token })]);
      const g2 = await c.client.acquire({ sessionId, name: '/ls/failover/b' });
      expect(g2.token).toBeGreaterThan(g.token);
      // The session survived the failover: heartbeats kept it alive.
      expect(hb.expired()).toEqual([]);
    } finally {
      hb.stop();
    }
  });

  it('SIGSTOP of the leader past the election timeout, then SIGCONT: it steps down and no acknowledged write is lost', async () => {
    cell = await startCell();
    const c = cell;
    const { sessionId } = await c.client.openSession('pause', 30_000);
    const acked: { name: string; token: number }[] = [];
    for (let i = 0; i < 5; i++) {
      const g = await c.client.acquire({ sessionId, name: `/ls/pause/before-${i}` });
      acked.push({ name: `/ls/pause/before-${i}`, token: g.token });
    }
    const old = await c.leader();
    c.signal(old.nodeId, 'SIGSTOP');
    try {
      const next = await eventually(
        async () => {
          const st = await Promise.all(c.replicas.filter((r) => r.id !== old.nodeId).map((r) => c.statusOf(r.id)));
          return st.find((s) => s?.role === 'leader' && s.term > old.term);
        },
        5_000,
        'a new leader while the old one is paused',
      );
      for (let i = 0; i < 5; i++) {
        const g = await c.client.acquire({ sessionId, name: `/ls/pause/during-${i}` });
        acked.push({ name: `/ls/pause/during-${i}`, token: g.token });
      }
      c.signal(old.nodeId, 'SIGCONT');
      const resumed = await eventually(
        async () => {
          const s = await c.statusOf(old.nodeId);
          return s && s.role !== 'leader' && s.term >= next.term && s.appliedIndex >= next.commitIndex ? s : undefined;
        },
        5_000,
        'the paused leader to step down and catch up',
      );
      expect(resumed.leaderId).not.toBe(old.nodeId);
    } finally {
      c.signal(old.nodeId, 'SIGCONT');
    }
    for (const a of acked) {
      const check = await c.client.call<lockservice.CheckTokenRequest, lockservice.CheckTokenResponse>('checkToken', {
        name: a.name,
        token: a.token,
      });
      expect(check.current, a.name).toBe(true);
    }
  });

  it('a follower killed while the log is compacted catches up by snapshot when restarted', async () => {
    cell = await startCell({ extraArgs: ['--snapshot-every-entries', '50'] });
    const c = cell;
    const leader = await c.leader();
    const victim = c.replicas.find((r) => r.id !== leader.nodeId)!;
    const before = (await c.statusOf(victim.id))!;
    await c.kill(victim.id);
    const { sessionId } = await c.client.openSession('compact', 60_000);
    for (let i = 0; i < 150; i++) await c.client.acquire({ sessionId, name: `/ls/compact/${i}` });
    const leaderNow = await c.leader();
    expect(leaderNow.snapshotIndex).toBeGreaterThan(before.lastIndex);
    c.restart(victim.id);
    const caught = await eventually(
      async () => {
        const s = await c.statusOf(victim.id);
        return s && s.appliedIndex >= leaderNow.commitIndex ? s : undefined;
      },
      15_000,
      'the restarted follower to catch up',
    );
    // It could not have caught up from the log alone: the entries it missed were compacted away.
    expect(caught.snapshotIndex).toBeGreaterThan(before.lastIndex);
    expect(caught.locks).toBe(leaderNow.locks);
  });

  it('a replica restarted from a snapshot of its own comes back and catches up (found by the chaos harness)', async () => {
    cell = await startCell({ extraArgs: ['--snapshot-every-entries', '50'] });
    const c = cell;
    const { sessionId } = await c.client.openSession('own-snap', 60_000);
    for (let i = 0; i < 120; i++) await c.client.acquire({ sessionId, name: `/ls/own-snap/${i}` });
    const leader = await c.leader();
    const victim = c.replicas.find((r) => r.id !== leader.nodeId)!;
    const before = await eventually(
      async () => {
        const s = await c.statusOf(victim.id);
        return s && s.snapshotIndex > 0 ? s : undefined;
      },
      10_000,
      'the follower to take a snapshot of its own',
    );
    await c.kill(victim.id);
    c.restart(victim.id);
    // Caught up means up to the leader's commit of the 120th acquire: the victim's own applied index
    // when it was killed may still have lagged it (a follower learns a commit with the next message).
    const caught = await eventually(
      async () => {
        const s = await c.statusOf(victim.id);
        return s && s.appliedIndex >= Math.max(before.appliedIndex, leader.commitIndex) ? s : undefined;
      },
      15_000,
      'the restarted replica to answer and catch up',
    );
    expect(caught.locks).toBe(120);
  });

  it('SIGTERM of the leader under a steady stream of acquires: leadership moves with no failed client call', async () => {
    cell = await startCell();
    const c = cell;
    const { sessionId } = await c.client.openSession('drain', 30_000);
    const old = await c.leader();
    let failures = 0;
    let done = 0;
    let stop = false;
    const worker = async (w: number): Promise<void> => {
      for (let i = 0; !stop && i < 10_000; i++) {
        const name = `/ls/drain/w${w}-${i}`;
        try {
          const g = await c.client.acquire({ sessionId, name }, { budgetMs: 10_000 });
          expect(g.status).toBe(S.ACQUIRE_STATUS_GRANTED);
          await c.client.call('release', { sessionId, name, token: g.token }, { budgetMs: 10_000 });
          done++;
        } catch {
          failures++;
        }
      }
    };
    const workers = [0, 1, 2, 3].map(worker);
    await eventually(() => (done >= 20 ? true : undefined), 10_000, 'steady load');
    const doneAtTerm = done;
    const exited = new Promise<number | null>((resolve) => c.children.get(old.nodeId)!.once('exit', (code) => resolve(code)));
    c.signal(old.nodeId, 'SIGTERM');
    const code = await exited;
    await eventually(() => (done >= doneAtTerm + 40 ? true : undefined), 15_000, 'load continuing after the leader left');
    stop = true;
    await Promise.all(workers);
    expect(code).toBe(0);
    expect(failures).toBe(0);
    const next = await c.leader();
    expect(next.nodeId).not.toBe(old.nodeId);
  });
});
