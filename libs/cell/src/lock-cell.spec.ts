/**
 * Goal: the lock cell's request API keeps its promises wherever a call
 * lands: a follower forwards to the leader; a queued Acquire with a wait
 * longer than any Node timer is held until the holder releases; a leader cut
 * off from its followers acknowledges no heartbeat (the confirmation round
 * fails), unless the test-only bug switch skips the round; a Watch from now
 * on a follower that has not yet applied a grant still starts with it.
 * Method: three LockCells over the production log store on in-memory disks,
 * a manual clock, fake timers that record every delay they are given, and a
 * forwarder and network that deliver when the test pumps them.
 */
import { describe, expect, it } from 'vitest';
import type { FencerError } from '@fencer/base';
import { TIMER_DELAY_MS_MAX } from '@fencer/group';
import { Harness, answer, openSession } from '../test/harness.js';
import type { HubEvent } from './watch-hub.js';
import type { CellMethod } from './wire.js';
import { WIRE_ACQUIRE_STATUS, WIRE_MODE } from './wire.js';

const thirtyDaysMs = 30 * 24 * 3600 * 1000;

describe('LockCell request API: reads and held Acquires', () => {
  it('a managed cell answers reads for a namespace it does not own with NAMESPACE_NOT_HERE, never a free lock', () => {
    const h = new Harness({}, false);
    h.elect('c1');
    const reads: [string, CellMethod, object][] = [
      ['getLock', 'getLock', { name: '/ls/elsewhere/x' }],
      ['checkToken', 'checkToken', { name: '/ls/elsewhere/x', token: 5 }],
      ['listLocks', 'listLocks', { prefix: '/ls/elsewhere/', limit: 0, pageToken: '' }],
    ];
    for (const [what, method, request] of reads) {
      const a = answer<unknown>();
      h.cell('c2').call(method, request as never, { forwarded: false }, a.done);
      h.pump();
      const r = a.got[0]!;
      expect(r.ok, what).toBe(false);
      expect(!r.ok && r.error.code, what).toBe('NAMESPACE_NOT_HERE');
    }
    const started: (FencerError | null)[] = [];
    h.cell('c1').watch({ name: '/ls/elsewhere/', prefix: true, sinceRevision: 0 }, { write: () => 0, end: () => {} }, (e) =>
      started.push(e),
    );
    h.pump();
    expect(started.map((e) => e?.code)).toEqual(['NAMESPACE_NOT_HERE']);
    // A cell without a control plane owns every namespace: the same read is a free lock.
    const open = new Harness();
    open.elect('c1');
    const free = answer<{ lock?: { holders: unknown[] } }>();
    open.cell('c2').call('getLock', { name: '/ls/elsewhere/x' }, { forwarded: false }, free.done);
    open.pump();
    expect(free.got[0]!.ok && free.got[0]!.value.lock?.holders).toEqual([]);
  });

  it("holds a 30-day Acquire sent to a follower until the holder releases, with no timer above Node's limit", () => {
    const h = new Harness();
    h.elect('c1');
    const a = openSession(h, 'c2', 'ns');
    const b = openSession(h, 'c3', 'ns');
    const first = answer<{ status: number; token: number }>();
    h.cell('c2').call(
      'acquire',
      { sessionId: a, name: '/ls/ns/x', mode: WIRE_MODE.EXCLUSIVE, waitMs: 0, requestId: 'a1', lockDelayMs: 0 },
      { forwarded: false },
      first.done,
    );
    h.pump();
    const held = first.got[0]!;
    expect(held.ok && held.value.status).toBe(WIRE_ACQUIRE_STATUS.GRANTED);
    const waiting = answer<{ status: number; token: number }>();
    h.cell('c3').call(
      'acquire',
      { sessionId: b, name: '/ls/ns/x', mode: WIRE_MODE.EXCLUSIVE, waitMs: thirtyDaysMs, requestId: 'b1', lockDelayMs: 0 },
      { forwarded: false },
      waiting.done,
    );
    h.pump();
    // Keep both sessions alive while time passes.
    const beat = (): void => void h.cell('c1').heartbeat([a, b], { forwarded: false }, () => {});
    for (let i = 0; i < 5; i++) {
      beat();
      h.advance(2_000);
    }
    expect(waiting.got).toEqual([]);
    expect(
      h
        .cell('c1')
        .fsm.getLock('/ls/ns/x')
        .waiters.map((w) => w.sessionId),
    ).toEqual([b]);
    const released = answer<{ ok: boolean }>();
    h.cell('c2').call(
      'release',
      { sessionId: a, name: '/ls/ns/x', token: held.ok ? held.value.token : 0 },
      { forwarded: false },
      released.done,
    );
    h.pump();
    expect(waiting.got).toHaveLength(1);
    const granted = waiting.got[0]!;
    expect(granted.ok && granted.value.status).toBe(WIRE_ACQUIRE_STATUS.GRANTED);
    expect(granted.ok && held.ok && granted.value.token > held.value.token).toBe(true);
    expect(Math.max(...h.delays)).toBeLessThanOrEqual(TIMER_DELAY_MS_MAX);
  });
});

describe('LockCell request API: heartbeats and Watch', () => {
  it.each([
    [false, 'refuses'],
    [true, 'acknowledges (the planted bug)'],
  ] as const)('a leader cut off from its followers, heartbeatWithoutConfirmation=%s: %s the heartbeat', (bug, _what) => {
    const h = new Harness(bug ? { heartbeatWithoutConfirmation: true } : {});
    h.elect('c1');
    const a = openSession(h, 'c1', 'ns');
    h.isolated.add('c1');
    const got = answer<{ ttlMsRemaining: number }[]>();
    h.cell('c1').heartbeat([a], { forwarded: false }, got.done);
    h.advance(3_000);
    const acked = got.got.some((r) => r.ok && r.value.some((x) => x.ttlMsRemaining > 0));
    expect(acked).toBe(bug);
  });

  it('a Watch from now on a follower that has not applied a grant yet starts with it', () => {
    const h = new Harness();
    h.elect('c1');
    const a = openSession(h, 'c1', 'ns');
    h.advance(200);
    // The follower hears of nothing: the grant commits on c1 and c3 only.
    h.isolated.add('c2');
    const g = answer<{ status: number }>();
    h.cell('c1').call(
      'acquire',
      { sessionId: a, name: '/ls/ns/w', mode: WIRE_MODE.EXCLUSIVE, waitMs: 0, requestId: 'w1', lockDelayMs: 0 },
      { forwarded: false },
      g.done,
    );
    h.pump();
    expect(g.got[0]!.ok).toBe(true);
    expect(h.cell('c2').fsm.getLock('/ls/ns/w').holders).toEqual([]);
    h.isolated.delete('c2');
    const events: HubEvent[] = [];
    const started: (FencerError | null)[] = [];
    h.cell('c2').watch({ name: '/ls/ns/', prefix: true, sinceRevision: 0 }, { write: (e) => (events.push(e), 0), end: () => {} }, (e) =>
      started.push(e),
    );
    h.pump();
    h.advance(500);
    expect(started).toEqual([null]);
    expect(events[0]).toMatchObject({ type: 'snapshot', lock: { name: '/ls/ns/w' } });
  });
  it("relays a follower's heartbeats of one window as one HeartbeatBatch, and answers each caller from the leader's answer", () => {
    const h = new Harness();
    h.elect('c1');
    const sessions = [openSession(h, 'c1', 'ns'), openSession(h, 'c1', 'ns'), openSession(h, 'c1', 'ns')];
    const unknown = `${sessions[0]!.slice(0, sessions[0]!.lastIndexOf('/') + 1)}nope`;
    h.advance(200);
    const callers = [...sessions, sessions[0]!, unknown].map((id) => {
      const a = answer<{ sessionId: string; ttlMsRemaining: number; expired: boolean }[]>();
      h.cell('c2').heartbeat([id], { forwarded: false }, a.done);
      return { id, a };
    });
    h.pump();
    expect(h.relayed).toEqual([]);
    h.advance(100);
    expect(h.relayed).toEqual([{ from: 'c2', to: 'c1', ids: [...sessions, unknown] }]);
    for (const { id, a } of callers) {
      expect(a.got).toHaveLength(1);
      const r = a.got[0]!;
      expect(r.ok && r.value.map((x) => x.sessionId)).toEqual([id]);
      const alive = id !== unknown;
      expect(r.ok && r.value[0]!.ttlMsRemaining > 0).toBe(alive);
      expect(r.ok && r.value[0]!.expired).toBe(!alive);
    }
  });
});

describe('LockCell request API: relayed heartbeats', () => {
  it('answers a relayed batch that reaches a follower NOT_LEADER with a hint, never relaying it again', () => {
    const h = new Harness();
    h.elect('c1');
    const a = openSession(h, 'c1', 'ns');
    const got = answer<unknown[]>();
    h.cell('c2').heartbeat([a], { forwarded: true }, got.done);
    h.advance(100);
    const r = got.got[0]!;
    expect(!r.ok && [r.error.code, r.error.leaderHint]).toEqual(['NOT_LEADER', 'c1:7001']);
    expect(h.relayed).toEqual([]);
  });

  it('after a leader change, a follower relays to the new leader while its batch to the old one is unanswered, which then fails NO_LEADER', () => {
    const h = new Harness();
    h.elect('c1');
    const a = openSession(h, 'c1', 'ns');
    h.advance(200);
    h.isolated.add('c1');
    const lost = answer<unknown[]>();
    h.cell('c2').heartbeat([a], { forwarded: false }, lost.done);
    h.advance(100);
    expect(h.relayed.map((b) => [b.from, b.to])).toEqual([['c2', 'c1']]);
    const relayedAtMs = h.clock.monoMs();
    // c1 cannot hear anyone: c3 is elected (the harness's seeded election timers pick it).
    for (let i = 0; i < 50 && !h.cell('c3').isLeader; i++) h.advance(100);
    expect(h.cell('c3').isLeader).toBe(true);
    expect(h.cell('c2').core.leader).toBe('c3');
    const fresh = answer<{ ttlMsRemaining: number }[]>();
    h.cell('c2').heartbeat([a], { forwarded: false }, fresh.done);
    h.advance(100);
    expect(h.relayed.map((b) => [b.from, b.to])).toEqual([
      ['c2', 'c1'],
      ['c2', 'c3'],
    ]);
    expect(fresh.got[0]!.ok && fresh.got[0]!.value[0]!.ttlMsRemaining > 0).toBe(true);
    expect(lost.got).toEqual([]);
    h.advance(relayedAtMs + 10_000 - h.clock.monoMs());
    const r = lost.got[0]!;
    expect(!r.ok && [r.error.code, r.error.leaderHint]).toEqual(['NO_LEADER', 'c1:7001']);
  });
});
