/**
 * Goal: per-tenant quotas (docs/decisions/0020-tenant-quotas-and-rate-limits.md)
 * are enforced by the state machine on sessions, lock names and waiters,
 * answer QUOTA_EXCEEDED beyond them, apply from the entry that sets them
 * (a raise lets the next request in, with no restart), survive snapshots,
 * travel with the namespace in its export, and an export of format 2 (no
 * quotas) still imports.
 * Method: harness cells fed through the real entry path; one cell exports
 * to another; the encoded command round-trips; bad quotas are refused.
 */
import { describe, expect, it } from 'vitest';
import { Namespace } from '@fencer/base';
import { makeSessionId } from '@fencer/contract';
import { Cell } from '../test/harness.js';
import {
  decodeCommand,
  encodeCommand,
  EXPORT_FORMAT_VERSION,
  LockStateMachine,
  NO_QUOTAS,
  QUOTA_VALUE_MAX,
  type NamespaceQuotas,
} from './index.js';

const NS = Namespace('payments');

function quotas(q: Partial<NamespaceQuotas>): NamespaceQuotas {
  return { ...NO_QUOTAS, ...q };
}

function setQuotas(cell: Cell, q: Partial<NamespaceQuotas>, namespace = NS) {
  return cell.run({ kind: 'SetNamespaceQuotas', namespace, quotas: quotas(q) });
}

function tryOpen(cell: Cell, unique: string) {
  return cell.run({ kind: 'OpenSession', sessionId: makeSessionId(NS, unique), clientId: 'w', namespace: NS, ttlMs: 5_000 });
}

describe('tenant quotas in the lock state machine', () => {
  it('refuses the session past maxSessions with QUOTA_EXCEEDED, and a raise lets the next one in', () => {
    const cell = new Cell({ autoClaim: false });
    cell.run({ kind: 'ClaimNamespace', namespace: NS });
    expect(setQuotas(cell, { maxSessions: 2 }).outcome).toEqual({ ok: true, changed: true });
    cell.open('payments');
    cell.open('payments');
    const third = tryOpen(cell, 'third');
    expect(third.outcome).toMatchObject({ ok: false, code: 'QUOTA_EXCEEDED' });
    expect((third.outcome as { message: string }).message).toMatch(/quota of 2 sessions/);
    // Another namespace is not limited by this one's quota.
    cell.run({ kind: 'ClaimNamespace', namespace: Namespace('billing') });
    expect(() => cell.open('billing')).not.toThrow();
    expect(setQuotas(cell, { maxSessions: 3 }).outcome).toEqual({ ok: true, changed: true });
    expect(tryOpen(cell, 'third').outcome).toMatchObject({ ok: true, existed: false });
    expect(tryOpen(cell, 'fourth').outcome).toMatchObject({ ok: false, code: 'QUOTA_EXCEEDED' });
    cell.fsm.checkInvariants();
  });

  it('setting the same quotas again changes nothing; 0 lifts a quota', () => {
    const cell = new Cell();
    cell.open('payments');
    expect(setQuotas(cell, { maxSessions: 1 }).outcome).toEqual({ ok: true, changed: true });
    expect(setQuotas(cell, { maxSessions: 1 }).outcome).toEqual({ ok: true, changed: false });
    expect(tryOpen(cell, 'x').outcome).toMatchObject({ code: 'QUOTA_EXCEEDED' });
    expect(setQuotas(cell, { maxSessions: 0 }).outcome).toEqual({ ok: true, changed: true });
    expect(tryOpen(cell, 'x').outcome).toMatchObject({ ok: true });
    expect(cell.fsm.namespaceInfo('payments')?.quotas).toEqual(NO_QUOTAS);
  });

  it('a lowered quota takes nothing away: only new sessions are refused', () => {
    const cell = new Cell();
    const a = cell.open('payments');
    cell.open('payments');
    setQuotas(cell, { maxSessions: 1 });
    expect(cell.fsm.namespaceInfo('payments')).toMatchObject({ sessions: 2 });
    expect(cell.acquire(a, '/ls/payments/x').outcome).toMatchObject({ status: 'GRANTED' });
    cell.close(a);
    expect(tryOpen(cell, 'y').outcome).toMatchObject({ code: 'QUOTA_EXCEEDED' });
  });

  it('maxLocks counts live lock names: a new name past it is refused, a held one still re-acquires and queues', () => {
    const cell = new Cell();
    const a = cell.open('payments');
    const b = cell.open('payments');
    setQuotas(cell, { maxLocks: 2 });
    const t1 = cell.grant(a, '/ls/payments/one');
    cell.grant(a, '/ls/payments/two');
    expect(cell.acquire(a, '/ls/payments/three').outcome).toMatchObject({ ok: false, code: 'QUOTA_EXCEEDED' });
    // An existing name is no new lock: b queues for it.
    expect(cell.acquire(b, '/ls/payments/one').outcome).toMatchObject({ ok: true, status: 'QUEUED' });
    cell.release(a, '/ls/payments/two', cell.fsm.getLock('/ls/payments/two').holders[0]?.token ?? 0);
    expect(cell.acquire(a, '/ls/payments/three').outcome).toMatchObject({ status: 'GRANTED' });
    expect(cell.fsm.namespaceInfo('payments')).toMatchObject({ locks: 2, waiters: 1 });
    expect(t1).toBeGreaterThan(0);
    cell.fsm.checkInvariants();
  });

  it('maxWaiters counts waiters over every lock of the namespace; promotion, cancel and expiry free places', () => {
    const cell = new Cell();
    const [holder, w1, w2, w3] = [cell.open(), cell.open(), cell.open(), cell.open()];
    setQuotas(cell, { maxWaiters: 2 });
    const token = cell.grant(holder, '/ls/payments/x');
    cell.grant(holder, '/ls/payments/y');
    expect(cell.acquire(w1, '/ls/payments/x', { requestId: 'q1' }).outcome).toMatchObject({ status: 'QUEUED' });
    expect(cell.acquire(w2, '/ls/payments/y', { requestId: 'q2' }).outcome).toMatchObject({ status: 'QUEUED' });
    expect(cell.acquire(w3, '/ls/payments/x', { requestId: 'q3' }).outcome).toMatchObject({ ok: false, code: 'QUOTA_EXCEEDED' });
    // A try-lock never queues, so the waiter quota does not touch it.
    expect(cell.acquire(w3, '/ls/payments/x', { requestId: 'q4', tryLock: true }).outcome).toMatchObject({
      status: 'TIMED_OUT',
      reason: 'busy',
    });
    cell.release(holder, '/ls/payments/x', token); // w1 promoted: one place free
    expect(cell.fsm.namespaceInfo('payments')?.waiters).toBe(1);
    expect(cell.acquire(w3, '/ls/payments/x', { requestId: 'q5' }).outcome).toMatchObject({ status: 'QUEUED' });
    cell.cancel(w3, '/ls/payments/x', 'q5');
    cell.expire(w2);
    expect(cell.fsm.namespaceInfo('payments')?.waiters).toBe(0);
    cell.fsm.checkInvariants();
  });

  it('travels with the namespace: export, import into another cell, and snapshot restore keep the quotas', () => {
    const source = new Cell({ autoClaim: false });
    source.run({ kind: 'ClaimNamespace', namespace: NS });
    setQuotas(source, { maxSessions: 1, maxLocks: 7, maxWaiters: 9 });
    source.open('payments');
    source.run({ kind: 'FreezeNamespace', namespace: NS });
    expect(setQuotas(source, { maxSessions: 5 }).outcome).toMatchObject({ ok: false, code: 'NAMESPACE_MOVING' });
    const out = source.run({ kind: 'ExportNamespace', namespace: NS }).outcome;
    if (!out.ok) throw new Error(out.code);
    expect(out.data[0]).toBe(EXPORT_FORMAT_VERSION);
    const target = new Cell({ autoClaim: false }, 5000);
    expect(target.run({ kind: 'ImportNamespace', namespace: NS, data: out.data, activate: true }).outcome).toMatchObject({ ok: true });
    expect(target.fsm.namespaceInfo('payments')?.quotas).toEqual({ maxSessions: 1, maxLocks: 7, maxWaiters: 9 });
    expect(tryOpen(target, 'second').outcome).toMatchObject({ code: 'QUOTA_EXCEEDED' });
    const restored = LockStateMachine.restore(target.fsm.snapshot(), { autoClaim: false });
    expect(restored.namespaceInfo('payments')?.quotas).toEqual({ maxSessions: 1, maxLocks: 7, maxWaiters: 9 });
    expect(restored.stateHash()).toBe(target.fsm.stateHash());
    restored.checkInvariants();
  });

  it('still imports an export of format 2 (no quotas): the namespace arrives with none', () => {
    const source = new Cell();
    source.open('payments');
    source.run({ kind: 'FreezeNamespace', namespace: NS });
    const out = source.run({ kind: 'ExportNamespace', namespace: NS }).outcome;
    if (!out.ok) throw new Error(out.code);
    // Format 4 = format 2 with three quota varuints, the fence flag and a credential count (here 0, 0, 0, 0, 0)
    // after namespaceRevision; drop them to get format 2.
    const v4 = out.data;
    const head = 1 + 1 + v4[1]! + varuintLength(v4, 2 + v4[1]!);
    const revEnd = head + varuintLength(v4, head);
    expect([...v4.subarray(revEnd, revEnd + 5)]).toEqual([0, 0, 0, 0, 0]);
    const v2 = new Uint8Array([2, ...v4.subarray(1, revEnd), ...v4.subarray(revEnd + 5)]);
    const target = new Cell({ autoClaim: false });
    expect(target.run({ kind: 'ImportNamespace', namespace: NS, data: v2, activate: true }).outcome).toMatchObject({
      ok: true,
      sessions: 1,
    });
    expect(target.fsm.namespaceInfo('payments')?.quotas).toEqual(NO_QUOTAS);
  });

  it('refuses bad quotas and namespaces it does not own, without changing anything', () => {
    const cell = new Cell({ autoClaim: false });
    expect(setQuotas(cell, { maxSessions: 3 }).outcome).toMatchObject({ ok: false, code: 'NAMESPACE_NOT_HERE' });
    cell.run({ kind: 'ClaimNamespace', namespace: NS });
    for (const bad of [-1, 1.5, QUOTA_VALUE_MAX + 1, Number.NaN]) {
      // Most of these cannot even be encoded (encodeCommand asserts a uint), so they go straight to apply.
      const command = { kind: 'SetNamespaceQuotas', namespace: NS, quotas: quotas({ maxLocks: bad }) } as const;
      expect(cell.fsm.apply(++cell.index, command).outcome).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
    }
    expect(cell.fsm.namespaceInfo('payments')?.quotas).toEqual(NO_QUOTAS);
  });

  it('encodes and decodes the command', () => {
    const command = {
      kind: 'SetNamespaceQuotas',
      namespace: NS,
      quotas: { maxSessions: 1, maxLocks: 300, maxWaiters: QUOTA_VALUE_MAX },
    } as const;
    expect(decodeCommand(encodeCommand(command))).toEqual(command);
  });
});

function varuintLength(bytes: Uint8Array, at: number): number {
  let n = 0;
  while ((bytes[at + n] as number) >= 0x80) n++;
  return n + 1;
}
