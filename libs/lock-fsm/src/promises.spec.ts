/**
 * Goal: one scenario per promise of the lock table (docs/architecture.md,
 * "Promises"), each small enough to read as an example.
 * Method: drive a state machine through the real entry path (encode, then
 * applyEntry) with the test harness, and check outcomes, lock states and
 * events. Each describe quotes the promise it checks.
 */
import { describe, expect, it } from 'vitest';
import { AssertionError, RequestId, Revision, SessionId } from '@fencer/base';
import { Cell } from '../test/harness.js';
import type { LockEvent } from './index.js';

const X = '/ls/payments/invoices/42';
const Y = '/ls/payments/invoices/43';

const brief = (events: readonly LockEvent[]) => events.map((e) => `${e.type} ${e.sessionId} ${e.token}`);

describe('Grant: "GRANTED with token t means the grant is committed at revision t … every later grant of the same name has a token greater than t"', () => {
  it('a grant’s token is the revision of the granting entry: log index plus revision base', () => {
    const cell = new Cell({ autoClaim: true, revisionBase: 1000 });
    const a = cell.open();
    const r = cell.acquire(a, X);
    expect(r.revision).toBe(cell.index + 1000);
    expect(r.outcome).toMatchObject({ ok: true, status: 'GRANTED', token: cell.index + 1000, revision: cell.index + 1000 });
    expect(r.events).toHaveLength(1);
    expect(r.events[0]).toMatchObject({ type: 'ACQUIRED', revision: cell.index + 1000, token: cell.index + 1000, sessionId: a, name: X });
  });

  it('a waiter promoted by a later entry gets the revision of that entry, not of its Acquire', () => {
    const cell = new Cell();
    const a = cell.open();
    const b = cell.open();
    const t1 = cell.grant(a, X);
    const queued = cell.acquire(b, X, { requestId: 'b-1' });
    expect(queued.outcome).toMatchObject({ status: 'QUEUED', position: 0 });
    cell.run({ kind: 'Noop' });
    const rel = cell.release(a, X, t1);
    expect(rel.outcome).toEqual({ ok: true, released: true });
    expect(brief(rel.events)).toEqual([`RELEASED ${a} ${t1}`, `ACQUIRED ${b} ${rel.revision}`]);
    expect(rel.events[1]?.requestId).toBe('b-1');
    expect(cell.view(X).holders).toEqual([`${b}:${rel.revision}:E`]);
    expect(rel.revision).toBeGreaterThan(queued.revision);
  });

  it('tokens of one name strictly increase from entry to entry over a long mixed history', () => {
    const cell = new Cell();
    const sessions = [cell.open(), cell.open(), cell.open()];
    /** Tokens of new grants, by the entry that granted them (shared holders granted together share one). */
    const grantsByEntry: { revision: number; tokens: number[] }[] = [];
    const note = (revision: number, events: readonly LockEvent[]) => {
      const tokens = events.filter((e) => e.type === 'ACQUIRED').map((e) => e.token as number);
      if (tokens.length > 0) grantsByEntry.push({ revision, tokens });
    };
    for (let round = 0; round < 40; round++) {
      const s = sessions[round % 3] as SessionId;
      const r = cell.acquire(s, X, { mode: round % 4 === 0 ? 'SHARED' : 'EXCLUSIVE' });
      note(r.revision, r.events);
      if (round % 2 === 1) {
        for (const h of cell.fsm.getLock(X).holders) {
          const rel = cell.release(h.sessionId, X, h.token);
          note(rel.revision, rel.events);
        }
      }
    }
    expect(grantsByEntry.length).toBeGreaterThan(15);
    let previous = 0;
    for (const { revision, tokens } of grantsByEntry) {
      for (const t of tokens) expect(t).toBe(revision);
      expect(revision).toBeGreaterThan(previous);
      previous = revision;
    }
  });
});

describe('Fairness: "Strict FIFO: a shared request is granted only when no exclusive holder exists and nobody is ahead of it"', () => {
  it('FIFO with mixed modes: a shared request queues behind a queued exclusive one, even while shared holders hold', () => {
    const cell = new Cell();
    const [a, b, c, d] = [cell.open(), cell.open(), cell.open(), cell.open()];
    const ta = cell.grant(a, X, { mode: 'SHARED' });
    const tb = cell.grant(b, X, { mode: 'SHARED' });
    expect(cell.acquire(c, X, { mode: 'EXCLUSIVE', requestId: 'c' }).outcome).toMatchObject({ status: 'QUEUED', position: 0 });
    // d would fit among the shared holders, but c is ahead of it.
    expect(cell.acquire(d, X, { mode: 'SHARED', requestId: 'd' }).outcome).toMatchObject({ status: 'QUEUED', position: 1 });
    expect(cell.view(X)).toEqual({ holders: [`${a}:${ta}:S`, `${b}:${tb}:S`], waiters: [`${c}:E:c`, `${d}:S:d`], delayed: false });
    cell.release(a, X, ta);
    expect(cell.view(X).holders).toEqual([`${b}:${tb}:S`]);
    const r = cell.release(b, X, tb);
    expect(brief(r.events)).toEqual([`RELEASED ${b} ${tb}`, `ACQUIRED ${c} ${r.revision}`]);
    const tc = r.revision;
    const r2 = cell.release(c, X, tc);
    expect(brief(r2.events)).toEqual([`RELEASED ${c} ${tc}`, `ACQUIRED ${d} ${r2.revision}`]);
    expect(cell.fsm.getLock(X).mode).toBe('SHARED');
  });

  it('"Promotion from the head grants consecutive shared requests together and stops at the first it cannot grant"', () => {
    const cell = new Cell();
    const [a, s1, s2, s3, e, s4] = [cell.open(), cell.open(), cell.open(), cell.open(), cell.open(), cell.open()];
    const ta = cell.grant(a, X);
    for (const [s, mode] of [
      [s1, 'SHARED'],
      [s2, 'SHARED'],
      [s3, 'SHARED'],
      [e, 'EXCLUSIVE'],
      [s4, 'SHARED'],
    ] as const) {
      expect(cell.acquire(s, X, { mode, requestId: `q-${s}` }).outcome).toMatchObject({ status: 'QUEUED' });
    }
    const r = cell.release(a, X, ta);
    const t = r.revision;
    expect(brief(r.events)).toEqual([`RELEASED ${a} ${ta}`, `ACQUIRED ${s1} ${t}`, `ACQUIRED ${s2} ${t}`, `ACQUIRED ${s3} ${t}`]);
    expect(cell.view(X)).toEqual({
      holders: [`${s1}:${t}:S`, `${s2}:${t}:S`, `${s3}:${t}:S`],
      waiters: [`${e}:E:q-${e}`, `${s4}:S:q-${s4}`],
      delayed: false,
    });
    // Every event of the entry carries the lock's state after the entry.
    for (const ev of r.events) expect(ev.lock).toEqual(cell.fsm.getLock(X));
  });

  it('a full set of shared holders (holdersPerLockMax) counts as busy: shared requests queue, try-locks time out', () => {
    const cell = new Cell({ autoClaim: true, limits: { holdersPerLockMax: 2 } });
    const [a, b, c, d] = [cell.open(), cell.open(), cell.open(), cell.open()];
    const ta = cell.grant(a, X, { mode: 'SHARED' });
    cell.grant(b, X, { mode: 'SHARED' });
    expect(cell.acquire(c, X, { mode: 'SHARED', tryLock: true }).outcome).toMatchObject({ status: 'TIMED_OUT', reason: 'busy' });
    expect(cell.acquire(d, X, { mode: 'SHARED' }).outcome).toMatchObject({ status: 'QUEUED', position: 0 });
    const r = cell.release(a, X, ta);
    expect(brief(r.events)).toEqual([`RELEASED ${a} ${ta}`, `ACQUIRED ${d} ${r.revision}`]);
  });
});

describe('try-lock: "wait_ms = 0 is a try-lock" and never queues', () => {
  it('a busy try-lock answers TIMED_OUT (reason busy) and leaves the queue untouched', () => {
    const cell = new Cell();
    const [a, b] = [cell.open(), cell.open()];
    cell.grant(a, X);
    const r = cell.acquire(b, X, { tryLock: true, waitMs: 0 });
    expect(r.outcome).toEqual({ ok: true, status: 'TIMED_OUT', reason: 'busy', revision: r.revision, deduped: false });
    expect(r.events).toEqual([]);
    expect(cell.view(X).waiters).toEqual([]);
  });

  it('a try-lock on a free lock is granted; one behind a queue is busy even when it would be compatible', () => {
    const cell = new Cell();
    const [a, b, c] = [cell.open(), cell.open(), cell.open()];
    expect(cell.acquire(a, X, { tryLock: true, mode: 'SHARED' }).outcome).toMatchObject({ status: 'GRANTED' });
    cell.acquire(b, X, { mode: 'EXCLUSIVE' });
    expect(cell.acquire(c, X, { tryLock: true, mode: 'SHARED' }).outcome).toMatchObject({ status: 'TIMED_OUT' });
  });
});

describe('Release: "Release with a stale token is a no-op. Release, close and expiry promote waiters in FIFO order."', () => {
  it('a stale token (an older grant of the same session) is a no-op and leaves the holder in place', () => {
    const cell = new Cell();
    const a = cell.open();
    const t1 = cell.grant(a, X);
    cell.release(a, X, t1);
    const t2 = cell.grant(a, X);
    const r = cell.release(a, X, t1);
    expect(r.outcome).toEqual({ ok: true, released: false });
    expect(r.events).toEqual([]);
    expect(cell.view(X).holders).toEqual([`${a}:${t2}:E`]);
    expect(cell.fsm.checkToken(X, t1)).toEqual({ current: false, latestToken: t2 });
    expect(cell.fsm.checkToken(X, t2)).toEqual({ current: true, latestToken: t2 });
  });

  it('another session’s current token does not release it', () => {
    const cell = new Cell();
    const [a, b] = [cell.open(), cell.open()];
    const t = cell.grant(a, X);
    expect(cell.release(b, X, t).outcome).toEqual({ ok: true, released: false });
    expect(cell.view(X).holders).toEqual([`${a}:${t}:E`]);
  });

  it('close releases holdings and cancels waits, then promotes each lock; events say EXPIRED', () => {
    const cell = new Cell();
    const [a, b, c] = [cell.open(), cell.open(), cell.open()];
    const ta = cell.grant(a, X);
    cell.grant(c, Y);
    cell.acquire(a, Y, { requestId: 'a-y' });
    cell.acquire(b, X, { requestId: 'b-x' });
    const r = cell.close(a);
    expect(r.outcome).toEqual({ ok: true, released: [X] });
    expect(brief(r.events)).toEqual([`EXPIRED ${a} ${ta}`, `ACQUIRED ${b} ${r.revision}`, `EXPIRED ${a} 0`]);
    expect(r.events[2]?.requestId).toBe('a-y');
    expect(cell.view(Y).waiters).toEqual([]);
    expect(cell.fsm.getSession(a)).toBeUndefined();
    expect(cell.acquire(a, X).outcome).toMatchObject({ ok: false, code: 'SESSION_NOT_FOUND' });
  });

  it('expiry releases and promotes like close', () => {
    const cell = new Cell();
    const [a, b] = [cell.open(), cell.open()];
    cell.grant(a, X, { mode: 'SHARED' });
    cell.acquire(b, X, { mode: 'EXCLUSIVE', requestId: 'b' });
    const r = cell.expire(a);
    expect(r.outcome).toEqual({ ok: true, released: [X], delayed: [] });
    expect(cell.view(X).holders).toEqual([`${b}:${r.revision}:E`]);
  });

  it('"Cancelling a waiter runs promotion too": cancelling an exclusive head lets the shared waiters behind it join', () => {
    const cell = new Cell();
    const [a, e, s] = [cell.open(), cell.open(), cell.open()];
    const ta = cell.grant(a, X, { mode: 'SHARED' });
    cell.acquire(e, X, { mode: 'EXCLUSIVE', requestId: 'e' });
    cell.acquire(s, X, { mode: 'SHARED', requestId: 's' });
    const r = cell.cancel(e, X, 'e', 'timed-out');
    expect(r.outcome).toEqual({ ok: true, cancelled: true });
    expect(brief(r.events)).toEqual([`CANCELED ${e} 0`, `ACQUIRED ${s} ${r.revision}`]);
    expect(cell.view(X).holders).toEqual([`${a}:${ta}:S`, `${s}:${r.revision}:S`]);
  });

  it('cancelling a request that is no longer waiting (granted meanwhile) is a no-op', () => {
    const cell = new Cell();
    const [a, b] = [cell.open(), cell.open()];
    const ta = cell.grant(a, X);
    cell.acquire(b, X, { requestId: 'b' });
    const rel = cell.release(a, X, ta);
    expect(cell.cancel(b, X, 'b').outcome).toEqual({ ok: true, cancelled: false });
    expect(cell.view(X).holders).toEqual([`${b}:${rel.revision}:E`]);
  });

  it('a lock record disappears when it has no holders, no waiters and no lock-delay', () => {
    const cell = new Cell();
    const a = cell.open();
    const t = cell.grant(a, X);
    expect(cell.fsm.namespaceInfo('payments')?.locks).toBe(1);
    cell.release(a, X, t);
    expect(cell.fsm.namespaceInfo('payments')?.locks).toBe(0);
    expect(cell.fsm.getLock(X)).toEqual({ name: X, mode: null, holders: [], waiters: [], delayed: false });
  });
});

describe('Retries: "The same request_id in the same session yields the same outcome"', () => {
  it('a granted request retried after its release still answers GRANTED with its token', () => {
    const cell = new Cell();
    const a = cell.open();
    const first = cell.acquire(a, X, { requestId: 'r1' });
    expect(first.outcome).toMatchObject({ status: 'GRANTED', deduped: false });
    const token = first.outcome.ok && first.outcome.status === 'GRANTED' ? first.outcome.token : 0;
    cell.release(a, X, token);
    const retry = cell.acquire(a, X, { requestId: 'r1' });
    expect(retry.outcome).toEqual({ ok: true, status: 'GRANTED', token, holders: [], revision: first.revision, deduped: true });
    expect(retry.events).toEqual([]);
    expect(cell.view(X).holders).toEqual([]);
  });

  it('a queued request retried answers QUEUED with its current position, and GRANTED once promoted', () => {
    const cell = new Cell();
    const [a, b, c] = [cell.open(), cell.open(), cell.open()];
    const ta = cell.grant(a, X);
    const qb = cell.acquire(b, X, { requestId: 'rb' });
    cell.acquire(c, X, { requestId: 'rc' });
    expect(cell.acquire(c, X, { requestId: 'rc' }).outcome).toEqual({
      ok: true,
      status: 'QUEUED',
      position: 1,
      revision: qb.revision + 1,
      deduped: true,
    });
    cell.cancel(b, X, 'rb');
    expect(cell.acquire(c, X, { requestId: 'rc' }).outcome).toMatchObject({ status: 'QUEUED', position: 0, deduped: true });
    const rel = cell.release(a, X, ta);
    expect(cell.acquire(c, X, { requestId: 'rc' }).outcome).toMatchObject({
      status: 'GRANTED',
      token: rel.revision,
      revision: rel.revision,
      deduped: true,
    });
  });

  it('a timed-out request retried answers TIMED_OUT, even once the lock is free', () => {
    const cell = new Cell();
    const [a, b] = [cell.open(), cell.open()];
    const ta = cell.grant(a, X);
    cell.acquire(b, X, { requestId: 'rb' });
    const cancel = cell.cancel(b, X, 'rb', 'timed-out');
    cell.release(a, X, ta);
    expect(cell.acquire(b, X, { requestId: 'rb' }).outcome).toEqual({
      ok: true,
      status: 'TIMED_OUT',
      reason: 'timed-out',
      revision: cancel.revision,
      deduped: true,
    });
    const busy = cell.acquire(b, X, { requestId: 'try', tryLock: true });
    expect(busy.outcome).toMatchObject({ status: 'GRANTED' });
    expect(cell.acquire(b, X, { requestId: 'try', tryLock: true }).outcome).toMatchObject({ status: 'GRANTED', deduped: true });
  });
});

describe('Retries: the outcomes a session remembers ("the last 64 request ids")', () => {
  it('remembers the last 64 request ids per session; an older one is a new request again', () => {
    const cell = new Cell();
    const [a, b] = [cell.open(), cell.open()];
    cell.grant(b, X);
    const first = cell.acquire(a, X, { requestId: 'old', tryLock: true });
    expect(first.outcome).toMatchObject({ status: 'TIMED_OUT' });
    for (let i = 0; i < 63; i++) cell.acquire(a, X, { requestId: `n${i}`, tryLock: true });
    expect(cell.acquire(a, X, { requestId: 'old', tryLock: true }).outcome).toMatchObject({ deduped: true, revision: first.revision });
    cell.acquire(a, X, { requestId: 'n63', tryLock: true });
    expect(cell.acquire(a, X, { requestId: 'old', tryLock: true }).outcome).toMatchObject({ deduped: false });
  });

  it('a still-waiting request is recognized even after its dedupe record was pushed out', () => {
    const cell = new Cell({ autoClaim: true, limits: { dedupePerSessionMax: 1 } });
    const [a, b] = [cell.open(), cell.open()];
    cell.grant(a, X);
    const q = cell.acquire(b, X, { requestId: 'wait' });
    cell.acquire(b, Y, { requestId: 'other' });
    expect(cell.acquire(b, X, { requestId: 'wait' }).outcome).toEqual({
      ok: true,
      status: 'QUEUED',
      position: 0,
      revision: q.revision,
      deduped: true,
    });
    expect(cell.acquire(b, X, { requestId: 'new' }).outcome).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
  });

  it('re-acquiring a held lock in the same mode answers the existing grant; in another mode it is refused', () => {
    const cell = new Cell();
    const a = cell.open();
    const t = cell.grant(a, X, { mode: 'SHARED' });
    expect(cell.acquire(a, X, { mode: 'SHARED' }).outcome).toMatchObject({ status: 'GRANTED', token: t, deduped: false });
    expect(cell.acquire(a, X, { mode: 'EXCLUSIVE' }).outcome).toMatchObject({ ok: false, code: 'INVALID_MODE' });
    expect(cell.view(X).holders).toEqual([`${a}:${t}:S`]);
  });
});

describe('Lock-delay: "after an expiry the lock is not regranted for the delay"', () => {
  it('after an expiry, the lock stays delayed (waiters stay queued) until the leader’s LiftLockDelay', () => {
    const cell = new Cell();
    const [a, b, c] = [cell.open(), cell.open(), cell.open()];
    cell.grant(a, X, { lockDelayMs: 5000 });
    cell.acquire(b, X, { requestId: 'b' });
    const exp = cell.expire(a);
    expect(exp.outcome).toEqual({ ok: true, released: [X], delayed: [{ name: X, delayMs: 5000, delayRevision: exp.revision }] });
    expect(cell.view(X)).toEqual({ holders: [], waiters: [`${b}:E:b`], delayed: true });
    expect(exp.events[0]?.lock.delayed).toBe(true);
    expect([...cell.fsm.delayedLocks()]).toEqual([{ name: X, delayMs: 5000, delayRevision: exp.revision }]);
    expect(cell.acquire(c, X, { tryLock: true }).outcome).toMatchObject({ status: 'TIMED_OUT', reason: 'busy' });
    // A lift for another delay (a stale schedule) does nothing.
    expect(cell.run({ kind: 'LiftLockDelay', name: X, delayRevision: Revision(exp.revision - 1) }).outcome).toEqual({
      ok: true,
      lifted: false,
    });
    const lift = cell.run({ kind: 'LiftLockDelay', name: X, delayRevision: Revision(exp.revision) });
    expect(lift.outcome).toEqual({ ok: true, lifted: true });
    expect(brief(lift.events)).toEqual([`ACQUIRED ${b} ${lift.revision}`]);
    expect(cell.view(X).delayed).toBe(false);
  });

  it('a delayed lock with nobody waiting stays listed until lifted, then disappears', () => {
    const cell = new Cell();
    const a = cell.open();
    cell.grant(a, X, { lockDelayMs: 100 });
    const exp = cell.expire(a);
    expect(cell.fsm.getLock(X).delayed).toBe(true);
    cell.run({ kind: 'LiftLockDelay', name: X, delayRevision: Revision(exp.revision) });
    expect(cell.fsm.namespaceInfo('payments')?.locks).toBe(0);
  });

  it('no lock-delay after a clean release or a close', () => {
    const cell = new Cell();
    const [a, b, c] = [cell.open(), cell.open(), cell.open()];
    const ta = cell.grant(a, X, { lockDelayMs: 5000 });
    cell.acquire(b, X, { requestId: 'b' });
    const rel = cell.release(a, X, ta);
    expect(cell.view(X)).toEqual({ holders: [`${b}:${rel.revision}:E`], waiters: [], delayed: false });
    cell.grant(c, Y, { lockDelayMs: 5000 });
    expect(cell.close(c).outcome).toEqual({ ok: true, released: [Y] });
    expect(cell.fsm.getLock(Y).delayed).toBe(false);
    expect([...cell.fsm.delayedLocks()]).toEqual([]);
  });

  it('an expiry without lock-delay does not delay', () => {
    const cell = new Cell();
    const [a, b] = [cell.open(), cell.open()];
    cell.grant(a, X);
    cell.acquire(b, X);
    const exp = cell.expire(a);
    expect(cell.view(X).holders).toEqual([`${b}:${exp.revision}:E`]);
  });
});

describe('Namespaces: "a name outside the session’s namespace is rejected"', () => {
  it('answers WRONG_NAMESPACE for Acquire, Release and CancelWait', () => {
    const cell = new Cell();
    const a = cell.open('payments');
    cell.open('billing');
    const other = '/ls/billing/x';
    expect(cell.acquire(a, other).outcome).toMatchObject({ ok: false, code: 'WRONG_NAMESPACE' });
    expect(cell.release(a, other, 1).outcome).toMatchObject({ ok: false, code: 'WRONG_NAMESPACE' });
    expect(cell.cancel(a, other, 'r').outcome).toMatchObject({ ok: false, code: 'WRONG_NAMESPACE' });
    expect(cell.fsm.getLock(other).holders).toEqual([]);
  });

  it('answers INVALID_NAME, MISSING_REQUEST_ID, INVALID_ARGUMENT for bad fields, and SESSION_NOT_FOUND for unknown sessions', () => {
    const cell = new Cell();
    const a = cell.open();
    expect(cell.acquire(a, '/ls/payments/').outcome).toMatchObject({ ok: false, code: 'INVALID_NAME' });
    expect(cell.acquire(a, '/ls/payments/a/../b').outcome).toMatchObject({ ok: false, code: 'INVALID_NAME' });
    expect(cell.acquire(a, X, { requestId: '' }).outcome).toMatchObject({ ok: false, code: 'MISSING_REQUEST_ID' });
    expect(cell.acquire(a, X, { lockDelayMs: 60_001 }).outcome).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
    expect(cell.acquire(SessionId('payments:nobody'), X).outcome).toMatchObject({ ok: false, code: 'SESSION_NOT_FOUND' });
    expect(cell.acquire(SessionId('no-separator'), X).outcome).toMatchObject({ ok: false, code: 'SESSION_NOT_FOUND' });
    expect(cell.close(SessionId('payments:nobody')).outcome).toMatchObject({ ok: false, code: 'SESSION_NOT_FOUND' });
    expect(cell.fsm.namespaceInfo('payments')?.locks).toBe(0);
  });
});

describe('apply() is deterministic and total', () => {
  it('rejects entries out of index order with an AssertionError (a replica bug, not an outcome)', () => {
    const cell = new Cell();
    cell.open();
    expect(() => cell.fsm.apply(cell.index, { kind: 'Noop' })).toThrow(AssertionError);
    expect(() => cell.fsm.apply(cell.index - 1, { kind: 'Noop' })).toThrow(AssertionError);
    // Gaps are allowed: the indexes of entries that are not commands (membership changes).
    expect(cell.fsm.apply(cell.index + 5, { kind: 'Noop' }).revision).toBe(cell.index + 5);
  });

  it('an empty entry is Raft’s blank entry: a Noop that advances the revision', () => {
    const cell = new Cell();
    const r = cell.fsm.applyEntry(1, new Uint8Array(0));
    expect(r).toEqual({ index: 1, revision: 1, outcome: { ok: true }, events: [] });
    expect(cell.fsm.revision).toBe(1);
  });

  it('bad input objects passed to apply() get outcomes, not exceptions', () => {
    const cell = new Cell();
    const a = cell.open();
    const bad = (mode: string) =>
      cell.fsm.apply(++cell.index, {
        kind: 'Acquire',
        sessionId: a,
        name: X,
        mode: mode as 'SHARED',
        requestId: RequestId('r'),
        waitMs: 0,
        lockDelayMs: 0,
        tryLock: true,
      }).outcome;
    expect(bad('WRITE')).toMatchObject({ ok: false, code: 'INVALID_MODE' });
    expect(cell.fsm.apply(++cell.index, { kind: 'Release', sessionId: a, name: X, token: Revision(-1) }).outcome).toMatchObject({
      ok: false,
      code: 'INVALID_ARGUMENT',
    });
  });
});
