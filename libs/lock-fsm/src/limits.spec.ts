/**
 * Goal: every limit is answered with a clear outcome (QUOTA_EXCEEDED or an
 * INVALID_* code), never a crash, and the limits' relations are asserted.
 * Method: fill each limit to its edge with shrunken limits through the real
 * entry path, and check the outcome one step past the edge.
 */
import { describe, expect, it } from 'vitest';
import { AssertionError, Namespace, RequestId } from '@fencer/base';
import { makeSessionId, REQUEST_ID_BYTES_MAX, TTL_MS_MAX } from '@fencer/contract';
import { Cell } from '../test/harness.js';
import { LIMITS, LockStateMachine } from './index.js';

const X = '/ls/payments/x';

describe('counting limits answer QUOTA_EXCEEDED', () => {
  it('sessions per namespace, and sessions per cell', () => {
    const cell = new Cell({ autoClaim: true, limits: { sessionsPerNamespaceMax: 2, sessionsMax: 3 } });
    cell.open('payments');
    cell.open('payments');
    expect(() => cell.open('payments')).toThrow(/QUOTA_EXCEEDED.*namespace "payments"/);
    cell.open('billing');
    expect(() => cell.open('jobs')).toThrow(/QUOTA_EXCEEDED.*this cell/);
    // The refused OpenSession did not claim "jobs".
    expect(cell.fsm.namespaceInfo('jobs')).toBeUndefined();
  });

  it('locks per session count held and awaited names together', () => {
    const cell = new Cell({ autoClaim: true, limits: { locksPerSessionMax: 2 } });
    const [a, b] = [cell.open(), cell.open()];
    cell.grant(b, '/ls/payments/busy');
    cell.grant(a, '/ls/payments/1');
    expect(cell.acquire(a, '/ls/payments/busy').outcome).toMatchObject({ status: 'QUEUED' });
    expect(cell.acquire(a, '/ls/payments/2').outcome).toMatchObject({ ok: false, code: 'QUOTA_EXCEEDED' });
    // A busy try-lock needs no room: it answers TIMED_OUT, not QUOTA_EXCEEDED.
    cell.grant(b, '/ls/payments/busy2');
    expect(cell.acquire(a, '/ls/payments/busy2', { tryLock: true }).outcome).toMatchObject({ status: 'TIMED_OUT', reason: 'busy' });
  });

  it('waiters per lock', () => {
    const cell = new Cell({ autoClaim: true, limits: { waitersPerLockMax: 2 } });
    const [a, b, c, d] = [cell.open(), cell.open(), cell.open(), cell.open()];
    cell.grant(a, X);
    expect(cell.acquire(b, X).outcome).toMatchObject({ status: 'QUEUED', position: 0 });
    expect(cell.acquire(c, X).outcome).toMatchObject({ status: 'QUEUED', position: 1 });
    const full = cell.acquire(d, X, { requestId: 'd1' });
    expect(full.outcome).toMatchObject({ ok: false, code: 'QUOTA_EXCEEDED' });
    expect(full.events).toEqual([]);
    // An error is not remembered: the same request id may succeed later.
    cell.close(c);
    expect(cell.acquire(d, X, { requestId: 'd1' }).outcome).toMatchObject({ status: 'QUEUED', position: 1, deduped: false });
  });

  it('dedupe records per session stay at the limit', () => {
    const cell = new Cell({ autoClaim: true, limits: { dedupePerSessionMax: 3 } });
    const a = cell.open();
    for (let i = 0; i < 10; i++) cell.acquire(a, `/ls/payments/n${i % 2}`, { requestId: `r${i}`, mode: 'SHARED' });
    cell.fsm.checkInvariants();
    expect(cell.acquire(a, '/ls/payments/n1', { requestId: 'r9', mode: 'SHARED' }).outcome).toMatchObject({ deduped: true });
    expect(cell.acquire(a, '/ls/payments/n0', { requestId: 'r0', mode: 'SHARED' }).outcome).toMatchObject({ deduped: false });
  });
});

describe('field limits answer INVALID_* codes', () => {
  it('request ids up to 128 bytes; client ids up to 256; TTL within bounds', () => {
    const cell = new Cell();
    const a = cell.open();
    expect(cell.acquire(a, X, { requestId: 'r'.repeat(REQUEST_ID_BYTES_MAX) }).outcome).toMatchObject({ status: 'GRANTED' });
    expect(cell.acquire(a, '/ls/payments/y', { requestId: 'é'.repeat(65) }).outcome).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
    const open = (clientId: string, ttlMs: number) =>
      cell.run({
        kind: 'OpenSession',
        sessionId: makeSessionId(Namespace('payments'), `c${cell.index}`),
        clientId,
        namespace: Namespace('payments'),
        ttlMs,
      }).outcome;
    expect(open('w'.repeat(256), 1000)).toMatchObject({ ok: true });
    expect(open('w'.repeat(257), 1000)).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
    expect(open('w', 0)).toMatchObject({ ok: false, code: 'INVALID_TTL' });
    expect(open('w', TTL_MS_MAX + 1)).toMatchObject({ ok: false, code: 'INVALID_TTL' });
    // A fraction cannot even be encoded (the server validates first); apply() of the object still answers.
    const fractional = cell.fsm.apply(++cell.index, {
      kind: 'OpenSession',
      sessionId: makeSessionId(Namespace('payments'), 'f'),
      clientId: 'w',
      namespace: Namespace('payments'),
      ttlMs: 1.5,
    });
    expect(fractional.outcome).toMatchObject({ ok: false, code: 'INVALID_TTL' });
  });

  it('a name of 513 bytes is INVALID_NAME', () => {
    const cell = new Cell();
    const a = cell.open();
    const head = '/ls/payments/';
    expect(cell.acquire(a, head + 'x'.repeat(512 - head.length)).outcome).toMatchObject({ status: 'GRANTED' });
    expect(cell.acquire(a, head + 'x'.repeat(513 - head.length)).outcome).toMatchObject({ ok: false, code: 'INVALID_NAME' });
  });

  it('lock-delay up to 60000 ms', () => {
    const cell = new Cell();
    const a = cell.open();
    expect(cell.acquire(a, X, { lockDelayMs: 60_000 }).outcome).toMatchObject({ status: 'GRANTED' });
    expect(cell.acquire(a, '/ls/payments/y', { lockDelayMs: 60_001, requestId: RequestId('z') }).outcome).toMatchObject({
      ok: false,
      code: 'INVALID_ARGUMENT',
    });
  });
});

describe('limit relations', () => {
  it('the defaults hold the issue’s values', () => {
    expect(LIMITS.dedupePerSessionMax).toBe(64);
    expect(LIMITS.sessionsPerNamespaceMax).toBeLessThanOrEqual(LIMITS.sessionsMax);
  });

  it('a configuration that breaks a relation is refused at construction', () => {
    expect(() => new LockStateMachine({ autoClaim: true, limits: { sessionsPerNamespaceMax: 10, sessionsMax: 5 } })).toThrow(
      AssertionError,
    );
    expect(() => new LockStateMachine({ autoClaim: true, limits: { waitersPerLockMax: 0 } })).toThrow(AssertionError);
    expect(() => new LockStateMachine({ autoClaim: true, revisionBase: -1 })).toThrow(AssertionError);
  });
});
