/**
 * Goal: the early-expiry judgement of the Expiry promise ("a session with no
 * successful heartbeat for its TTL may be expired any time after that, never
 * before, by the leader's monotonic clock") bites, and is drift-aware: a
 * leader whose clock runs fast (faketime x2) may expire a session after TTL/2
 * of real time, and only the leaders that led in the session's last TTL can
 * excuse an early end; the client library's drift allowance is granted, no
 * more.
 * Method: crafted histories (a session with its last acknowledged heartbeat
 * sent at 1,000 ms, TTL 3,000 ms, its end seen by the client at a chosen
 * time) through buildLockHistories with a leader timeline (samples of who
 * led at what rate), as a chaos run records them; the drift allowance is
 * libs/client's leaseMarginMs for the TTL.
 */
import { describe, expect, it } from 'vitest';
import { CLIENT_DEFAULTS, leaseMarginMs } from '@fencer/client';
import type { History, Op } from '../src/history.js';
import { buildLockHistories, type LeaderSample, leaderTimelineClock, REAL_RATE_CLOCK } from '../src/check/lock-history.js';

const TTL_MS = 3_000;
const LAST_ACKED_SEND_MS = 1_000;
const DRIFT_MS = leaseMarginMs(TTL_MS, CLIENT_DEFAULTS.driftPpm, CLIENT_DEFAULTS.driftMarginMs);

/** Session A opened at 0, heartbeats acknowledged until one sent at 1,000 ms; the client learns it ended at `endSeenMs`. */
function historyEndingAt(endSeenMs: number): History {
  const ops: Op[] = [
    { p: 'w', id: 1, inv: 0, comp: 1, op: { f: 'open', ns: 't', ttl: TTL_MS }, outcome: 'ok', r: { f: 'open', s: 'A', ttl: TTL_MS } },
    {
      p: 'w',
      id: 2,
      inv: endSeenMs - 5,
      comp: endSeenMs,
      op: { f: 'acquire', s: 'A', name: '/ls/t/a', mode: 'X', wait: 0, req: 'a1' },
      outcome: 'fail',
      code: 'SESSION_NOT_FOUND',
    },
  ];
  return {
    ops,
    sessions: new Map([['A', { lastAckedSendMs: LAST_ACKED_SEND_MS, endSeenMs: Infinity, abandonedMs: Infinity }]]),
    watches: [],
    badLines: 0,
  };
}

/** Leader samples once a second from 0 to 10 s: n1 at the real rate, except n2 at `rate` over [fromMs, toMs]. */
function timeline(rate: number, fromMs: number, toMs: number): LeaderSample[] {
  const out: LeaderSample[] = [];
  for (let t = 0; t <= 10_000; t += 1_000) out.push(t >= fromMs && t <= toMs ? { t, leader: 'n2', rate } : { t, leader: 'n1', rate: 1 });
  return out;
}

function earlyEnds(endSeenMs: number, samples: readonly LeaderSample[]): number {
  return buildLockHistories(historyEndingAt(endSeenMs), leaderTimelineClock(samples)).earlyEnds.length;
}

describe('early-expiry checker (the Expiry promise, by the leader clock)', () => {
  it('at the real rate: an end seen before TTL less the allowed drift is early; one after it is not', () => {
    const bound = LAST_ACKED_SEND_MS + TTL_MS - DRIFT_MS;
    expect(DRIFT_MS).toBeGreaterThan(0);
    expect(DRIFT_MS).toBeLessThan(TTL_MS / 10);
    expect(earlyEnds(bound - 50, timeline(1, 0, 0))).toBe(1);
    expect(earlyEnds(bound + 50, timeline(1, 0, 0))).toBe(0);
    // The default clock (no timeline) judges the same way.
    expect(buildLockHistories(historyEndingAt(bound - 50), REAL_RATE_CLOCK).earlyEnds.length).toBe(1);
  });

  it('a leader at x2 in the session’s last TTL may expire it after TTL/2 of real time, not before', () => {
    const fast = timeline(2, 1_000, 3_000);
    const bound = LAST_ACKED_SEND_MS + TTL_MS / 2 - DRIFT_MS;
    expect(earlyEnds(bound + 50, fast)).toBe(0);
    expect(earlyEnds(bound - 50, fast)).toBe(1);
    // The same end with every leader at the real rate is early.
    expect(earlyEnds(bound + 50, timeline(1, 0, 0))).toBe(1);
  });

  it('a fast leader that led only long before the last heartbeat excuses nothing', () => {
    const fastBefore = [{ t: -5_000, leader: 'n2', rate: 2 }, ...timeline(1, 0, 0)];
    expect(earlyEnds(LAST_ACKED_SEND_MS + TTL_MS / 2 + 50, fastBefore)).toBe(1);
  });

  it('a slow leader (x0.5) never loosens the bound below the real-rate one', () => {
    const slow = timeline(0.5, 0, 10_000);
    expect(earlyEnds(LAST_ACKED_SEND_MS + TTL_MS - DRIFT_MS - 50, slow)).toBe(1);
    expect(earlyEnds(LAST_ACKED_SEND_MS + TTL_MS - DRIFT_MS + 50, slow)).toBe(0);
  });
});
