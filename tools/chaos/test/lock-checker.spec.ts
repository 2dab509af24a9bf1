/**
 * Goal: the per-lock linearizability checker accepts histories a correct
 * FIFO shared/exclusive lock service can produce (including unknown
 * outcomes, promotions by release and by session end) and rejects the ones
 * it cannot: two exclusive holders, a FIFO jump, a stale read, a release of
 * a stale token that succeeded, an expiry before the TTL.
 * Method: small hand-written histories (times in ms, revisions as the log
 * would assign them) through the same pipeline as a chaos run:
 * buildLockHistories, then checkLock per name.
 */
import { describe, expect, it } from 'vitest';
import type { History, Op, OpArgs, OpResult, SessionFacts } from '../src/history.js';
import { buildLockHistories } from '../src/check/lock-history.js';
import { checkLock } from '../src/check/linearizability.js';

const N = '/ls/t/a';

class Builder {
  readonly ops: Op[] = [];
  readonly sessions = new Map<string, SessionFacts>();
  private id = 0;

  private push(inv: number, comp: number | 'unk', op: OpArgs, r?: OpResult, code?: string): this {
    this.id++;
    if (comp === 'unk') this.ops.push({ p: 'w', id: this.id, inv, comp: Infinity, op, outcome: 'unk', code: 'DEADLINE_EXCEEDED' });
    else if (code) this.ops.push({ p: 'w', id: this.id, inv, comp, op, outcome: 'fail', code });
    else this.ops.push({ p: 'w', id: this.id, inv, comp, op, outcome: 'ok', r: r! });
    return this;
  }

  /** A session opened at `at`, TTL 3000 ms, heartbeats acknowledged until `aliveUntil`. */
  open(s: string, at: number, aliveUntil = 1e9): this {
    this.sessions.set(s, { lastAckedSendMs: aliveUntil, endSeenMs: Infinity, abandonedMs: Infinity });
    return this.push(at, at + 1, { f: 'open', ns: 't', ttl: 3000 }, { f: 'open', s, ttl: 3000 });
  }

  granted(
    s: string,
    req: string,
    inv: number,
    comp: number,
    token: number,
    opts: { mode?: 'X' | 'S'; wait?: number; name?: string } = {},
  ): this {
    return this.push(
      inv,
      comp,
      { f: 'acquire', s, name: opts.name ?? N, mode: opts.mode ?? 'X', wait: opts.wait ?? 0, req },
      { f: 'acquire', status: 'GRANTED', token, rev: token },
    );
  }

  busy(s: string, req: string, inv: number, comp: number, rev: number, mode: 'X' | 'S' = 'X'): this {
    return this.push(inv, comp, { f: 'acquire', s, name: N, mode, wait: 0, req }, { f: 'acquire', status: 'TIMED_OUT', token: 0, rev });
  }

  timedOut(s: string, req: string, inv: number, comp: number, rev: number, wait = 500): this {
    return this.push(inv, comp, { f: 'acquire', s, name: N, mode: 'X', wait, req }, { f: 'acquire', status: 'TIMED_OUT', token: 0, rev });
  }

  acquireUnknown(s: string, req: string, inv: number, wait = 0): this {
    return this.push(inv, 'unk', { f: 'acquire', s, name: N, mode: 'X', wait, req });
  }

  release(s: string, token: number, inv: number, comp: number, released = true): this {
    return this.push(inv, comp, { f: 'release', s, name: N, token }, { f: 'release', released, retried: false });
  }

  read(
    inv: number,
    comp: number,
    rev: number,
    holders: Array<[string, number, 'X' | 'S']>,
    waiters: Array<[string, 'X' | 'S', string]> = [],
  ): this {
    return this.push(inv, comp, { f: 'get', name: N }, { f: 'get', rev, holders, waiters });
  }

  close(s: string, inv: number, comp: number): this {
    return this.push(inv, comp, { f: 'close', s }, { f: 'close', released: [] });
  }

  notFound(s: string, req: string, inv: number, comp: number): this {
    return this.push(inv, comp, { f: 'acquire', s, name: N, mode: 'X', wait: 0, req }, undefined, 'SESSION_NOT_FOUND');
  }

  history(): History {
    return { ops: [...this.ops].sort((a, b) => a.inv - b.inv), sessions: this.sessions, watches: [], badLines: 0 };
  }

  check(name = N): ReturnType<typeof checkLock> & { early: number } {
    const lh = buildLockHistories(this.history());
    const r = checkLock(name, lh.byName.get(name) ?? [], lh.expectations, 100_000);
    return { ...r, early: lh.earlyEnds.length };
  }
}

describe('per-lock linearizability', () => {
  it('accepts exclusive hand-offs with increasing tokens, busy try-locks and reads in between', () => {
    const r = new Builder()
      .open('A', 0)
      .open('B', 0)
      .granted('A', 'a1', 10, 20, 5)
      .busy('B', 'b1', 25, 30, 6)
      .read(31, 35, 6, [['A', 5, 'X']])
      .release('A', 5, 40, 50)
      .granted('B', 'b2', 55, 60, 8)
      .read(61, 70, 8, [['B', 8, 'X']])
      .check();
    expect(r.ok).toBe(true);
  });

  it('rejects a second exclusive grant while the first holder neither released nor ended', () => {
    const r = new Builder().open('A', 0).open('B', 0).granted('A', 'a1', 10, 20, 5).granted('B', 'b1', 30, 40, 9).check();
    expect(r.ok).toBe(false);
    expect(r.timedOut).toBe(false);
  });

  it('accepts the grant when the first holder released concurrently with the second request', () => {
    const r = new Builder()
      .open('A', 0)
      .open('B', 0)
      .granted('A', 'a1', 10, 20, 5)
      .release('A', 5, 30, 45)
      .granted('B', 'b1', 31, 50, 9)
      .check();
    expect(r.ok).toBe(true);
  });

  it('shared holders coexist; an exclusive request waits for them and is promoted by the last release with its token', () => {
    const r = new Builder()
      .open('A', 0)
      .open('B', 0)
      .open('C', 0)
      .granted('A', 'a1', 10, 20, 5, { mode: 'S' })
      .granted('B', 'b1', 21, 30, 7, { mode: 'S' })
      .granted('C', 'c1', 31, 100, 12, { wait: 1000 }) // queued, then granted by B's release at 12
      .release('A', 5, 40, 50)
      .release('B', 7, 60, 70)
      .read(101, 110, 12, [['C', 12, 'X']])
      .check();
    expect(r.ok).toBe(true);
  });

  it('rejects a FIFO jump: a later try-lock granted while an earlier waiter is still queued', () => {
    const r = new Builder()
      .open('A', 0)
      .open('B', 0)
      .open('C', 0)
      .granted('A', 'a1', 10, 20, 5)
      .granted('B', 'b1', 30, 200, 15, { wait: 1000 }) // queued at ~30, granted at 15 by A's release
      .read(35, 40, 9, [['A', 5, 'X']], [['B', 'X', 'b1']])
      .release('A', 5, 50, 60)
      .granted('C', 'c1', 51, 58, 14) // C gets it right before the release promotes B
      .check();
    expect(r.ok).toBe(false);
  });

  it('rejects a stale read: a read that misses a grant answered before the read began', () => {
    const r = new Builder().open('A', 0).granted('A', 'a1', 10, 20, 5).read(30, 40, 7, []).check();
    expect(r.ok).toBe(false);
  });

  it('rejects a release of a stale token that reports success', () => {
    const r = new Builder()
      .open('A', 0)
      .granted('A', 'a1', 10, 20, 5)
      .release('A', 5, 30, 40)
      .granted('A', 'a2', 50, 60, 9)
      .release('A', 5, 70, 80, true)
      .read(90, 95, 11, [['A', 9, 'X']])
      .check();
    expect(r.ok).toBe(false);
  });

  it('an acquire with an unknown outcome may have granted: a read that shows it is accepted, and so is one that does not', () => {
    const shown = new Builder()
      .open('A', 0)
      .acquireUnknown('A', 'a1', 10)
      .read(100, 110, 6, [['A', 5, 'X']])
      .close('A', 200, 210)
      .check();
    expect(shown.ok).toBe(true);
    const notShown = new Builder().open('A', 0).acquireUnknown('A', 'a1', 10).read(100, 110, 6, []).close('A', 200, 210).check();
    expect(notShown.ok).toBe(true);
  });

  it('a session end releases its holding and promotes the waiter, whose token is that end’s revision', () => {
    const r = new Builder()
      .open('A', 0, 10) // last heartbeat acknowledged at 10: may expire from 3010 on
      .open('B', 0)
      .granted('A', 'a1', 20, 30, 5)
      .granted('B', 'b1', 40, 5000, 20, { wait: 10_000 })
      .notFound('A', 'a2', 5100, 5110) // A learns its session is gone
      .check();
    expect(r.ok).toBe(true);
    expect(r.early).toBe(0);
  });

  it('reports a session seen ended before its TTL since the last acknowledged heartbeat', () => {
    const r = new Builder().open('A', 0, 1000).granted('A', 'a1', 20, 30, 5).notFound('A', 'a2', 1500, 1600).check();
    expect(r.early).toBe(1);
  });

  it('rejects a waiter granted with a token other than the revision of the release that promoted it', () => {
    const r = new Builder()
      .open('A', 0)
      .open('B', 0)
      .granted('A', 'a1', 10, 20, 5)
      .granted('B', 'b1', 30, 200, 15, { wait: 1000 })
      .release('A', 5, 50, 60)
      .read(70, 80, 13, [['B', 15, 'X']]) // the read at 13 already shows B holding with token 15 > 13
      .check();
    expect(r.ok).toBe(false);
  });

  it('a wait that timed out was queued and cancelled, and never granted', () => {
    const ok = new Builder()
      .open('A', 0)
      .open('B', 0)
      .granted('A', 'a1', 10, 20, 5)
      .timedOut('B', 'b1', 30, 600, 9)
      .read(601, 610, 9, [['A', 5, 'X']])
      .check();
    expect(ok.ok).toBe(true);
    const granted = new Builder()
      .open('A', 0)
      .open('B', 0)
      .granted('A', 'a1', 10, 20, 5)
      .release('A', 5, 25, 28)
      .timedOut('B', 'b1', 30, 600, 9)
      .check();
    expect(granted.ok).toBe(false); // the lock was free when B asked: B must have been granted at once
  });
});
