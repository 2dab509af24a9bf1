/**
 * Goal: the client's promises against a real five-replica cell: killing the leader while a handle is held does not abort the
 * handle's signal — the failover finishes well within the TTL — and the lock
 * stays held with the same token; stopping every replica (SIGSTOP) for longer
 * than the TTL aborts the signal at jeopardy, before the cell could have
 * expired the session, and `expired` follows after the grace period.
 * The paused-holder scenario against PostgreSQL runs here too, with the
 * real cell expiring the paused holder's session; without the Debian
 * postgresql package that test (named "needs Debian postgresql") skips and
 * says so, and CI=true counts the skip as a failure.
 * Method: tools/fleet starts apps/cell-node five times on free loopback
 * ports; the test kills or stops processes and waits on the client's events
 * and heartbeat answers, with the client's own monotonic clock for the
 * timing assertions.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventEmitter } from 'node:events';
import { FencerClient, type LockHandle } from '../../src/index.js';
import { startCell, type Cell } from './cell.js';
import { buildClient, pausedHolderRun } from './paused-holder.js';
import { postgresBinDir, startPostgres, type Postgres } from './postgres.js';

const postgresMissing = postgresBinDir() === undefined;
if (postgresMissing)
  console.warn('cell.spec: the PostgreSQL test skipped: needs Debian postgresql (apt-get install postgresql); .ci/run installs it');

let cell: Cell;
let pg: Postgres | undefined;

beforeAll(async () => {
  buildClient();
  cell = await startCell();
  if (!postgresMissing) pg = await startPostgres();
}, 240_000);

afterAll(async () => {
  await pg?.stop();
  await cell?.stop();
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the predicate takes the event's own argument types, which differ per event
function until(emitter: EventEmitter, event: string, pred: (...args: any[]) => boolean, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      emitter.off(event, on);
      reject(new Error(`no matching ${event} within ${timeoutMs} ms`));
    }, timeoutMs);
    const on = (...args: unknown[]): void => {
      if (!pred(...args)) return;
      clearTimeout(timer);
      emitter.off(event, on);
      resolve();
    };
    emitter.on(event, on);
  });
}

describe('against a real five-replica cell', () => {
  it('killing the leader while a handle is held: no jeopardy, the signal stays quiet, the lock stays held', async () => {
    const ka = new EventEmitter();
    const TTL_MS = 6_000;
    const client = new FencerClient({
      endpoints: cell.endpoints,
      ttlMs: TTL_MS,
      keepAliveObserver: { onHeartbeatAnswered: (id) => ka.emit('answered', id) },
    });
    const events: string[] = [];
    for (const e of ['jeopardy', 'safe', 'expired'] as const) client.on(e, () => events.push(e));
    try {
      const h: LockHandle = await client.acquire('/ls/it/failover', { waitMs: 5_000 });
      const oldLeader = (await cell.leader()).leaderId;
      const leaseAtKill = h.session.lease.deadlineMonoMs;
      const killedAtMonoMs = performance.now();
      await cell.kill(oldLeader);
      const newLeader = (await cell.leaderAmong(cell.replicas.map((r) => r.id).filter((id) => id !== oldLeader))).leaderId;
      expect(newLeader).not.toBe(oldLeader);
      // A heartbeat sent after the kill has been answered: the new leader renewed the session…
      await until(ka, 'answered', () => h.session.lease.renewedFromMonoMs > killedAtMonoMs, TTL_MS);
      // …and time has run past where the lease of the moment of the kill would have ended.
      await until(ka, 'answered', () => performance.now() > leaseAtKill, 2 * TTL_MS);
      expect(events).toEqual([]);
      expect(h.signal.aborted).toBe(false);
      expect(h.session.state).toBe('safe');
      const got = await client.getLock('/ls/it/failover');
      expect(got.lock.holders.map((x) => [x.sessionId, x.token])).toEqual([[h.session.id, h.token]]);
      expect(await h.release()).toBe(true);
    } finally {
      await client.close();
    }
  }, 90_000);

  it('SIGSTOP of every replica: jeopardy before the cell could expire the session, expired after the grace period', async () => {
    const TTL_MS = 3_000;
    const GRACE_MS = 3_000;
    const client = new FencerClient({ endpoints: cell.endpoints, ttlMs: TTL_MS, gracePeriodMs: GRACE_MS });
    const live = cell.replicas.map((r) => r.id);
    try {
      const h = await client.acquire('/ls/it/stopped', { waitMs: 5_000 });
      const ttlMs = h.session.ttlMs; // as the cell clamped it
      const jeopardy = new Promise<number>((resolve) => client.once('jeopardy', () => resolve(performance.now())));
      const expired = new Promise<number>((resolve) => client.once('expired', () => resolve(performance.now())));
      for (const id of live) cell.signal(id, 'SIGSTOP');
      const jeopardyAt = await jeopardy;
      // The cell's deadline is at least ttl after it received the last acknowledged heartbeat,
      // which it received after the client sent it: jeopardy came strictly before that.
      const renewedFrom = h.session.lease.renewedFromMonoMs;
      expect(jeopardyAt).toBeLessThan(renewedFrom + ttlMs);
      expect(h.signal.aborted).toBe(true);
      expect(h.lostBecause).toBe('jeopardy');
      const expiredAt = await expired;
      const graceStart = h.session.lease.deadlineMonoMs;
      expect(expiredAt - graceStart).toBeGreaterThanOrEqual(GRACE_MS - 5);
      expect(expiredAt - graceStart).toBeLessThan(GRACE_MS + 1_000);
      expect(h.held).toBe(false);
    } finally {
      for (const id of live) cell.signal(id, 'SIGCONT');
      await client.close();
    }
    await cell.leaderAmong(live);
  }, 90_000);

  it.skipIf(postgresMissing)(
    'a paused holder against PostgreSQL: with the fence its stale write is rejected; without, it lands (needs Debian postgresql)',
    async () => {
      const fenced = await pausedHolderRun(pg!, cell.endpoints, 2_000, true, '/ls/itpg/account-1');
      expect(fenced.rowsA).toBe(0);
      expect(fenced.row).toBe(`B|${fenced.tokenB}`);
      const unfenced = await pausedHolderRun(pg!, cell.endpoints, 2_000, false, '/ls/itpg/account-2');
      expect(unfenced.rowsA).toBe(1);
      expect(unfenced.row).toBe('A|0');
    },
    120_000,
  );
});
