/**
 * Goal: the session life cycle of the issue, to the millisecond: the local
 * lease counts from when the last acknowledged heartbeat was *sent*, minus
 * the drift margin; when it passes the session is in jeopardy (handles'
 * signals abort, new operations wait, locks are kept) and the client keeps
 * heartbeating; an answer makes it safe again, the end of the grace period
 * or an `expired` answer makes it expired.
 * Method: the client runs on a ManualScheduler, so the test decides every
 * instant; the fake LockService holds heartbeat answers while "paused" (a
 * stopped leader). Between time steps the test waits for the I/O events it
 * needs (heartbeat arrived, answer applied), never for wall-clock time.
 */
import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SeededRandom } from '@fencer/base';
import { FencerClient, LockLostError, leaseMarginMs, type LockHandle } from '../src/index.js';
import { FakeLockService, ManualScheduler } from '../src/testing/index.js';
import { nextEvent, turn } from './helpers.js';

const TTL_MS = 3_000;
const GRACE_MS = 10_000;
const MARGIN_MS = leaseMarginMs(TTL_MS, 500, 100); // 102

let fake: FakeLockService;
let sched: ManualScheduler;
let client: FencerClient;
let ka: EventEmitter;

function makeClient(endpoints: string[]): FencerClient {
  ka = new EventEmitter();
  return new FencerClient({
    endpoints,
    scheduler: sched,
    random: new SeededRandom(7),
    ttlMs: TTL_MS,
    gracePeriodMs: GRACE_MS,
    driftPpm: 500,
    driftMarginMs: 100,
    backoffBaseMs: 10,
    backoffMaxMs: 40,
    keepAliveObserver: {
      onHeartbeatSent: (id, address) => ka.emit('sent', id, address),
      onHeartbeatAnswered: (id, answer) => ka.emit('answered', id, answer),
      onStreamFailed: (address, error) => ka.emit('failed', address, error),
    },
  });
}

async function holdLock(name: string): Promise<LockHandle> {
  const opened = nextEvent(fake, 'keepAliveOpened');
  const h = await client.acquire(name, { waitMs: 0 });
  await opened;
  return h;
}

beforeEach(async () => {
  fake = await FakeLockService.start();
  sched = new ManualScheduler(0);
  client = makeClient([fake.address]);
});

afterEach(async () => {
  fake.resumeHeartbeats();
  await client.close();
  await fake.stop();
});

describe('local lease', () => {
  it('counts from the send time of the acknowledged heartbeat, minus the drift margin', async () => {
    const h = await holdLock('/ls/j/sent');
    expect(h.session.lease.deadlineMonoMs).toBe(TTL_MS - MARGIN_MS); // OpenSession was sent at 0
    fake.pauseHeartbeats();
    const arrived = nextEvent(fake, 'heartbeat');
    sched.advanceTo(TTL_MS / 3); // first heartbeat due at TTL/3
    await arrived;
    sched.advanceTo(1_500); // the answer is late by 500 ms
    const answered = nextEvent(ka, 'answered');
    fake.resumeHeartbeats();
    await answered;
    expect(h.session.lease.deadlineMonoMs).toBe(1_000 + TTL_MS - MARGIN_MS); // not 1_500 + ...
    expect(h.session.state).toBe('safe');
  });

  it('heartbeats every TTL/3 keep the session safe indefinitely', async () => {
    const h = await holdLock('/ls/j/steady');
    for (let beat = 1; beat <= 6; beat++) {
      const answered = nextEvent(ka, 'answered');
      sched.advanceTo(beat * 1_000);
      await answered;
      expect(h.session.lease.deadlineMonoMs).toBe(beat * 1_000 + TTL_MS - MARGIN_MS);
    }
    expect(h.signal.aborted).toBe(false);
  });
});

describe('jeopardy, safe, expired', () => {
  it('enters jeopardy exactly when the lease passes: the signal aborts, new operations wait; an answer makes it safe', async () => {
    const h = await holdLock('/ls/j/a');
    const events: string[] = [];
    for (const e of ['jeopardy', 'safe', 'expired'] as const) client.on(e, () => events.push(e));
    fake.pauseHeartbeats();
    const arrived = nextEvent(fake, 'heartbeat');
    sched.advanceTo(1_000);
    await arrived;
    // The held heartbeat times out (1 s): the client reconnects and heartbeats again.
    const again = nextEvent(fake, 'heartbeat');
    sched.advanceTo(2_050);
    await again;
    sched.advanceTo(TTL_MS - MARGIN_MS - 1);
    expect(h.session.state).toBe('safe');
    expect(h.signal.aborted).toBe(false);
    sched.advanceTo(TTL_MS - MARGIN_MS);
    expect(events).toEqual(['jeopardy']);
    expect(h.session.state).toBe('jeopardy');
    expect(h.signal.aborted).toBe(true);
    expect((h.signal.reason as LockLostError).reason).toBe('jeopardy');
    expect(h.held).toBe(true); // kept: it may survive

    // A new operation waits while the session is in jeopardy.
    let acquired: LockHandle | undefined;
    const pending = client.acquire('/ls/j/b', { waitMs: 0 }).then((x) => (acquired = x));
    await turn();
    await turn();
    expect(acquired).toBeUndefined();
    expect(fake.callsOf('acquire')).toHaveLength(1);

    const safe = nextEvent(client, 'safe');
    fake.resumeHeartbeats(); // the paused node answers the heartbeat it was holding
    await safe;
    expect(events).toEqual(['jeopardy', 'safe']);
    expect(h.session.state).toBe('safe');
    expect(h.session.lease.deadlineMonoMs).toBeGreaterThan(sched.monoMs());
    await pending;
    expect(acquired?.token).toBeGreaterThan(h.token);
    expect(acquired?.signal.aborted).toBe(false);
    // The lock was kept throughout.
    expect(fake.locks.get('/ls/j/a')!.holders.map((x) => x.token)).toEqual([h.token]);
  });

  it('expires at the end of the grace period when nothing answers', async () => {
    const h = await holdLock('/ls/j/c');
    const events: string[] = [];
    for (const e of ['jeopardy', 'safe', 'expired'] as const) client.on(e, () => events.push(e));
    fake.pauseHeartbeats();
    const jeopardyAt = TTL_MS - MARGIN_MS;
    sched.advanceTo(jeopardyAt);
    expect(events).toEqual(['jeopardy']);
    const waiting = client.acquire('/ls/j/d', { waitMs: 0 });
    // The client keeps trying through the grace period: several fresh heartbeats reach the server.
    let beats = 0;
    fake.on('heartbeat', () => beats++);
    for (let t = jeopardyAt; t < jeopardyAt + GRACE_MS - 1; t += 500) {
      sched.advanceTo(t);
      await turn();
    }
    sched.advanceTo(jeopardyAt + GRACE_MS - 1);
    expect(beats).toBeGreaterThanOrEqual(5);
    expect(h.session.state).toBe('jeopardy');
    sched.advanceTo(jeopardyAt + GRACE_MS);
    expect(events).toEqual(['jeopardy', 'expired']);
    expect(h.lostBecause).toBe('expired');
    expect(h.held).toBe(false);
    await expect(waiting).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' });
    expect(await h.release()).toBe(false);
  });

  it('an expired answer ends the session at once, even while safe', async () => {
    const h = await holdLock('/ls/j/e');
    fake.expireSession(h.session.id);
    const expired = nextEvent(client, 'expired');
    sched.advanceTo(1_000);
    await expired;
    expect(h.session.state).toBe('expired');
    expect((h.signal.reason as LockLostError).reason).toBe('expired');
  });

  it('a grant that lands during jeopardy is born with an aborted signal', async () => {
    const h = await holdLock('/ls/j/f');
    fake.pauseHeartbeats();
    sched.advanceTo(TTL_MS - MARGIN_MS);
    expect(h.session.state).toBe('jeopardy');
    // Bypass the wait: hand a handle to the session as a late Acquire answer would.
    const { LockHandle } = await import('../src/lock-handle.js');
    const late = new LockHandle('/ls/j/g', 'exclusive', 99, h.session, async () => true);
    h.session.addHandle(late);
    expect((late.signal.reason as LockLostError).reason).toBe('jeopardy');
  });
});

describe('KeepAlive stream failover', () => {
  it('follows a leader hint to another node at once, resending the heartbeat that was in flight', async () => {
    const other = await fake.addPort();
    const h = await holdLock('/ls/j/hint');
    fake.pauseHeartbeats();
    const arrived = nextEvent(fake, 'heartbeat');
    sched.advanceTo(1_000);
    await arrived;
    const resent = nextEvent(ka, 'sent', (_id, address) => address === other);
    fake.breakKeepAlives('NOT_LEADER', other);
    await resent; // along the hint: no backoff, no time passed
    expect(sched.monoMs()).toBe(1_000);
    const answered = nextEvent(ka, 'answered');
    fake.resumeHeartbeats();
    await answered;
    expect(h.session.lease.deadlineMonoMs).toBe(1_000 + TTL_MS - MARGIN_MS);
    for (let beat = 2; beat <= 5; beat++) {
      const next = nextEvent(ka, 'answered');
      sched.advanceTo(beat * 1_000);
      await next;
    }
    expect(h.session.state).toBe('safe');
    expect(h.signal.aborted).toBe(false);
  });

  it('a stream that fails without a hint moves to the next endpoint after a backoff', async () => {
    const second = await fake.addPort();
    await client.close();
    client = makeClient([fake.address, second]);
    const h = await holdLock('/ls/j/rot');
    fake.pauseHeartbeats();
    const arrived = nextEvent(fake, 'heartbeat');
    sched.advanceTo(1_000);
    await arrived;
    const failed = nextEvent(ka, 'failed');
    fake.breakKeepAlives('NO_LEADER');
    await failed;
    fake.resumeHeartbeats();
    const sent = nextEvent(ka, 'sent', (_id, address) => address === second);
    const answered = nextEvent(ka, 'answered');
    sched.advance(40); // the backoff is at most backoffMaxMs
    await sent;
    await answered;
    expect(h.session.state).toBe('safe');
    expect(h.session.lease.deadlineMonoMs).toBeGreaterThan(1_000 + TTL_MS - MARGIN_MS);
  });
});
