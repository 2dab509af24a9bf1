/**
 * Goal: a follower's heartbeat relay sends the heartbeats that arrive
 * together as one batch, never more than one batch at a time to one leader
 * (the next leaves when the previous returns), a full batch at once; splits
 * the leader's answer back to each caller (a session asked twice is sent
 * once); fans an error, a timeout or the lack of a leader out to every
 * caller of the batch; drops a caller that gives up without touching the
 * others; and sends a pending batch to the new leader after a change.
 * Method: a fake timer list advanced by hand and a fake route whose sends
 * are recorded and answered by the test.
 */
import { describe, expect, it } from 'vitest';
import { FencerError, type Result, err, ok } from '@fencer/base';
import type { Cancel } from '@fencer/group';
import { HeartbeatRelay, type RelayRoute } from './heartbeat-relay.js';
import type { HeartbeatAnswer } from './wire.js';

interface Sent {
  readonly to: string;
  readonly ids: readonly string[];
  readonly done: (r: Result<HeartbeatAnswer[], FencerError>) => void;
  cancelled: boolean;
}

class Fake {
  nowMs = 0;
  private timers: { atMs: number; run: () => void; live: boolean }[] = [];
  readonly sent: Sent[] = [];
  leader: string | null = 'n1';

  relay(opts: { windowMs?: number; timeoutMs?: number; batchSessionsMax?: number; waitingMax?: number } = {}): HeartbeatRelay {
    return new HeartbeatRelay({
      after: (ms, run): Cancel => {
        const t = { atMs: this.nowMs + ms, run, live: true };
        this.timers.push(t);
        return () => (t.live = false);
      },
      route: () => this.route(),
      windowMs: opts.windowMs ?? 1,
      timeoutMs: opts.timeoutMs ?? 10_000,
      batchSessionsMax: opts.batchSessionsMax ?? 100,
      waitingMax: opts.waitingMax ?? 1_000,
    });
  }

  private route(): RelayRoute {
    const to = this.leader;
    if (to === null) throw new FencerError('NO_LEADER', 'the cell has no leader right now');
    return {
      key: to,
      address: `${to}:7001`,
      send: (ids, done) => {
        const s: Sent = { to, ids: [...ids], done, cancelled: false };
        this.sent.push(s);
        return () => (s.cancelled = true);
      },
    };
  }

  advance(ms: number): void {
    const until = this.nowMs + ms;
    for (;;) {
      const next = this.timers.filter((t) => t.live && t.atMs <= until).sort((a, b) => a.atMs - b.atMs)[0];
      if (!next) break;
      this.nowMs = next.atMs;
      next.live = false;
      next.run();
    }
    this.nowMs = until;
  }

  /** The leader's answer to a batch: every session alive with a TTL derived from its name. */
  static answerAll(s: Sent): void {
    s.done(ok(s.ids.map((id) => ({ sessionId: id, ttlMsRemaining: 1_000 + id.length, expired: id.startsWith('gone') }))));
  }
}

function caller(): { done: (r: Result<HeartbeatAnswer[], FencerError>) => void; got: Result<HeartbeatAnswer[], FencerError>[] } {
  const got: Result<HeartbeatAnswer[], FencerError>[] = [];
  return { done: (r) => got.push(r), got };
}

const ids = (r: Result<HeartbeatAnswer[], FencerError> | undefined): string[] | string =>
  r === undefined ? 'unanswered' : r.ok ? r.value.map((a) => a.sessionId) : r.error.code;

describe('HeartbeatRelay: batching', () => {
  it('sends the heartbeats of one window as one batch and splits the answer back to each caller', () => {
    const f = new Fake();
    const relay = f.relay({ windowMs: 2 });
    const callers = Array.from({ length: 50 }, () => caller());
    callers.forEach((c, i) => relay.relay([`s${i}`], c.done));
    expect(f.sent).toHaveLength(0);
    f.advance(1);
    expect(f.sent).toHaveLength(0);
    f.advance(1);
    expect(f.sent).toHaveLength(1);
    expect(f.sent[0]!.ids).toEqual(callers.map((_, i) => `s${i}`));
    Fake.answerAll(f.sent[0]!);
    callers.forEach((c, i) =>
      expect(c.got).toEqual([ok([{ sessionId: `s${i}`, ttlMsRemaining: 1_000 + `s${i}`.length, expired: false }])]),
    );
    expect(relay.waiting).toBe(0);
    expect(relay.batchesInFlight).toBe(0);
  });

  it('sends a session asked for twice once, and answers every caller with its own list, in order', () => {
    const f = new Fake();
    const relay = f.relay();
    const a = caller();
    const b = caller();
    const c = caller();
    relay.relay(['x', 'gone-y'], a.done);
    relay.relay(['x'], b.done);
    relay.relay(['z', 'x', 'z'], c.done);
    f.advance(1);
    expect(f.sent.map((s) => s.ids)).toEqual([['x', 'gone-y', 'z']]);
    Fake.answerAll(f.sent[0]!);
    expect(ids(a.got[0])).toEqual(['x', 'gone-y']);
    expect(a.got[0]!.ok && a.got[0]!.value[1]!.expired).toBe(true);
    expect(ids(b.got[0])).toEqual(['x']);
    expect(ids(c.got[0])).toEqual(['z', 'x', 'z']);
  });

  it('keeps one batch at a time at a leader: the next leaves as soon as the previous returns, with all that arrived meanwhile', () => {
    const f = new Fake();
    const relay = f.relay({ windowMs: 1 });
    const first = caller();
    relay.relay(['a'], first.done);
    f.advance(1);
    expect(f.sent).toHaveLength(1);
    const later = [caller(), caller(), caller()];
    later.forEach((c, i) => relay.relay([`b${i}`], c.done));
    f.advance(50);
    // Still one call at the leader: the others wait for it, however long the window has passed.
    expect(f.sent).toHaveLength(1);
    Fake.answerAll(f.sent[0]!);
    expect(ids(first.got[0])).toEqual(['a']);
    // Sent at once on the return, without another window.
    expect(f.sent.map((s) => s.ids)).toEqual([['a'], ['b0', 'b1', 'b2']]);
    Fake.answerAll(f.sent[1]!);
    expect(later.map((c) => ids(c.got[0]))).toEqual([['b0'], ['b1'], ['b2']]);
  });

  it('sends a batch at once when it reaches the session limit, and never puts more in one batch', () => {
    const f = new Fake();
    const relay = f.relay({ batchSessionsMax: 3 });
    const callers = Array.from({ length: 7 }, () => caller());
    callers.forEach((c, i) => relay.relay([`s${i}`], c.done));
    // Two full batches left without waiting for the window or for each other; the seventh waits.
    expect(f.sent.map((s) => s.ids)).toEqual([
      ['s0', 's1', 's2'],
      ['s3', 's4', 's5'],
    ]);
    const big = caller();
    // A caller whose sessions would overflow the pending batch sends the pending batch first.
    relay.relay(['t0', 't1', 't2'], big.done);
    expect(f.sent.map((s) => s.ids)).toEqual([['s0', 's1', 's2'], ['s3', 's4', 's5'], ['s6'], ['t0', 't1', 't2']]);
    for (const s of f.sent) Fake.answerAll(s);
    expect(callers.map((c) => ids(c.got[0]))).toEqual(callers.map((_, i) => [`s${i}`]));
    expect(ids(big.got[0])).toEqual(['t0', 't1', 't2']);
  });
});

describe('HeartbeatRelay: errors, timeouts and a caller giving up before the batch leaves', () => {
  it("answers every caller of a batch with the leader's error, and the next batch still goes", () => {
    const f = new Fake();
    const relay = f.relay();
    const a = caller();
    const b = caller();
    relay.relay(['a'], a.done);
    relay.relay(['b'], b.done);
    f.advance(1);
    const later = caller();
    relay.relay(['c'], later.done);
    const notLeader = new FencerError('NOT_LEADER', 'this replica is not the leader', 'n2:7001');
    f.sent[0]!.done(err(notLeader));
    expect(a.got).toEqual([err(notLeader)]);
    expect(b.got).toEqual([err(notLeader)]);
    expect(f.sent.map((s) => s.ids)).toEqual([['a', 'b'], ['c']]);
    Fake.answerAll(f.sent[1]!);
    expect(ids(later.got[0])).toEqual(['c']);
  });

  it('times a silent leader out with NO_LEADER for every caller (hinting at it), cancels the call, and sends the next batch', () => {
    const f = new Fake();
    const relay = f.relay({ timeoutMs: 10_000 });
    const a = caller();
    const b = caller();
    relay.relay(['a'], a.done);
    relay.relay(['b'], b.done);
    f.advance(1);
    const later = caller();
    relay.relay(['c'], later.done);
    // Sent at 1 ms: the timeout falls at 10,001 ms.
    f.advance(9_999);
    expect(a.got).toEqual([]);
    f.advance(1);
    for (const c of [a, b]) {
      expect(c.got).toHaveLength(1);
      const r = c.got[0]!;
      expect(!r.ok && [r.error.code, r.error.leaderHint]).toEqual(['NO_LEADER', 'n1:7001']);
    }
    expect(f.sent[0]!.cancelled).toBe(true);
    expect(f.sent.map((s) => s.ids)).toEqual([['a', 'b'], ['c']]);
    // A late answer to the timed-out call reaches nobody.
    Fake.answerAll(f.sent[0]!);
    expect(a.got).toHaveLength(1);
    expect(later.got).toEqual([]);
  });

  it('drops a caller that gives up: its session leaves the pending batch, the others are answered', () => {
    const f = new Fake();
    const relay = f.relay();
    const a = caller();
    const b = caller();
    const c = caller();
    const cancelA = relay.relay(['a'], a.done);
    relay.relay(['b', 'shared'], b.done);
    const cancelC = relay.relay(['shared'], c.done);
    cancelA();
    cancelC();
    f.advance(1);
    // 'shared' stays: b still asks for it.
    expect(f.sent.map((s) => s.ids)).toEqual([['b', 'shared']]);
    Fake.answerAll(f.sent[0]!);
    expect(a.got).toEqual([]);
    expect(c.got).toEqual([]);
    expect(ids(b.got[0])).toEqual(['b', 'shared']);
    expect(relay.waiting).toBe(0);
  });
});

describe('HeartbeatRelay: callers giving up in flight, and leader changes', () => {
  it('a caller that gives up in flight is not answered and does not cancel the batch; when all give up the call is cancelled', () => {
    const f = new Fake();
    const relay = f.relay();
    const a = caller();
    const b = caller();
    const cancelA = relay.relay(['a'], a.done);
    relay.relay(['b'], b.done);
    f.advance(1);
    cancelA();
    expect(f.sent[0]!.cancelled).toBe(false);
    Fake.answerAll(f.sent[0]!);
    expect(a.got).toEqual([]);
    expect(ids(b.got[0])).toEqual(['b']);

    const c = caller();
    const cancelC = relay.relay(['c'], c.done);
    f.advance(1);
    const d = caller();
    relay.relay(['d'], d.done);
    expect(f.sent).toHaveLength(2);
    cancelC();
    // Nobody waits on the second call any more: it is cancelled, and the pending batch leaves at once.
    expect(f.sent[1]!.cancelled).toBe(true);
    expect(f.sent.map((s) => s.ids)).toEqual([['a', 'b'], ['c'], ['d']]);
    expect(c.got).toEqual([]);
  });

  it('a batch with every caller gone before it leaves is never sent', () => {
    const f = new Fake();
    const relay = f.relay();
    const a = caller();
    relay.relay(['a'], a.done)();
    f.advance(10);
    expect(f.sent).toEqual([]);
    expect(relay.waiting).toBe(0);
  });

  it('after a leader change, sends the pending batch to the new leader without waiting for the call at the old one', () => {
    const f = new Fake();
    const relay = f.relay();
    const a = caller();
    relay.relay(['a'], a.done);
    f.advance(1);
    expect(f.sent.map((s) => s.to)).toEqual(['n1']);
    f.leader = 'n2';
    const b = caller();
    relay.relay(['b'], b.done);
    f.advance(1);
    expect(f.sent.map((s) => [s.to, s.ids])).toEqual([
      ['n1', ['a']],
      ['n2', ['b']],
    ]);
    Fake.answerAll(f.sent[1]!);
    expect(ids(b.got[0])).toEqual(['b']);
    const moved = new FencerError('NOT_LEADER', 'this replica is not the leader', 'n2:7001');
    f.sent[0]!.done(err(moved));
    expect(a.got).toEqual([err(moved)]);
  });
});

describe('HeartbeatRelay: no leader, and limits', () => {
  it('answers NO_LEADER to every caller of a batch that has no leader to go to when it leaves', () => {
    const f = new Fake();
    const relay = f.relay();
    const a = caller();
    const b = caller();
    relay.relay(['a'], a.done);
    relay.relay(['b'], b.done);
    f.leader = null;
    f.advance(1);
    expect(f.sent).toEqual([]);
    expect([ids(a.got[0]), ids(b.got[0])]).toEqual(['NO_LEADER', 'NO_LEADER']);
    expect(relay.waiting).toBe(0);
  });

  it('refuses a caller beyond its waiting limit with TOO_MANY_REQUESTS', () => {
    const f = new Fake();
    const relay = f.relay({ waitingMax: 2 });
    const callers = [caller(), caller(), caller()];
    callers.forEach((c, i) => relay.relay([`s${i}`], c.done));
    expect(ids(callers[2]!.got[0])).toBe('TOO_MANY_REQUESTS');
    f.advance(1);
    expect(f.sent.map((s) => s.ids)).toEqual([['s0', 's1']]);
  });

  it("refuses an answer that lacks a caller's session instead of inventing one", () => {
    const f = new Fake();
    const relay = f.relay();
    const a = caller();
    const b = caller();
    relay.relay(['a'], a.done);
    relay.relay(['b'], b.done);
    f.advance(1);
    f.sent[0]!.done(ok([{ sessionId: 'a', ttlMsRemaining: 900, expired: false }]));
    expect(ids(a.got[0])).toEqual(['a']);
    expect(ids(b.got[0])).toBe('INTERNAL');
  });
});
