/**
 * Goal: the heartbeat-promise checker flags a session that other clients
 * saw end before the promise of its last acknowledged heartbeat ran out
 * (what a deposed leader that acknowledges heartbeats without confirming
 * leadership causes), and nothing else: the promise runs from the send
 * time, TTL by the fastest replica clock in the span, less the client
 * library's drift allowance; a release or close invoked before the grant
 * excuses it; grants that do not conflict, or that came before the hold,
 * are no evidence; a client under faketime is not judged.
 * Method: crafted histories. Session A (w1, TTL 3,000 ms) holds /ls/t/a
 * exclusively with token 5 and has a heartbeat sent at 1,000 ms answered
 * with ttl_ms_remaining 3,000; session B (w2) receives a grant at a chosen
 * time, either of A's lock or of another name after A's ExpireSession
 * (revision 12) in the final log. Ends 50 ms either side of the bound.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLIENT_DEFAULTS, leaseMarginMs } from '@fencer/client';
import { type History, type Mode, type Op, loadHistory } from '../src/history.js';
import { checkExpiryPromises } from '../src/check/expiry-promise.js';
import { leaderTimelineClock, REAL_RATE_CLOCK } from '../src/check/lock-history.js';

const TTL_MS = 3_000;
const SENT_MS = 1_000;
const DRIFT_MS = leaseMarginMs(TTL_MS, CLIENT_DEFAULTS.driftPpm, CLIENT_DEFAULTS.driftMarginMs);
/** The promise of A's heartbeat at the real rate. */
const BOUND_MS = SENT_MS + TTL_MS - DRIFT_MS;
const EXPIRED_AT = new Map([['A', 12]]);
const NO_LOG = new Map<string, number>();

let nextId = 100;
const open = (p: string, s: string, at: number): Op => ({
  p,
  id: nextId++,
  inv: at,
  comp: at + 1,
  op: { f: 'open', ns: 't', ttl: TTL_MS },
  outcome: 'ok',
  r: { f: 'open', s, ttl: TTL_MS },
});
const grant = (p: string, s: string, name: string, mode: Mode, token: number, comp: number): Op => ({
  p,
  id: nextId++,
  inv: comp - 10,
  comp,
  op: { f: 'acquire', s, name, mode, wait: 1_000, req: `r${nextId}` },
  outcome: 'ok',
  r: { f: 'acquire', status: 'GRANTED', token, rev: token },
});
const release = (s: string, name: string, token: number, inv: number): Op => ({
  p: 'w1',
  id: nextId++,
  inv,
  comp: Infinity,
  op: { f: 'release', s, name, token },
  outcome: 'unk',
  code: 'DEADLINE_EXCEEDED',
});
const close = (s: string, inv: number): Op => ({
  p: 'w1',
  id: nextId++,
  inv,
  comp: Infinity,
  op: { f: 'close', s },
  outcome: 'unk',
  code: 'DEADLINE_EXCEEDED',
});

/** A holds /ls/t/a (token 5, `heldMode`); then `more` (B's grants and A's releases or closes). */
function history(more: Op[], heldMode: Mode = 'X'): History {
  const ops = [open('w1', 'A', 0), open('w2', 'B', 0), grant('w1', 'A', '/ls/t/a', heldMode, 5, 100), ...more].sort(
    (a, b) => a.inv - b.inv,
  );
  const promise = { sentMs: SENT_MS, ttlMs: TTL_MS };
  return {
    ops,
    sessions: new Map([
      ['A', { lastAckedSendMs: SENT_MS, endSeenMs: Infinity, abandonedMs: Infinity, lastPromise: promise }],
      ['B', { lastAckedSendMs: -Infinity, endSeenMs: Infinity, abandonedMs: Infinity }],
    ]),
    watches: [],
    badLines: 0,
  };
}

function flagged(h: History, expiredAt = NO_LOG, clock = REAL_RATE_CLOCK, exclude: string[] = []): number {
  return checkExpiryPromises(h, expiredAt, clock, new Set(exclude)).violationCount;
}

describe('heartbeat promises against other clients’ grants', () => {
  it('a conflicting grant of a held lock received before the promise ran out is flagged; one after it is not', () => {
    expect(DRIFT_MS).toBeGreaterThan(0);
    const early = history([grant('w2', 'B', '/ls/t/a', 'X', 20, BOUND_MS - 50)]);
    const r = checkExpiryPromises(early, NO_LOG, REAL_RATE_CLOCK);
    expect(r).toMatchObject({ promises: 1, judged: 1, violationCount: 1 });
    expect(r.slackMsMin).toBeCloseTo(-50, 6);
    expect(r.violations[0]).toContain('session A (w1)');
    expect(r.violations[0]).toContain('over its hold (token 5)');
    expect(flagged(history([grant('w2', 'B', '/ls/t/a', 'X', 20, BOUND_MS + 50)]))).toBe(0);
  });

  it('a release of the lock or a close invoked before the grant excuses it; one invoked after it does not', () => {
    const g = grant('w2', 'B', '/ls/t/a', 'X', 20, BOUND_MS - 50);
    expect(flagged(history([g, release('A', '/ls/t/a', 5, BOUND_MS - 60)]))).toBe(0);
    expect(flagged(history([g, close('A', BOUND_MS - 60)]))).toBe(0);
    expect(flagged(history([g, release('A', '/ls/t/a', 5, BOUND_MS - 40)]))).toBe(1);
    expect(flagged(history([g, close('A', BOUND_MS - 40)]))).toBe(1);
    // A release of another name excuses nothing.
    expect(flagged(history([g, release('A', '/ls/t/b', 7, BOUND_MS - 60)]))).toBe(1);
  });

  it('only a conflicting grant after the hold counts: shared over shared, or a lower token, is no evidence', () => {
    expect(flagged(history([grant('w2', 'B', '/ls/t/a', 'S', 20, BOUND_MS - 50)], 'S'))).toBe(0);
    expect(flagged(history([grant('w2', 'B', '/ls/t/a', 'X', 20, BOUND_MS - 50)], 'S'))).toBe(1);
    expect(flagged(history([grant('w2', 'B', '/ls/t/a', 'S', 20, BOUND_MS - 50)], 'X'))).toBe(1);
    expect(flagged(history([grant('w2', 'B', '/ls/t/a', 'X', 4, BOUND_MS - 50)]))).toBe(0);
    // A's own later grant of the name is no evidence either.
    expect(flagged(history([grant('w1', 'A', '/ls/t/a', 'X', 20, BOUND_MS - 50)]))).toBe(0);
  });

  it('with the final log: any grant above A’s ExpireSession received before the promise ran out is flagged', () => {
    const other = (token: number, comp: number): History => history([grant('w2', 'B', '/ls/t/b', 'X', token, comp)]);
    const r = checkExpiryPromises(other(13, BOUND_MS - 50), EXPIRED_AT, REAL_RATE_CLOCK);
    expect(r.violationCount).toBe(1);
    expect(r.violations[0]).toContain('its ExpireSession (revision 12) committed before w2#');
    expect(flagged(other(13, BOUND_MS + 50), EXPIRED_AT)).toBe(0);
    // At or below the ExpireSession's revision a grant says nothing about it; nor does any grant without the log.
    expect(flagged(other(12, BOUND_MS - 50), EXPIRED_AT)).toBe(0);
    expect(flagged(other(13, BOUND_MS - 50), NO_LOG)).toBe(0);
    // The earliest answer counts, whatever its token: a later token answered earlier.
    const two = history([grant('w2', 'B', '/ls/t/b', 'X', 13, BOUND_MS + 500), grant('w2', 'B', '/ls/t/c', 'X', 30, BOUND_MS - 50)]);
    expect(flagged(two, EXPIRED_AT)).toBe(1);
  });

  it('a replica at x2 in the span halves the promise in real time; x0.5 never loosens it', () => {
    const fast = leaderTimelineClock([
      { t: 0, leader: '*', rate: 1 },
      { t: 1_500, leader: '*', rate: 2 },
      { t: 3_000, leader: '*', rate: 1 },
    ]);
    const fastBound = SENT_MS + TTL_MS / 2 - DRIFT_MS;
    expect(flagged(history([grant('w2', 'B', '/ls/t/a', 'X', 20, fastBound + 50)]), NO_LOG, fast)).toBe(0);
    expect(flagged(history([grant('w2', 'B', '/ls/t/a', 'X', 20, fastBound - 50)]), NO_LOG, fast)).toBe(1);
    const slow = leaderTimelineClock([{ t: 0, leader: '*', rate: 0.5 }]);
    expect(flagged(history([grant('w2', 'B', '/ls/t/a', 'X', 20, BOUND_MS - 50)]), NO_LOG, slow)).toBe(1);
    expect(flagged(history([grant('w2', 'B', '/ls/t/a', 'X', 20, BOUND_MS + 50)]), NO_LOG, slow)).toBe(0);
  });

  it('a client under faketime is not judged: neither its promises nor its grants', () => {
    const h = history([grant('w2', 'B', '/ls/t/a', 'X', 20, BOUND_MS - 50)]);
    expect(flagged(h, EXPIRED_AT, REAL_RATE_CLOCK, ['w1'])).toBe(0);
    expect(checkExpiryPromises(h, EXPIRED_AT, REAL_RATE_CLOCK, new Set(['w1'])).promises).toBe(0);
    expect(flagged(h, EXPIRED_AT, REAL_RATE_CLOCK, ['w2'])).toBe(0);
  });
});

describe('recorded promises', () => {
  it('keep the acknowledged heartbeat whose promise reaches furthest; a ttl_ms_remaining of 0 promises nothing', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'fencer-promise-'));
    try {
      const lines = [
        { k: 'hb', p: 'w1', s: 'A', sent: 1_000, t: 1_010, ttl: 3_000 },
        { k: 'hb', p: 'w1', s: 'A', sent: 1_500, t: 1_510, ttl: 2_000 },
        { k: 'hb', p: 'w1', s: 'A', sent: 2_000, t: 2_010, ttl: 0 },
        { k: 'hb', p: 'w1', s: 'B', sent: 3_000, t: 3_010, ttl: 0 },
      ];
      writeFileSync(path.join(dir, 'w1.jsonl'), lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
      const h = loadHistory(dir);
      expect(h.sessions.get('A')?.lastPromise).toEqual({ sentMs: 1_000, ttlMs: 3_000 });
      expect(h.sessions.get('B')?.lastPromise).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
