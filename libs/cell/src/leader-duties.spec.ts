/**
 * Goal: the leader proposes ExpireSession only after a full TTL without a
 * heartbeat, never before; waits and lock-delays end on time; a new leader
 * gives everything a fresh full period; failed proposals are retried.
 * Method: drive LeaderDuties with explicit monotonic times, and through
 * `applied` with a real state machine's results.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { RequestId, Revision, SessionId } from '@fencer/base';
import { DUTY_RETRY_MS, LeaderDuties } from './leader-duties.js';
import { type Command, LockStateMachine } from '@fencer/lock-fsm';

const s1 = SessionId('ns:1');
const s2 = SessionId('ns:2');

describe('LeaderDuties: session deadlines', () => {
  it('expires a session only after its TTL passed with no heartbeat', () => {
    const d = new LeaderDuties();
    d.becomeLeader(0, [{ sessionId: s1, ttlMs: 1000 }], [], []);
    expect(d.due(1000)).toEqual([]);
    expect(d.heartbeat(900, s1)).toBe(1000);
    expect(d.due(1800)).toEqual([]);
    expect(d.due(1900)).toEqual([]);
    expect(d.due(1901)).toEqual([{ kind: 'ExpireSession', sessionId: s1 }]);
  });

  it('retries an expiry that did not land, and stops once the session is gone', () => {
    const d = new LeaderDuties();
    d.becomeLeader(0, [{ sessionId: s1, ttlMs: 100 }], [], []);
    expect(d.due(101)).toHaveLength(1);
    expect(d.due(102)).toHaveLength(0);
    expect(d.due(101 + DUTY_RETRY_MS)).toHaveLength(1);
    d.sessionGone(s1);
    expect(d.due(10 * DUTY_RETRY_MS)).toHaveLength(0);
    expect(d.heartbeat(0, s1)).toBeUndefined();
  });

  it('a heartbeat arriving once the expiry is proposed gets no TTL, and the session is not yet called gone (found by the chaos harness, twice)', () => {
    // The ExpireSession entry is in flight: telling the client "alive, full TTL left" would let it act
    // on its locks for another TTL after they were released. Telling it "expired" (as this code did
    // until 2026-11-30) would be just as wrong the other way: the entry may be lost with this leader,
    // and the next leader gives the session a fresh TTL, so its locks stay held after the client was
    // told they were released. So: TTL 0, not expired; "expired" once the session is gone.
    const d = new LeaderDuties();
    d.becomeLeader(0, [{ sessionId: s1, ttlMs: 100 }], [], []);
    expect(d.due(101)).toEqual([{ kind: 'ExpireSession', sessionId: s1 }]);
    expect(d.heartbeat(110, s1)).toBe(0);
    // The expiry is still retried until it lands.
    expect(d.due(101 + DUTY_RETRY_MS)).toEqual([{ kind: 'ExpireSession', sessionId: s1 }]);
  });

  it('gives every session a fresh full TTL on becoming leader, whatever happened before', () => {
    const d = new LeaderDuties();
    d.becomeLeader(0, [{ sessionId: s1, ttlMs: 1000 }], [], []);
    d.stepDown();
    expect(d.due(5000)).toEqual([]);
    d.becomeLeader(
      5000,
      [
        { sessionId: s1, ttlMs: 1000 },
        { sessionId: s2, ttlMs: 3000 },
      ],
      [],
      [],
    );
    expect(d.due(5999)).toEqual([]);
    expect(d.due(6001).map((c) => c.kind === 'ExpireSession' && c.sessionId)).toEqual([s1]);
    expect(d.remainingMs(6001, s2)).toBe(1999);
  });

  it('does nothing as a follower', () => {
    const d = new LeaderDuties();
    d.sessionOpened(0, { sessionId: s1, ttlMs: 10 });
    expect(d.heartbeat(0, s1)).toBeUndefined();
    expect(d.due(1_000_000)).toEqual([]);
  });
});

describe('LeaderDuties: waits, lock-delays and applied commands', () => {
  it('cancels a wait when its wait time runs out, keeping the first deadline across retries', () => {
    const d = new LeaderDuties();
    d.becomeLeader(0, [], [], []);
    const w = { sessionId: s1, name: '/ls/ns/a', requestId: RequestId('r1'), waitMs: 500 };
    d.waiterQueued(100, w);
    d.waiterQueued(400, w);
    expect(d.due(599)).toEqual([]);
    expect(d.due(600)).toEqual([{ kind: 'CancelWait', sessionId: s1, name: '/ls/ns/a', requestId: 'r1', reason: 'timed-out' }]);
    d.waiterGone(s1, RequestId('r1'));
    expect(d.due(600 + DUTY_RETRY_MS)).toEqual([]);
  });

  it('lifts a lock-delay after its delay', () => {
    const d = new LeaderDuties();
    d.becomeLeader(0, [], [], [{ name: '/ls/ns/a', delayMs: 300, delayRevision: Revision(7) }]);
    expect(d.due(299)).toEqual([]);
    expect(d.due(300)).toEqual([{ kind: 'LiftLockDelay', name: '/ls/ns/a', delayRevision: 7 }]);
    d.lockDelayLifted('/ls/ns/a');
    expect(d.due(300 + DUTY_RETRY_MS)).toEqual([]);
  });

  it('follows applied commands: a queued wait is cancelled at its deadline, forgotten once granted; a session is forgotten once closed', () => {
    const fsm = new LockStateMachine({ autoClaim: true });
    const d = new LeaderDuties();
    d.becomeLeader(0, fsm.sessions(), fsm.waiters(), fsm.delayedLocks());
    const [a, b] = [SessionId('alpha:a'), SessionId('alpha:b')];
    const name = '/ls/alpha/l0';
    let index = 0;
    const step = (c: Command) => {
      const r = fsm.apply(++index, c);
      d.applied(100, c, r.outcome, r.events);
      return r;
    };
    const acquire = (sessionId: SessionId, requestId: string): Command => ({
      kind: 'Acquire',
      sessionId,
      name,
      mode: 'EXCLUSIVE',
      requestId: RequestId(requestId),
      waitMs: 1_000,
      lockDelayMs: 0,
      tryLock: false,
    });
    step({ kind: 'OpenSession', sessionId: a, clientId: 'a', namespace: 'alpha' as never, ttlMs: 3_000 });
    step({ kind: 'OpenSession', sessionId: b, clientId: 'b', namespace: 'alpha' as never, ttlMs: 3_000 });
    const granted = step(acquire(a, 'r1'));
    step(acquire(b, 'r2'));
    expect(d.due(1_099)).toEqual([]);
    expect(d.due(1_100)).toEqual([{ kind: 'CancelWait', sessionId: b, name, requestId: 'r2', reason: 'timed-out' }]);
    step({ kind: 'Release', sessionId: a, name, token: Revision(granted.revision) }); // b is granted: its wait is gone.
    expect(d.due(1_100 + DUTY_RETRY_MS)).toEqual([]);
    step({ kind: 'CloseSession', sessionId: a });
    expect(d.heartbeat(200, a)).toBeUndefined();
    expect(d.heartbeat(200, b)).toBe(3_000);
  });
});

describe('LeaderDuties against a model', () => {
  it('expires exactly the sessions a scan of every deadline would, whatever the heartbeats (deadline heap against a model)', () => {
    type Op = { kind: 'open'; id: number; ttl: number } | { kind: 'beat'; id: number } | { kind: 'gone'; id: number } | { kind: 'lead' };
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ kind: fc.constant('open' as const), id: fc.integer({ min: 0, max: 7 }), ttl: fc.integer({ min: 1, max: 60 }) }),
      fc.record({ kind: fc.constant('beat' as const), id: fc.integer({ min: 0, max: 7 }) }),
      fc.record({ kind: fc.constant('gone' as const), id: fc.integer({ min: 0, max: 7 }) }),
      fc.constant({ kind: 'lead' as const }),
    );
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 40 }), op), { maxLength: 120 }), (steps) => {
        const d = new LeaderDuties();
        d.becomeLeader(0, [], [], []);
        // The model: every session's deadline and retry time, scanned in full at each step.
        const model = new Map<string, { ttl: number; deadline: number; retryAt: number }>();
        let now = 0;
        for (const [dt, o] of steps) {
          now += dt;
          const id = SessionId(`ns:${'id' in o ? o.id : 0}`);
          if (o.kind === 'open') {
            d.sessionOpened(now, { sessionId: id, ttlMs: o.ttl });
            model.set(id, { ttl: o.ttl, deadline: now + o.ttl, retryAt: 0 });
          } else if (o.kind === 'beat') {
            const m = model.get(id);
            const expected = m === undefined ? undefined : m.retryAt > 0 ? 0 : m.ttl;
            if (m !== undefined && m.retryAt === 0) m.deadline = now + m.ttl;
            expect(d.heartbeat(now, id)).toBe(expected);
          } else if (o.kind === 'gone') {
            d.sessionGone(id);
            model.delete(id);
          } else {
            const seeds = [...model].map(([sessionId, m]) => ({ sessionId: SessionId(sessionId), ttlMs: m.ttl }));
            d.becomeLeader(now, seeds, [], []);
            for (const m of model.values()) Object.assign(m, { deadline: now + m.ttl, retryAt: 0 });
          }
          const want: string[] = [];
          for (const [sessionId, m] of model) {
            if (now > m.deadline && now >= m.retryAt) {
              m.retryAt = now + DUTY_RETRY_MS;
              want.push(sessionId);
            }
          }
          const got = d.due(now).map((c) => (c.kind === 'ExpireSession' ? c.sessionId : `${c.kind}?`));
          expect([...got].sort()).toEqual(want.sort());
        }
      }),
      { numRuns: 300 },
    );
  });
});
